"""``flask.ext.wtf``: the import every DIGITS 6 plugin form makes, served by this package.

Flask dropped the ``flask.ext`` namespace in 1.0 and Flask-WTF 1.x dropped
``Form``; DIGITS 6 plugins still say ``from flask.ext.wtf import Form``.
:func:`install` registers a small ``flask.ext`` package whose ``wtf``
module exports :class:`digits.utils.forms.Form`, a WTForms form that works
outside a Flask request (the core binds and validates it itself, on the web
page, the command line and in Python alike).
"""

from __future__ import annotations

import sys
import types


def install() -> None:
    """Register ``flask.ext`` and ``flask.ext.wtf`` unless Flask already has them."""
    if "flask.ext.wtf" in sys.modules:
        return
    try:
        import flask
    except ImportError:  # no Flask: plugins cannot use flask.ext anyway
        return
    if hasattr(flask, "ext"):
        return
    from .utils.forms import Form

    ext = types.ModuleType("flask.ext", "Compatibility namespace installed by digits6-compat.")
    ext.__path__ = []  # a package, so ``flask.ext.wtf`` resolves as its submodule
    wtf = types.ModuleType("flask.ext.wtf", "DIGITS 6's Flask-WTF import, served by digits6-compat.")
    wtf.Form = Form
    ext.wtf = wtf
    sys.modules["flask.ext"] = ext
    sys.modules["flask.ext.wtf"] = wtf
    flask.ext = ext
