"""Inference inputs shared by the image plugins (the :class:`~digits_data_images.forms.InferenceForm`).

A plugin created with ``is_inference_db=True`` and the dataset's userdata
plus the inference form's values lists, for stage ``"test"``, one entry per
image: ``(path, label or None)``. An uploaded file (an object with
``read()``, e.g. Flask's ``FileStorage``, or raw bytes) is read into memory
when the plugin is created and listed as ``("upload:<file name>", None)``.
"""

from __future__ import annotations

import io
from typing import Any, NamedTuple

from . import listing
from .encoding import load_resized, read_file
from .forms import expand

UPLOAD_PREFIX = "upload:"


class InferenceEntry(NamedTuple):
    """One inference input: a tuple ``(path, label)`` whose ``str()`` is the path (the input id shown)."""

    path: str
    label: Any = None

    def __str__(self) -> str:
        return self.path


def prepare_upload(plugin) -> None:
    """Read an uploaded ``image_file`` into memory so entries stay plain strings."""
    plugin._upload = None
    plugin._upload_name = None
    upload = getattr(plugin, "image_file", None)
    if upload is None or upload == "":
        return
    if hasattr(upload, "read"):
        name = getattr(upload, "filename", None) or getattr(upload, "name", None) or "image"
        plugin._upload = upload.read()
    elif isinstance(upload, (bytes, bytearray)):
        name, plugin._upload = "image", bytes(upload)
    else:
        return  # a path string: listed like image_path
    plugin._upload_name = f"{UPLOAD_PREFIX}{name}"
    plugin.image_file = str(name)
    plugin.userdata["image_file"] = str(name)


def inference_entries(plugin, stage: str) -> list[tuple]:
    """Return the ``(path, label or None)`` entries of the inference inputs (stage ``"test"`` only).

    Entries are :class:`InferenceEntry` tuples, so the input id is the path. An image list with
    labels (``show_labels``) holds ``<path> <class id>`` lines, or ``<path> <label file>`` lines
    when the plugin's ``label_file_kind`` names what its label files are (segmentation masks,
    KITTI box files); the plugin's ``encode_entry`` reads them.
    """
    if stage != "test":
        return []
    entries: list[tuple] = []
    if getattr(plugin, "_upload_name", None):
        entries.append((plugin._upload_name, None))
    upload = getattr(plugin, "image_file", None)
    if isinstance(upload, str) and upload and not getattr(plugin, "_upload_name", None):
        entries.append((expand(upload), None))
    if getattr(plugin, "image_path", None):
        entries.append((expand(plugin.image_path), None))
    if getattr(plugin, "image_folder", None):
        entries.extend((path, None) for path in listing.list_images(expand(plugin.image_folder)))
    if getattr(plugin, "image_list", None):
        root = expand(getattr(plugin, "list_root", None))
        label_files = getattr(plugin, "label_file_kind", None)
        if getattr(plugin, "show_labels", False) and label_files:  # the label is a file: a mask, KITTI boxes
            entries.extend(listing.read_label_file_list(expand(plugin.image_list), root, label_files))
        elif getattr(plugin, "show_labels", False):
            entries.extend(listing.read_list_file(expand(plugin.image_list), root))
        else:
            entries.extend((path, None) for path in listing.read_path_list(expand(plugin.image_list), root))
    return [InferenceEntry(*entry) for entry in entries]


def read_entry_bytes(plugin, path: str) -> bytes:
    """Return the bytes of an inference entry (the upload or a file)."""
    if path == getattr(plugin, "_upload_name", None):
        return plugin._upload
    return read_file(path)


def encode_inference_entry(plugin, entry):
    """Return ``(H×W×C array, label or None)`` for an inference entry, resized like the dataset."""
    path, label = entry if isinstance(entry, tuple) else (entry, None)
    arr = load_resized(
        io.BytesIO(read_entry_bytes(plugin, path)),
        path,
        channels=plugin.channels,
        width=int(plugin.width),
        height=int(plugin.height),
        resize_mode=plugin.resize_mode,
        seed=int(plugin.seed or 0),
    )
    return arr, label
