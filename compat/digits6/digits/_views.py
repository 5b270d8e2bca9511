"""What a DIGITS 6 view gets, as DIGITS 6 gave it (each piece unit-tested).

* :func:`output_to_digits6`: DIGITS Core's network output of one sample is
  channels-last (``H×W×C`` class scores of a segmentation network, an
  ``H×W×C`` image); DIGITS 6 views were handed Caffe's/Torch's ``C×H×W``
  (the original ``imageSegmentation`` view does ``argmax(axis=0)``).
  Vectors and ``N×K`` arrays pass as they are.
* :func:`palette_to_digits6`: DIGITS 6 kept a dataset's palette as a flat
  PIL palette of 256 colours (768 values, unused ones black); DIGITS Core
  keeps one ``[r, g, b]`` per class. Views built a 256-entry colormap from it.
* :func:`py2_context`: dicts a template gets answer ``iteritems()``,
  ``itervalues()``, ``iterkeys()`` and ``has_key()``, as Python 2 dicts did.
* :func:`digits6_template`: AngularJS ``{[ ... ]}`` blocks (DIGITS 6's
  results app, not loaded here) are stripped; inline ``<script>`` blocks get
  the page's Content-Security-Policy nonce and run once the page (with the
  jQuery the compat loads) is there.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

#: Values of a DIGITS 6 palette: 256 colours × RGB.
PALETTE_VALUES = 768

_ANGULAR = re.compile(r"\{\[.*?\]\}", re.S)
_INLINE_SCRIPT = re.compile(r"<script(?P<attrs>(?:(?!\bsrc=)[^>])*)>(?P<body>.*?)</script>", re.S | re.I)


def output_to_digits6(output: Any) -> Any:
    """One output array as DIGITS 6 passed it: a 3-D ``H×W×C`` array becomes ``C×H×W``."""
    if isinstance(output, np.ndarray) and output.ndim == 3:
        return np.ascontiguousarray(np.transpose(output, (2, 0, 1)))
    return output


def palette_to_digits6(palette: Any) -> list[int] | None:
    """A palette (``[[r, g, b], ...]`` or flat) as DIGITS 6 built it: flat, padded with black to 768 values."""
    if palette is None:
        return None
    flat = [int(v) for v in np.asarray(palette, dtype=np.int64).reshape(-1)]
    return flat + [0] * (PALETTE_VALUES - len(flat)) if len(flat) < PALETTE_VALUES else flat


class Py2Dict(dict):
    """A dict with Python 2's iterator methods, for DIGITS 6 templates (``data.iteritems()``)."""

    def iteritems(self):
        """``items()``, as an iterator."""
        return iter(self.items())

    def itervalues(self):
        """``values()``, as an iterator."""
        return iter(self.values())

    def iterkeys(self):
        """``keys()``, as an iterator."""
        return iter(self.keys())

    def has_key(self, key) -> bool:
        """``key in self``."""
        return key in self


def py2_context(value: Any) -> Any:
    """``value`` with every dict in it (in dicts, lists and tuples) a :class:`Py2Dict`."""
    if isinstance(value, dict) and not isinstance(value, Py2Dict):
        return Py2Dict((k, py2_context(v)) for k, v in value.items())
    if isinstance(value, list):
        return [py2_context(v) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(py2_context(v) for v in value)
    return value


def digits6_template(source: Any) -> Any:
    """A DIGITS 6 template's source with AngularJS blocks stripped and inline scripts made to run here.

    An inline ``<script>`` (no ``src``) gets the nonce placeholder the web UI
    replaces with the page's CSP nonce, and its body runs on
    ``DOMContentLoaded``, after the jQuery the compat loads at the end of
    the page.
    """
    if not isinstance(source, str):
        return source
    from digits_core.templating import CSP_NONCE_PLACEHOLDER

    def nonce(match: re.Match) -> str:
        attrs = match.group("attrs")
        if "nonce=" in attrs or re.search(r'type=["\'](?!text/javascript)', attrs):
            return match.group(0)  # already nonce'd, or not JavaScript (a template, JSON)
        return (
            f'<script nonce="{CSP_NONCE_PLACEHOLDER}"{attrs}>document.addEventListener("DOMContentLoaded", '
            f"function () {{\n{match.group('body')}\n}});</script>"
        )

    return _INLINE_SCRIPT.sub(nonce, _ANGULAR.sub("", source))
