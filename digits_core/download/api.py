"""``download_dataset``: fetch a standard dataset and unpack it as class folders.

The output folder ends up as::

    DIR/downloads/            the verified archives (kept, so a re-run fetches nothing)
    DIR/labels.txt            class names, line i = class id i
    DIR/train/<class>/*.png   DIR/test/<class>/*.png
    DIR/train.txt, test.txt   "<path relative to DIR> <class id>" per image
    DIR/.digits-download.json what was done (lets a re-run skip finished work)

CIFAR-100 has two such trees, ``DIR/fine/`` (100 classes) and
``DIR/coarse/`` (20 super-classes; hard links to the same PNG files).
"""

from __future__ import annotations

import json
import logging
import os
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..jobs import write_json_atomic
from . import formats
from .errors import DownloadError, NetworkError
from .fetch import _local_path, fetch, verify_md5
from .layout import link_stage, write_stage, write_text_atomic
from .specs import DATASETS, DatasetSpec, RemoteFile

logger = logging.getLogger(__name__)

MARKER = ".digits-download.json"
#: ``progress(task, done, total)``: ``total`` is ``None`` when unknown.
ProgressCallback = Callable[[str, int, "int | None"], None]


@dataclass
class TreeSummary:
    """One class tree written by :func:`download_dataset`.

    Attributes:
        folder: The tree folder (holds ``labels.txt``, ``train/``, ``test/``).
        classes: Class names, index = class id.
        counts: Number of images per stage (``{"train": 60000, "test": 10000}``).
    """

    folder: Path
    classes: list[str]
    counts: dict[str, int]


@dataclass
class DownloadResult:
    """What :func:`download_dataset` produced.

    Attributes:
        dataset: The dataset name (``mnist``...).
        folder: The output folder.
        trees: The class trees (one; two for CIFAR-100: fine, then coarse).
        archives: The verified archive files used.
        skipped: Stages (``"train"``, ``"test"``) already complete and left as they were.
    """

    dataset: str
    folder: Path
    trees: list[TreeSummary]
    archives: list[Path]
    skipped: list[str] = field(default_factory=list)
    image_size: tuple[int, int, int] = (0, 0, 0)

    def next_steps(self) -> list[str]:
        """Return ``digits dataset create`` command lines that build a dataset from each tree."""
        commands = []
        for tree in self.trees:
            suffix = f"-{tree.folder.name}" if tree.folder != self.folder else ""
            height, width, channels = self.image_size
            size = (
                f"--image-type {'grayscale' if channels == 1 else 'color'} --width {width} --height {height} "
                if width
                else ""
            )
            commands.append(
                "digits dataset create image-classification "
                f"--name {self.dataset}{suffix} {size}"
                f"--folder {_quote(tree.folder / 'train')} "
                f"--test-folder {_quote(tree.folder / 'test')}"
            )
        return commands


def _quote(path: Path) -> str:
    import shlex

    return shlex.quote(str(path))


def _file_sources(spec: DatasetSpec, remote: RemoteFile, source: str | None) -> list[str]:
    """Return the URLs or local paths to try for one file, in order."""
    if not source:
        return spec.urls(remote)
    local = _local_path(source)
    if local is not None:
        if local.is_dir():
            return [str(local / remote.name)]
        if local.is_file():
            if len(spec.files) == 1 or local.name == remote.name:
                return [str(local)]
            raise DownloadError(
                f"--source {local} is a single file, but {spec.title} has {len(spec.files)} files "
                f"({', '.join(f.name for f in spec.files)}); point --source at the folder or URL holding them."
            )
        raise DownloadError(f"--source {local} does not exist; give a folder, an archive file or a URL.")
    path = urllib.parse.urlparse(source).path
    if len(spec.files) == 1 and not path.endswith("/") and path.rsplit("/", 1)[-1]:
        return [source]
    if path.rsplit("/", 1)[-1] in {f.name for f in spec.files}:
        source = source.rsplit("/", 1)[0]
    return [source.rstrip("/") + "/" + remote.name]


def _obtain(
    spec: DatasetSpec,
    remote: RemoteFile,
    folder: Path,
    source: str | None,
    md5: str | None,
    progress: ProgressCallback | None,
    timeout: float,
) -> Path:
    """Return a verified local copy of one file, fetching it if needed."""
    candidates = _file_sources(spec, remote, source)
    failures = []
    for candidate in candidates:
        local = _local_path(candidate)
        if local is not None:
            if not local.is_file():
                raise DownloadError(
                    f"{local} not found: the --source folder must hold {remote.name} "
                    f"(files of {spec.name}: {', '.join(f.name for f in spec.files)})."
                )
            verify_md5(local, md5, str(local))  # a local copy is used in place
            return local
        try:
            return fetch(candidate, folder / "downloads" / remote.name, md5=md5, progress=progress, timeout=timeout)
        except NetworkError as exc:
            logger.info("%s", exc)
            failures.append(f"  {candidate}: {str(exc).split(': ', 1)[-1]}")
    hint = (
        f"Check the network connection (and HTTPS_PROXY if you need a proxy), or fetch "
        f"{', '.join(f.name for f in spec.files)} elsewhere (see {spec.homepage}) and run\n"
        f"  digits download {spec.name} {_quote(folder)} --source FOLDER_OR_FILE\n"
        f"or use a mirror: --source https://MIRROR/PATH/"
    )
    raise NetworkError(
        f"Cannot download {remote.name} for {spec.title}; no server answered:\n" + "\n".join(failures) + "\n" + hint
    )


def _read_marker(folder: Path) -> dict:
    try:
        return json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def download_dataset(
    name: str,
    folder: str | os.PathLike,
    *,
    source: str | None = None,
    force: bool = False,
    verify: bool = True,
    checksums: Mapping[str, str] | None = None,
    invert: bool = False,
    progress: ProgressCallback | None = None,
    timeout: float = 30.0,
) -> DownloadResult:
    """Download a standard dataset and unpack it into class folders of PNG files.

    Work already done is skipped: verified archives in ``FOLDER/downloads``
    are not fetched again, and stages recorded as complete in
    ``FOLDER/.digits-download.json`` are not rewritten (unless ``force``).
    A partial download is resumed.

    Args:
        name: ``"mnist"``, ``"cifar10"`` or ``"cifar100"``.
        folder: The output folder (created if needed).
        source: Where to fetch from instead of the official URLs: a folder
            or ``file://`` URL holding the archives under their official
            names, an archive file (single-archive datasets), or a mirror
            base URL (or, for single-archive datasets, the archive's URL).
        force: Rewrite every stage even if marked complete (archives are
            still re-used when their checksum matches).
        verify: Check the published MD5 sums. Turn off only for a mirror
            you trust that re-packed the files.
        checksums: MD5 per file name, overriding the published ones (for
            private mirrors and tests).
        invert: MNIST only: store ``255 - pixel`` (black digits on white,
            as DIGITS 6's downloader did). Default keeps the original values.
        progress: Called as ``progress(task, done, total)`` while downloading
            (bytes) and writing images (count).
        timeout: Seconds to wait for a server.

    Returns:
        A :class:`DownloadResult`; :meth:`DownloadResult.next_steps` gives the
        commands that create a DIGITS dataset from it.

    Raises:
        DownloadError: Unknown dataset, unreadable or corrupt files
            (:class:`~digits_core.download.errors.ChecksumError`), or no
            network (:class:`~digits_core.download.errors.NetworkError`, whose
            message lists the URLs tried and how to use ``--source``).
    """
    spec = DATASETS.get(name.lower())
    if spec is None:
        raise DownloadError(f"Unknown dataset {name!r}; choose one of: {', '.join(DATASETS)}.")
    folder = Path(folder).expanduser().resolve()
    if folder.exists() and not folder.is_dir():
        raise DownloadError(f"{folder} exists and is not a folder.")
    folder.mkdir(parents=True, exist_ok=True)
    overrides = dict(checksums or {})
    marker = _read_marker(folder)
    if marker.get("dataset") not in (None, spec.name):
        raise DownloadError(
            f"{folder} already holds the {marker['dataset']} dataset; choose another folder for {spec.name}."
        )
    options = {"invert": bool(invert)} if spec.name == "mnist" else {}
    done_stages = set() if force or marker.get("options", {}) != options else set(marker.get("stages", []))
    trees = [folder / t if t else folder for t in spec.trees]
    done_stages = {s for s in done_stages if all((t / s).is_dir() and (t / f"{s}.txt").is_file() for t in trees)}
    if done_stages >= {"train", "test"} and marker.get("summary"):
        return _result_from_marker(spec, folder, marker, skipped=["train", "test"])

    archives = {}
    for remote in spec.files:
        md5 = overrides.get(remote.name, remote.md5) if verify else None
        archives[remote.name] = _obtain(spec, remote, folder, source, md5, progress, timeout)

    unpack = {"mnist": _unpack_mnist, "cifar10": _unpack_cifar10, "cifar100": _unpack_cifar100}[spec.name]
    finished = set(done_stages)

    def stage_done(stage: str) -> None:
        finished.add(stage)
        write_json_atomic(folder / MARKER, {"dataset": spec.name, "stages": sorted(finished), "options": options})

    summaries = unpack(folder, archives, done_stages, progress=progress, invert=invert, stage_done=stage_done)
    for summary in summaries:
        write_text_atomic(summary.folder / "labels.txt", summary.classes)
    marker = {
        "dataset": spec.name,
        "stages": ["train", "test"],
        "options": options,
        "archives": {k: str(v) for k, v in archives.items()},
        "summary": [
            {"folder": str(s.folder.relative_to(folder)), "classes": s.classes, "counts": s.counts} for s in summaries
        ],
    }
    write_json_atomic(folder / MARKER, marker)
    return DownloadResult(
        spec.name, folder, summaries, list(archives.values()), skipped=sorted(done_stages), image_size=spec.image_size
    )


def _result_from_marker(spec: DatasetSpec, folder: Path, marker: dict, skipped: list[str]) -> DownloadResult:
    trees = [
        TreeSummary(folder / s["folder"] if s["folder"] != "." else folder, list(s["classes"]), dict(s["counts"]))
        for s in marker["summary"]
    ]
    return DownloadResult(
        spec.name,
        folder,
        trees,
        [Path(p) for p in marker.get("archives", {}).values()],
        skipped,
        image_size=spec.image_size,
    )


def _stage_count(tree: Path, stage: str) -> int:
    with open(tree / f"{stage}.txt", encoding="utf-8") as handle:
        return sum(1 for line in handle if line.strip())


def _unpack_mnist(
    folder: Path, archives: dict, done: set, *, progress, stage_done, invert: bool, **_
) -> list[TreeSummary]:
    classes = [str(i) for i in range(10)]
    counts = {}
    for stage, prefix in (("train", "train"), ("test", "t10k")):
        if stage in done:
            counts[stage] = _stage_count(folder, stage)
            continue
        images = formats.read_idx(archives[f"{prefix}-images-idx3-ubyte.gz"])
        labels = formats.read_idx(archives[f"{prefix}-labels-idx1-ubyte.gz"])
        if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
            raise DownloadError(f"MNIST {stage} files disagree: images {images.shape}, labels {labels.shape}.")
        if labels.size and (labels.min() < 0 or labels.max() > 9):
            raise DownloadError(f"MNIST {stage} labels outside 0-9 in {prefix}-labels-idx1-ubyte.gz.")
        images = images.astype(np.uint8)
        if invert:
            images = 255 - images
        write_stage(folder, stage, images, labels, classes, progress=progress)
        counts[stage] = int(labels.shape[0])
        stage_done(stage)
    return [TreeSummary(folder, classes, counts)]


def _unpack_cifar10(folder: Path, archives: dict, done: set, *, progress, stage_done, **_) -> list[TreeSummary]:
    archive = formats.CifarArchive(archives["cifar-10-python.tar.gz"])
    stages = {"train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"]}
    todo = [m for stage, members in stages.items() if stage not in done for m in members]
    pickles = archive.read("batches.meta", *todo)
    classes = formats.names(pickles["batches.meta"], "label_names", "batches.meta")
    counts = {}
    for stage, members in stages.items():
        if stage in done:
            counts[stage] = _stage_count(folder, stage)
            continue
        parts = [formats.cifar_batch(pickles.pop(m), m, ("labels",)) for m in members]
        images = np.concatenate([p[0] for p in parts])
        labels = np.concatenate([p[1]["labels"] for p in parts])
        filenames = [f for p in parts for f in p[2]]
        _check_labels(labels, len(classes), stage, "labels")
        write_stage(folder, stage, images, labels, classes, filenames=filenames, progress=progress)
        counts[stage] = int(labels.shape[0])
        stage_done(stage)
    return [TreeSummary(folder, classes, counts)]


def _unpack_cifar100(folder: Path, archives: dict, done: set, *, progress, stage_done, **_) -> list[TreeSummary]:
    archive = formats.CifarArchive(archives["cifar-100-python.tar.gz"])
    pickles = archive.read("meta", *[s for s in ("train", "test") if s not in done])
    meta = pickles["meta"]
    fine_names = formats.names(meta, "fine_label_names", "meta")
    coarse_names = formats.names(meta, "coarse_label_names", "meta")
    fine, coarse = folder / "fine", folder / "coarse"
    fine_counts, coarse_counts = {}, {}
    for stage in ("train", "test"):
        if stage in done:
            fine_counts[stage] = _stage_count(fine, stage)
            coarse_counts[stage] = _stage_count(coarse, stage)
            continue
        images, labels, filenames = formats.cifar_batch(pickles.pop(stage), stage, ("fine_labels", "coarse_labels"))
        _check_labels(labels["fine_labels"], len(fine_names), stage, "fine_labels")
        _check_labels(labels["coarse_labels"], len(coarse_names), stage, "coarse_labels")
        lines = write_stage(
            fine,
            stage,
            images,
            labels["fine_labels"],
            fine_names,
            filenames=filenames,
            progress=progress,
            label=f"fine/{stage}",
        )
        link_stage(fine, lines, coarse, stage, labels["coarse_labels"], coarse_names)
        fine_counts[stage] = coarse_counts[stage] = len(lines)
        stage_done(stage)
    return [TreeSummary(fine, fine_names, fine_counts), TreeSummary(coarse, coarse_names, coarse_counts)]


def _check_labels(labels: np.ndarray, count: int, stage: str, key: str) -> None:
    if labels.size and (labels.min() < 0 or labels.max() >= count):
        raise DownloadError(f"CIFAR {stage} {key} outside 0-{count - 1}; the archive is not a CIFAR archive.")
