"""The two plugin interfaces of DIGITS Core: :class:`DataIngestion` and :class:`View`."""

from .base import PluginBase, PLUGIN_ID_PATTERN
from .data import DataIngestion, STAGES, TRAIN, VAL, TEST
from .view import View

__all__ = ["PluginBase", "PLUGIN_ID_PATTERN", "DataIngestion", "View", "STAGES", "TRAIN", "VAL", "TEST"]
