"""Turning what the user gave (files, folders, list files, arrays) into input items.

* an image file (see :data:`~digits_core.inference.imageio.IMAGE_SUFFIXES`);
* a folder: every image file below it, recursively, sorted by path;
* a list file (any other file): one input per line, ``path [label]``;
  blank lines and lines starting with ``#`` are skipped; relative paths are
  relative to the list file's folder. The label is a class index or class
  name (classification), a mask image path (segmentation, relative like
  the images) or numbers (regression);
* in the Python API, a numpy array (an already-read ``H×W[×C]`` image,
  named ``array-<i>``) or an ``(input_id, array[, label])`` tuple.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InferenceError
from ..paths import check_server_path, resolve_in_roots, server_path_allowed
from .imageio import is_image_file


class UnsupportedInputError(InferenceError):
    """An input the generic reader cannot take (not an image, a folder of images or a list file).

    A model whose data plugin reads its own inputs (DICOM, a record) takes them through the
    plugin's inference options instead; the CLI names those options.
    """


@dataclass
class InputItem:
    """One input before reading.

    Attributes:
        input_id: Name shown in results (the path as given, or a record name).
        path: The image file, or ``None`` for arrays.
        array: An already-read image, or ``None``.
        label: The label as written (string from a list file, or a Python value).
        base: Folder relative label paths are resolved against.
    """

    input_id: str
    path: Path | None = None
    array: np.ndarray | None = None
    label: Any = None
    base: Path | None = None


def _from_folder(folder: Path) -> list[InputItem]:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and is_image_file(p) and server_path_allowed(p))
    if not files:
        raise UnsupportedInputError(f"Folder {folder} holds no image files.")
    return [InputItem(str(p), path=p) for p in files]


def _from_list_file(path: Path) -> list[InputItem]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise UnsupportedInputError(f"Input {path} is neither an image (by its suffix) nor a text list file.") from None
    base = path.parent
    items = []
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        image, label = line, None
        if not (base / line).is_file():
            parts = line.rsplit(None, 1)
            if len(parts) == 2:
                image, label = parts
        # The line is not quoted: a file given by mistake (or malice) as a list may hold secrets.
        try:
            image_path = resolve_in_roots(image, base=base, where=f"{path}, line {number}")
        except ValueError as exc:
            raise InferenceError(str(exc)) from None
        if not image_path.is_file():
            raise InferenceError(f"{path}, line {number}: the image it names does not exist.")
        items.append(InputItem(image, path=image_path, label=label, base=base))
    if not items:
        raise InferenceError(f"List file {path} names no inputs.")
    return items


def collect_inputs(inputs: Iterable[Any]) -> list[InputItem]:
    """Expand files, folders, list files and arrays into :class:`InputItem` objects.

    Raises:
        InferenceError: A path does not exist, a folder has no images, or a
            list file line names a missing image.
    """
    items: list[InputItem] = []
    for index, given in enumerate(inputs):
        if isinstance(given, np.ndarray):
            items.append(InputItem(f"array-{index}", array=given))
            continue
        if isinstance(given, tuple):
            if len(given) not in (2, 3):
                raise InferenceError("An input tuple is (input_id, array) or (input_id, array, label).")
            name, value = given[0], given[1]
            label = given[2] if len(given) == 3 else None
            if isinstance(value, np.ndarray):
                items.append(InputItem(str(name), array=value, label=label))
            else:
                items.append(
                    InputItem(str(name), path=check_server_path(value, "inputs", form_name="inference"), label=label)
                )
            continue
        path = check_server_path(os.fspath(given), "inputs", form_name="inference")
        if path.is_dir():
            items.extend(_from_folder(path))
        elif path.is_file():
            items.extend([InputItem(str(given), path=path)] if is_image_file(path) else _from_list_file(path))
        else:
            raise InferenceError(f"Input {given} does not exist.")
    return items
