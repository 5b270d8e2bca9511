"""The two plugin interfaces of DIGITS Core: :class:`DataIngestion` and :class:`View`."""

from .base import PLUGIN_ID_PATTERN, PluginBase
from .data import STAGES, TEST, TRAIN, VAL, DataIngestion
from .view import View, ViewContext

__all__ = ["PluginBase", "PLUGIN_ID_PATTERN", "DataIngestion", "View", "ViewContext", "STAGES", "TRAIN", "VAL", "TEST"]
