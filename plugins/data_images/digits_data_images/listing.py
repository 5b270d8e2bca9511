"""Finding images: class folders, list files, label files and the seeded per-class split."""

from __future__ import annotations

import logging
import math
import os
import random
from collections.abc import Iterable

from digits_core.paths import resolve_in_roots, server_path_allowed

logger = logging.getLogger(__name__)

#: File extensions taken as images (lower case).
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".ppm", ".pgm", ".pbm", ".webp")


def is_image_name(name: str) -> bool:
    """True for a file name with an image extension (not hidden)."""
    return not name.startswith(".") and name.lower().endswith(IMAGE_EXTENSIONS)


def list_images(folder: str) -> list[str]:
    """Return the image files under ``folder`` (recursively, following symlinks), sorted.

    Each real folder and real file is listed once: a symlink back to a folder
    already walked (a loop such as ``ln -s . loop``) or a second link to the
    same file is skipped with a warning naming it. On the web server (see
    :mod:`digits_core.paths`) a symlink leading outside the data roots is an
    error.
    """
    seen_dirs: set[str] = set()
    seen_files: set[str] = set()
    found = []
    for root, dirs, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(root)
        if real in seen_dirs:
            logger.warning("%s is a symlink loop back to %s, which is already listed; it is followed once", root, real)
            dirs[:] = []
            continue
        seen_dirs.add(real)
        _check_root(root, real)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        # realpath only for links: a plain file's is the real folder + its name (no system call per file)
        links = {entry.name for entry in os.scandir(root) if entry.is_symlink()} if files else set()
        # os.path.join per file costs more than the rest of the listing: join the folder once
        prefix, real_prefix = os.path.join(root, ""), os.path.join(real, "")
        for name in sorted(files):  # sorted: which of two links to one file is kept never depends on the disk
            if not is_image_name(name):
                continue
            path = prefix + name
            real_file = os.path.realpath(path) if name in links else real_prefix + name
            if real_file in seen_files:
                logger.warning("%s is another link to %s, which is already listed; it is skipped", path, real_file)
                continue
            seen_files.add(real_file)
            if name in links:  # a plain file lies in its folder, already checked
                _check_root(path, real_file)
            found.append(path)
    return sorted(found)


def _check_root(path: str, real: str) -> None:
    """On the web server, refuse a path whose real location is outside the data roots."""
    if not server_path_allowed(real):
        raise ValueError(f"{path} leads to {real}, outside the server's data roots")


def class_folders(folder: str) -> list[str]:
    """Return the names of the class sub-folders of ``folder``, sorted (DIGITS order)."""
    return sorted(d.name for d in os.scandir(folder) if d.is_dir() and not d.name.startswith("."))


def scan_class_folders(folder: str) -> dict[str, list[str]]:
    """Map each class sub-folder name of ``folder`` to its image files."""
    return {name: list_images(os.path.join(folder, name)) for name in class_folders(folder)}


def read_labels_file(path: str) -> list[str]:
    """Read class names, one per line (blank lines ignored); index = class id.

    Raises:
        ValueError: The file is unreadable or empty.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            labels = [line.strip() for line in handle if line.strip()]
    except OSError as exc:
        raise ValueError(f"cannot read labels file {path}: {exc.strerror or exc}") from None
    if not labels:
        raise ValueError(f"labels file {path} has no labels")
    return labels


def list_lines(path: str) -> list[tuple[int, str]]:
    """The ``(line number, stripped text)`` of a list file's lines, blank lines and ``#`` comments left out.

    Raises:
        ValueError: The file cannot be read.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        raise ValueError(f"cannot read list file {path}: {exc.strerror or exc}") from None
    return [
        (number, text)
        for number, text in enumerate((line.strip() for line in lines), 1)
        if text and not text.startswith("#")
    ]


def read_list_file(path: str, root: str | None = None) -> list[tuple[str, int]]:
    """Read a DIGITS list file: ``<path> <integer label>`` per line.

    The path may contain spaces (the label is the last field). Relative
    paths are taken from ``root``, or else from the list file's folder.
    Blank lines and lines starting with ``#`` are skipped.

    Raises:
        ValueError: Unreadable file or a malformed line (named by number).
    """
    base = root or os.path.dirname(os.path.abspath(path))
    items = []
    for where, first, last in _two_field_lines(path, "<path> <integer label>"):
        try:
            label = int(last)
        except ValueError:
            raise ValueError(f"{where}: the label (last field) is not an integer") from None
        if label < 0:
            raise ValueError(f"{where}: label {label} is negative")
        items.append((str(resolve_in_roots(first, base=base, where=where)), label))
    return items


def read_label_file_list(path: str, root: str | None, label_file: str) -> list[tuple[str, str]]:
    """``<image path> <label file>`` per line (relative paths from ``root``, else the list's folder).

    Both paths go through the data-roots gate. ``label_file`` names what the label file is in the
    error (``"KITTI label file"``, ``"mask image"``).

    Raises:
        ValueError: Unreadable file or a line without a label file (named by number, never quoted).
    """
    base = root or os.path.dirname(os.path.abspath(path))
    items = []
    for where, first, last in _two_field_lines(path, f"<image path> <{label_file}>"):
        items.append(
            (str(resolve_in_roots(first, base=base, where=where)), str(resolve_in_roots(last, base=base, where=where)))
        )
    return items


def read_path_list(path: str, root: str | None = None) -> list[str]:
    """Read one image path per line (an optional trailing label is ignored)."""
    base = root or os.path.dirname(os.path.abspath(path))
    out = []
    for number, text in list_lines(path):
        parts = text.rsplit(None, 1)
        if len(parts) == 2 and parts[1].lstrip("-").isdigit() and not os.path.exists(os.path.join(base, text)):
            text = parts[0]
        out.append(str(resolve_in_roots(text, base=base, where=f"{path} line {number}")))
    return out


def split_counts(n: int, val_percent: float, test_percent: float) -> tuple[int, int, int]:
    """Return ``(train, val, test)`` counts for ``n`` images of one class (rounded half up)."""
    n_val = int(math.floor(n * val_percent / 100.0 + 0.5))
    n_test = int(math.floor(n * test_percent / 100.0 + 0.5))
    if n_val + n_test > n:
        n_test = max(0, n - n_val)
    return n - n_val - n_test, n_val, n_test


def seeded_shuffle(items: Iterable, seed: int, key: str = "") -> list:
    """Return ``items`` sorted, then shuffled by a generator seeded with ``seed`` and ``key``."""
    out = sorted(items)
    random.Random(f"{seed}:{key}").shuffle(out)
    return out


def _two_field_lines(path: str, expected: str):
    """Yield ``(where, first, last)`` for each ``<first> <last>`` line of a list file (``where`` names the line).

    Raises:
        ValueError: A line without two fields (named by number; never quoted: a list file given by
            mistake, or malice, may hold secrets).
    """
    for number, text in list_lines(path):
        parts = text.rsplit(None, 1)
        if len(parts) != 2:
            raise ValueError(f'{path} line {number}: expected "{expected}"')
        yield f"{path} line {number}", parts[0], parts[1]
