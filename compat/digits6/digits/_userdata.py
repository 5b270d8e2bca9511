"""DIGITS 6 userdata: a dict where ``'is_inference_db'`` is a flag, never a persisted value.

DIGITS 6 plugins write ``self.userdata['is_inference_db'] = is_inference_db``
and read it back in ``itemize_entries``. DIGITS Core persists userdata with
the dataset and passes ``is_inference_db`` itself when it builds an
inference instance, so the key must not be stored. :class:`Userdata`
answers reads and writes of that key from a flag held beside the dict;
``items()``, ``keys()``, JSON and ``dict(userdata)`` never see it.

A flat DIGITS 6 colour palette stored under ``'color_palette'`` is kept
as the list of ``[r, g, b]`` DIGITS Core reads.
"""

from __future__ import annotations

from typing import Any

from ._translate import palette_to_core
from .utils.constants import COLOR_PALETTE_ATTRIBUTE

#: The userdata key DIGITS 6 plugins use for the inference flag.
INFERENCE_KEY = "is_inference_db"
_MISSING = object()


class Userdata(dict):
    """Plugin userdata with ``'is_inference_db'`` kept out of the stored items."""

    def __init__(self, *args: Any, is_inference_db: bool = False, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if COLOR_PALETTE_ATTRIBUTE in self:
            super().__setitem__(COLOR_PALETTE_ATTRIBUTE, palette_to_core(super().__getitem__(COLOR_PALETTE_ATTRIBUTE)))
        flag = super().pop(INFERENCE_KEY, None)
        self.is_inference_db = bool(is_inference_db if flag is None else flag)

    def __getitem__(self, key):
        if key == INFERENCE_KEY:
            return self.is_inference_db
        return super().__getitem__(key)

    def __setitem__(self, key, value):
        if key == INFERENCE_KEY:
            self.is_inference_db = bool(value)
        else:
            super().__setitem__(key, palette_to_core(value) if key == COLOR_PALETTE_ATTRIBUTE else value)

    def __delitem__(self, key):
        if key != INFERENCE_KEY:
            super().__delitem__(key)

    def __contains__(self, key):
        return key == INFERENCE_KEY or super().__contains__(key)

    def get(self, key, default=None):
        return self.is_inference_db if key == INFERENCE_KEY else super().get(key, default)

    def setdefault(self, key, default=None):
        if key == INFERENCE_KEY:
            return self.is_inference_db
        return super().setdefault(key, default)

    def pop(self, key, default=_MISSING):
        if key == INFERENCE_KEY:
            return self.is_inference_db
        return super().pop(key) if default is _MISSING else super().pop(key, default)

    def update(self, *args, **kwargs):
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def copy(self) -> dict:
        """A plain dict of the stored items (without the flag)."""
        return dict(self)
