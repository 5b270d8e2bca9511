"""Where a pool's candidates come from: a folder of images under a data root.

:func:`create_folder_pool` lists the image files of a folder (recursively, sorted; the suffixes
:func:`digits_core.inference.imageio.is_image_file` reads) as candidates whose ``source`` is the path
relative to the folder. The folder passes the one path gate (:func:`digits_core.paths.check_server_path`:
in the web server, only under its data roots). Files are not opened here: a file that is not an image
is reported by the scoring that reads it, named, and nothing stored changes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..inference.imageio import is_image_file
from ..paths import check_server_path
from .pool import Pool, PoolError, create_pool

#: The most candidates one folder pool lists.
MAX_CANDIDATES = 1_000_000


def list_folder(folder: str | os.PathLike) -> list[str]:
    """The image files under ``folder`` as sorted relative paths (POSIX separators; hidden entries skipped).

    Raises:
        PoolError: The folder does not exist, or holds more than :data:`MAX_CANDIDATES` images.
    """
    root = Path(folder)
    if not root.is_dir():
        raise PoolError(f"The pool folder {root} does not exist or is not a folder.")
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith(".") or not is_image_file(name):
                continue
            found.append(Path(dirpath, name).relative_to(root).as_posix())
            if len(found) > MAX_CANDIDATES:
                raise PoolError(f"The pool folder {root} holds more than {MAX_CANDIDATES} images; split it.")
    return found


def create_folder_pool(
    name: str,
    folder: str | os.PathLike,
    *,
    class_labels: list[str] | None = None,
    modality: str | None = None,
    jobs_dir: Any = None,
) -> Pool:
    """Create a pool of the images in ``folder`` (every file a candidate, state ``unlabelled``).

    Args:
        name: The pool's name.
        folder: The folder of unlabelled images (under a data root in the web server).
        class_labels: Class names (index = class id); default: the scoring model's.
        modality: The images' modality (e.g. ``"MR"``), checked against a model's dataset when both say.
        jobs_dir: The jobs folder.

    Raises:
        PathOutsideRootsError: The folder is outside the server's data roots.
        PoolError: The folder is missing or holds no image.
    """
    root = check_server_path(folder, "folder", form_name="pool").resolve()
    paths = list_folder(root)
    source = {"kind": "folder", "root": str(root)}
    return create_pool(
        name,
        source,
        [{"path": p} for p in paths],
        class_labels=class_labels,
        modality=modality,
        jobs_dir=jobs_dir,
    )
