"""DIGITS view plugin ``image-segmentation``: coloured class maps, overlays, outlines, Dice/IoU."""

from .view import SegmentationView

__all__ = ["SegmentationView"]
