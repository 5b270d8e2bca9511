"""Write a class-folder tree the ``image-classification`` plugin reads directly.

For one tree (the output folder, or ``fine/`` and ``coarse/`` for CIFAR-100)::

    TREE/labels.txt              class names, one per line, line i = class id i
    TREE/train/<class>/*.png     training images
    TREE/test/<class>/*.png      test images
    TREE/train.txt, test.txt     "<path relative to TREE> <class id>" per image

A stage is written into a hidden ``.STAGE.partial`` folder and renamed to
``STAGE`` only when complete, so a stage folder is never half written.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

#: ``progress(task, done, total)``.
ProgressCallback = Callable[[str, int, "int | None"], None]


def write_text_atomic(path: Path, lines: Iterable[str]) -> None:
    """Write ``lines`` (one per line) to ``path`` via a temporary file and a rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    os.replace(tmp, path)


def _save_png(item: tuple[Path, np.ndarray]) -> None:
    from PIL import Image

    path, pixels = item
    if pixels.ndim == 3 and pixels.shape[2] == 1:
        pixels = pixels[:, :, 0]
    Image.fromarray(pixels).save(path, format="PNG")


def _unique_name(name: str, used: set[str], index: int) -> str:
    stem = os.path.splitext(os.path.basename(name))[0] or f"{index:05d}"
    candidate = f"{stem}.png"
    if candidate in used:
        candidate = f"{stem}_{index:05d}.png"
    used.add(candidate)
    return candidate


def write_stage(
    tree: Path,
    stage: str,
    images: np.ndarray,
    labels: Sequence[int] | np.ndarray,
    class_names: Sequence[str],
    *,
    filenames: Sequence[str] | None = None,
    progress: ProgressCallback | None = None,
    threads: int = 4,
    label: str | None = None,
) -> list[str]:
    """Write one stage of a class tree as PNG files and return its list lines.

    Args:
        tree: The tree folder (``TREE`` above).
        stage: ``"train"`` or ``"test"``.
        images: ``N×H×W×C`` (or ``N×H×W``) uint8 pixels.
        labels: ``N`` class ids (indexes into ``class_names``).
        class_names: Folder name of each class id.
        filenames: Original file names (their stems are kept); default ``NNNNN.png``.
        progress: Called with ``("write LABEL", done, N)``.
        threads: PNG encoding threads.
        label: Names the stage in progress reports (default: ``stage``).

    Returns:
        The ``"<relative path> <class id>"`` lines, in input order (also written to ``TREE/STAGE.txt``).
    """
    tree.mkdir(parents=True, exist_ok=True)
    staging = tree / f".{stage}.partial"
    if staging.exists():
        shutil.rmtree(staging)
    for name in class_names:
        (staging / name).mkdir(parents=True)
    used: dict[int, set[str]] = {}
    jobs: list[tuple[Path, np.ndarray]] = []
    lines: list[str] = []
    for index, class_id in enumerate(labels):
        class_id = int(class_id)
        if filenames is not None:
            name = _unique_name(filenames[index], used.setdefault(class_id, set()), index)
        else:
            name = f"{index:05d}.png"
        cls = class_names[class_id]
        jobs.append((staging / cls / name, images[index]))
        lines.append(f"{stage}/{cls}/{name} {class_id}")
    task = f"write {label or stage}"
    total = len(jobs)
    done = 0
    if progress:
        progress(task, 0, total)
    step = 512
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        for start in range(0, total, step):
            list(pool.map(_save_png, jobs[start : start + step]))
            done = min(total, start + step)
            if progress:
                progress(task, done, total)
    publish_stage(tree, stage, staging)
    write_text_atomic(tree / f"{stage}.txt", lines)
    return lines


def publish_stage(tree: Path, stage: str, staging: Path) -> None:
    """Replace ``TREE/STAGE`` with the finished ``staging`` folder."""
    final = tree / stage
    if final.exists() or final.is_symlink():
        old = tree / f".{stage}.old"
        if old.exists():
            shutil.rmtree(old)
        os.replace(final, old)
        os.replace(staging, final)
        shutil.rmtree(old)
    else:
        os.replace(staging, final)


def link_stage(
    source_tree: Path,
    source_lines: Sequence[str],
    tree: Path,
    stage: str,
    labels: Sequence[int] | np.ndarray,
    class_names: Sequence[str],
) -> list[str]:
    """Build a second class tree over the same images with other labels (hard links).

    Used for CIFAR-100's coarse tree: each image of ``source_tree`` is linked
    (copied where links are not possible) into ``TREE/STAGE/<coarse class>/``.

    Args:
        source_tree: The tree already written (e.g. ``fine/``).
        source_lines: Its list lines for this stage, in image order.
        tree: The tree to build (e.g. ``coarse/``).
        stage: ``"train"`` or ``"test"``.
        labels: Class id of each image in the new tree.
        class_names: Folder name of each new class id.

    Returns:
        The new tree's list lines (also written to ``TREE/STAGE.txt``).
    """
    tree.mkdir(parents=True, exist_ok=True)
    staging = tree / f".{stage}.partial"
    if staging.exists():
        shutil.rmtree(staging)
    for name in class_names:
        (staging / name).mkdir(parents=True)
    used: dict[int, set[str]] = {}
    lines = []
    for index, (line, label) in enumerate(zip(source_lines, labels)):
        label = int(label)
        rel = line.rsplit(" ", 1)[0]
        src = source_tree / rel
        name = _unique_name(src.name, used.setdefault(label, set()), index)
        target = staging / class_names[label] / name
        try:
            os.link(src, target)
        except OSError:
            shutil.copyfile(src, target)
        lines.append(f"{stage}/{class_names[label]}/{name} {label}")
    publish_stage(tree, stage, staging)
    write_text_atomic(tree / f"{stage}.txt", lines)
    return lines
