from __future__ import absolute_import

from .data import DataIngestion

__all__ = ['DataIngestion']
