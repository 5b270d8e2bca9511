"""Plugins that reuse ids: one third-party id, one bundled id on purpose, one bundled id by accident."""

from digits_sample_basic import NumbersIngestion, TextView


class NumbersAgain(NumbersIngestion):
    """Claims "sample-numbers", the id of digits-sample-basic's data plugin."""


class SegmentationOnPurpose(NumbersIngestion):
    """Replaces the bundled "image-segmentation" data plugin, on purpose."""

    plugin_id = "image-segmentation"
    replaces_bundled = True


class ClassificationViewAgain(TextView):
    """Claims the bundled view id "image-classification" without saying so."""

    plugin_id = "image-classification"
