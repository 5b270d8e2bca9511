"""Where a pool's candidates come from: a folder of images (or of volumes) under a data root.

:func:`create_folder_pool` lists the image files of a folder (recursively, sorted; the suffixes
:func:`digits_core.inference.imageio.is_image_file` reads) as candidates whose ``source`` is the path
relative to the folder; with ``volumes=True`` its ``D×H×W`` ``.npy`` volumes instead (a pool of
``dimensions: 3``, each file's header read to check it is one readable 3-D array). The folder passes the one path gate (:func:`digits_core.paths.check_server_path`:
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


def list_folder(folder: str | os.PathLike, *, volumes: bool = False) -> list[str]:
    """The image files (``.npy`` volumes with ``volumes``) under ``folder`` as sorted relative paths.

    POSIX separators; hidden entries skipped.

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
            wanted = name.lower().endswith(".npy") if volumes else is_image_file(name)
            if name.startswith(".") or not wanted:
                continue
            found.append(Path(dirpath, name).relative_to(root).as_posix())
            if len(found) > MAX_CANDIDATES:
                raise PoolError(f"The pool folder {root} holds more than {MAX_CANDIDATES} images; split it.")
    return found


def check_volume_file(path: Path) -> None:
    """Check that ``path`` is a readable ``.npy`` file of one ``D×H×W`` array (its header only is read).

    Raises:
        PoolError: The file cannot be read as a ``.npy`` array, or is not 3-D (named).
    """
    import numpy as np

    try:
        with path.open("rb") as f:
            if f.read(6) != b"\x93NUMPY":  # np.load would take it for a pickle and say so
                raise ValueError("no .npy header")
        array = np.load(path, mmap_mode="r", allow_pickle=False)  # mapped: the voxels are not read
        shape = tuple(array.shape)
        del array
    except (OSError, ValueError, EOFError) as exc:
        raise PoolError(f"{path}: not a readable .npy volume ({exc}); nothing was created.") from None
    if len(shape) != 3 or min(shape) < 1:
        raise PoolError(f"{path}: a volume is a D×H×W array, not shape {shape}; nothing was created.")


def create_folder_pool(
    name: str,
    folder: str | os.PathLike,
    *,
    class_labels: list[str] | None = None,
    modality: str | None = None,
    volumes: bool = False,
    jobs_dir: Any = None,
) -> Pool:
    """Create a pool of the images in ``folder`` (every file a candidate, state ``unlabelled``).

    The CLI, the JSON API and the New pool form all create a folder pool here.

    Args:
        name: The pool's name.
        folder: The folder of unlabelled images (under a data root in the web server).
        class_labels: Class names (index = class id); default: the scoring model's.
        modality: The images' modality (e.g. ``"MR"``), checked against a model's dataset when both say.
        volumes: A pool of the folder's ``D×H×W`` ``.npy`` volumes (``dimensions: 3``), not of its images.
        jobs_dir: The jobs folder.

    Raises:
        PathOutsideRootsError: The folder is outside the server's data roots.
        PoolError: The folder is missing or holds no image; with ``volumes``, no ``.npy`` volume, or a
            ``.npy`` file that is not a readable ``D×H×W`` array (named).
    """
    root = check_server_path(folder, "folder", form_name="pool").resolve()
    paths = list_folder(root, volumes=volumes)
    if volumes:
        if not paths:
            raise PoolError(f"The pool folder {root} holds no .npy volume; nothing was created.")
        for rel in paths:
            check_volume_file(root / rel)
    source = {"kind": "folder", "root": str(root)}
    return create_pool(
        name,
        source,
        [{"path": p} for p in paths],
        dimensions=3 if volumes else 2,
        class_labels=class_labels,
        modality=modality,
        jobs_dir=jobs_dir,
    )
