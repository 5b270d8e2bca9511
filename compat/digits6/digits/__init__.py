"""DIGITS 6 compatibility for DIGITS Core (distribution ``digits6-compat``).

DIGITS 6 plugins import ``digits.extensions.data.interface``,
``digits.extensions.view.interface``, ``digits.utils`` (``subclass``,
``override``, ``constants``, ``forms``, ``image``) and ``flask.ext.wtf``.
This package provides those names on top of DIGITS Core. Its plugin base
classes are real :class:`digits_core.DataIngestion` / :class:`digits_core.View`
subclasses that translate DIGITS 6 semantics at the boundary (C×H×W
features, ``1×1×N`` labels, ``{name: array}`` view outputs, form instances,
``userdata['is_inference_db']``, ``*_db`` stage names), so the core never
needs to know a plugin was written for DIGITS 6.

Importing ``digits`` also makes ``from flask.ext.wtf import Form`` work
(Flask removed ``flask.ext`` in 1.0): it names :class:`digits.utils.forms.Form`.
"""

from __future__ import annotations

__version__ = "0.1.0"

from . import utils  # noqa: E402,F401  (DIGITS 6 plugins use ``import digits; digits.utils.image...``)
from ._flask_ext import install as _install_flask_ext  # noqa: E402

_install_flask_ext()
