from digits_sample_basic import NumbersIngestion


class DuplicateNumbers(NumbersIngestion):
    """Claims the id "image-classification" of a bundled plugin, without replaces_bundled."""

    plugin_id = "image-classification"
