"""DIGITS 6 userdata: a dict where ``'is_inference_db'`` is a flag, never a persisted value.

DIGITS 6 plugins write ``self.userdata['is_inference_db'] = is_inference_db``
and read it back in ``itemize_entries``. DIGITS Core persists userdata with
the dataset and passes ``is_inference_db`` itself when it builds an
inference instance, so the key must not be stored. :class:`Userdata`
answers reads and writes of that key from a flag held beside the dict;
``items()``, ``keys()``, JSON and ``dict(userdata)`` never see it.

A flat DIGITS 6 colour palette stored under ``'color_palette'`` is kept
as the list of ``[r, g, b]`` DIGITS Core reads.

Values JSON cannot hold (the Sunnybrook plugin's ``Contour`` objects: DIGITS
6 pickled the whole job) are pickled by :func:`store_userdata` into
``digits6-userdata.pkl`` in the dataset's own job folder; ``dataset.json``
keeps a marker in their place, and :func:`restore_userdata` puts the
objects back when the plugin is re-created (for inference).
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
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


#: The file, in the dataset's job folder, holding the userdata values JSON cannot hold.
PICKLE_FILE = "digits6-userdata.pkl"
#: The key of the marker that stands for a pickled value in ``dataset.json``.
PICKLED = "digits6_pickled"


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def store_userdata(userdata: dict, job_path: Any) -> dict:
    """The userdata with each value JSON cannot hold pickled into ``job_path/digits6-userdata.pkl``.

    Returns:
        A dict for ``dataset.json``: those values replaced by
        ``{"digits6_pickled": FILE, "key": KEY, "job_file": FILE}``; the
        dataset reader gives ``job_file`` back as the file's path in the job
        folder where it is now (moving the jobs folder keeps it readable).
    """
    stored = dict(userdata)
    objects = {key: value for key, value in stored.items() if not _is_json(value)}
    if not objects:
        return stored
    path = Path(job_path) / PICKLE_FILE
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as handle:
        pickle.dump(objects, handle, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(partial, path)
    for key in objects:  # a file name, resolved in the job folder wherever it is (the reader's "job_file")
        stored[key] = {PICKLED: PICKLE_FILE, "key": key, "job_file": PICKLE_FILE}
    return stored


def restore_userdata(values: dict) -> dict:
    """``values`` with every pickled-value marker replaced by the object it stands for.

    Raises:
        ValueError: The marker names another file, or the file or its key is
            gone (the message names the key and the file).
    """
    markers = {
        key: value
        for key, value in values.items()
        if isinstance(value, dict) and set(value) - {"job_file"} == {PICKLED, "key"}
    }
    if not markers:
        return values
    restored, files = dict(values), {}
    for key, marker in markers.items():
        path = Path(str(marker.get("job_file") or marker[PICKLED]))  # datasets built before: an absolute path
        if path.name != PICKLE_FILE or not path.is_absolute():
            raise ValueError(f'userdata key "{key}": {path} is not the {PICKLE_FILE} file of a dataset job folder')
        try:
            if path not in files:
                with open(path, "rb") as handle:
                    files[path] = pickle.load(handle)  # written by store_userdata in the dataset's job folder
            restored[key] = files[path][marker["key"]]
        except (OSError, KeyError, pickle.UnpicklingError) as exc:
            raise ValueError(
                f'userdata key "{key}" was pickled into {path}, which cannot be read back '
                f"({type(exc).__name__}: {exc}); build the dataset again"
            ) from exc
    return restored
