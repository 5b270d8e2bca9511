# A DIGITS 6 *built-in* view, as digits/extensions/view/rawData was: no setup.py, a relative import.
from __future__ import absolute_import

from .view import Visualization

__all__ = ['Visualization']
