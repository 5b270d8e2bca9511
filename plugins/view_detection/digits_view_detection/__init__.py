"""DIGITS view plugin ``bounding-boxes``: detections drawn on their images, TP/FP/FN, per-class AP, PR curves."""

from .view import BoundingBoxesView

__all__ = ["BoundingBoxesView"]
