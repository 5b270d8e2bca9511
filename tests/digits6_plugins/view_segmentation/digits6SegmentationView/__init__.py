from __future__ import absolute_import

from .view import Visualization

__all__ = ['Visualization']
