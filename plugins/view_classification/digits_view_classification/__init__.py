"""DIGITS view plugin ``image-classification``: top-N classes, accuracy and confusion matrix."""

from .view import ClassificationView

__all__ = ["ClassificationView"]
