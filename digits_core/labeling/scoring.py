"""Scoring a pool with a model, batch by batch, and storing the top candidates' predictions as proposals.

:func:`score_pool` reads the candidates ``batch_size`` at a time (the source image, brought to the
model's input as its dataset was: channels, resize, dtype), scores each batch with a strategy
(:class:`~digits_core.labeling.strategies.Scorer`) and stores the batch's scores in ``pool.json`` before
reading the next: memory holds one batch of images and its passes, whatever the pool's size, and a scoring
stopped half-way (aborted, killed) resumes where it stopped (candidates already scored in the same run are
skipped). :func:`propose` writes the model's prediction for the ``count`` highest-scoring candidates
that nobody labelled yet (``proposals/<id>.png`` at the source image's size) and moves them to
``proposed``.

Before anything is read, the model is checked against the pool: a segmentation model of the same
dimensionality and, when both say, the same modality; otherwise :class:`~digits_core.labeling.pool.PoolError`
names both. A candidate that cannot be read (not an image, cut short, too large) is skipped with its
reason in the result and in its ``error`` key; nothing stored is touched.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DigitsError
from ..inference.imageio import prepare_image, read_image
from ..inference.images import resize_nearest
from ..inference.model import load_inference_model
from . import pacs
from .masks import encode_mask
from .pool import ACCEPTED, IN_REVIEW, PROPOSALS_DIR, Pool, PoolError
from .strategies import DEFAULT_PASSES, DEFAULT_TOP_FRACTION, Scorer, check_strategy, check_top_fraction

#: Candidates read and scored at once (memory holds one batch and its passes).
DEFAULT_BATCH = 16


@dataclass
class ScoreResult:
    """What one scoring did.

    Attributes:
        pool_id: The pool.
        model_id: The model that scored.
        strategy: The strategy.
        scored: Candidates scored in this call (resumed runs: only the rest).
        skipped: ``{"id", "source", "error"}`` of each candidate that could not be read.
        run: The run token (the same on a resume).
        top_fraction: Share of each candidate's most uncertain pixels its score averages (1: the mean).
    """

    pool_id: str
    model_id: str
    strategy: str
    scored: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)
    run: str = ""
    top_fraction: float = DEFAULT_TOP_FRACTION


def check_model_for_pool(pool: Pool, loaded: Any) -> None:
    """Refuse a model that cannot score this pool (task, dimensions, modality), naming both.

    Raises:
        PoolError: The model's task or modality is not the pool's.
    """
    record = pool.record()
    if loaded.task != record.get("task", "segmentation"):
        raise PoolError(
            f"Model {loaded.id} is a {loaded.task} model; pool {pool.id} holds {record.get('task')} candidates. "
            "Pick a segmentation model trained on images like the pool's."
        )
    if int(record.get("dimensions") or 2) != 2:
        raise PoolError(f"Pool {pool.id} holds 3-D volumes; model {loaded.id} is a 2-D image model.")
    want = record.get("modality")
    have = (loaded.dataset.userdata or {}).get("modality")
    if want and have and str(want).upper() != str(have).upper():
        raise PoolError(
            f"Pool {pool.id} holds {want} images; model {loaded.id} was trained on {have} images. "
            "Use a model of the pool's modality."
        )


def source_path(source: dict[str, Any], cand: dict[str, Any]) -> Path:
    """The file of a folder pool's candidate (the pool's root joined with its relative path, kept inside).

    Args:
        source: The pool record's ``source``.
        cand: The candidate.

    Raises:
        PoolError: Not a folder pool, or a path leaving the root.
    """
    if source.get("kind") != "folder":
        raise PoolError(f"Candidate {cand['id']} is not in a folder pool; its images come from {source.get('url')}.")
    root = Path(source["root"]).resolve()
    path = (root / cand["source"]["path"]).resolve()
    if not path.is_relative_to(root):
        raise PoolError(f'Candidate {cand["id"]} names "{cand["source"]["path"]}" outside the pool folder {root}.')
    return path


def read_candidate(source: dict[str, Any], cand: dict[str, Any]) -> np.ndarray:
    """A candidate's source image as stored (``H×W×C``, its own dtype).

    A DICOMweb pool's candidate is read through its data plugin (WADO-RS, :mod:`~digits_core.labeling.pacs`).

    Raises:
        DigitsError: The file is missing, not an image or too large (the message names it).
    """
    if pacs.is_plugin_source(source):
        return pacs.read_image(source, cand)
    return read_image(source_path(source, cand), name=f"{cand['source'].get('path')} (candidate {cand['id']})")


def _batches(
    source: dict[str, Any], cands: list[dict[str, Any]], loaded: Any, batch_size: int, skipped: list
) -> Iterator[tuple[list[str], np.ndarray, list[tuple[int, int]]]]:
    shape, dtype, mode = loaded.feature_shape, str(loaded.feature_dtype), loaded.dataset.resize_mode
    ids: list[str] = []
    arrays: list[np.ndarray] = []
    sizes: list[tuple[int, int]] = []
    for cand in cands:
        try:
            raw = read_candidate(source, cand)
            arrays.append(prepare_image(raw, shape, dtype, mode))
        except DigitsError as exc:
            skipped.append({"id": cand["id"], "source": cand["source"], "error": str(exc)})
            continue
        ids.append(cand["id"])
        sizes.append((int(raw.shape[0]), int(raw.shape[1])))
        if len(ids) == batch_size:
            yield ids, loaded.preprocessing.apply(np.stack(arrays)), sizes
            ids, arrays, sizes = [], [], []
    if ids:
        yield ids, loaded.preprocessing.apply(np.stack(arrays)), sizes


def score_pool(
    pool: Pool,
    model_id: str,
    strategy: str,
    *,
    batch_size: int = DEFAULT_BATCH,
    passes: int = DEFAULT_PASSES,
    seed: int = 0,
    top_fraction: float = DEFAULT_TOP_FRACTION,
    run: str | None = None,
    jobs_dir: Any = None,
    progress: Callable[[dict], None] | None = None,
) -> ScoreResult:
    """Score every candidate nobody accepted yet, one batch at a time; scores stored per batch.

    Args:
        pool: The pool.
        model_id: The segmentation model job (its last snapshot).
        strategy: ``random``, ``entropy``, ``variance`` or ``tta``.
        batch_size: Candidates per batch.
        passes: MC-dropout passes (``variance``).
        seed: Seed of ``random``.
        top_fraction: Score each candidate by the mean of its ``top_fraction`` most uncertain pixels (voxels);
            1 (the default) is the mean over all of them. ``random`` ignores it.
        run: Resume this run: candidates it already scored are skipped (default: a new run).
        jobs_dir: The jobs folder.
        progress: Called after each batch with ``{"done", "total", "skipped"}``.

    Raises:
        PoolError: The model does not fit the pool.
        StrategyError: Unknown strategy, or ``variance`` on a network without dropout.
        FormValidationError: ``top_fraction`` is not in (0, 1] (nothing is read or stored).
    """
    check_strategy(strategy)
    top_fraction = check_top_fraction(top_fraction)
    run = run or secrets.token_hex(4)
    if int(pool.record().get("dimensions") or 2) == 3:  # a PACS pool of series: one volume at a time
        from .volume_scoring import score_volume_pool

        found = score_volume_pool(
            pool, model_id, strategy, passes=passes, seed=seed, top_fraction=top_fraction, run=run,
            jobs_dir=jobs_dir, progress=progress,
        )  # fmt: skip
        return ScoreResult(
            pool.id, found[0], strategy, scored=found[1], skipped=found[2], run=run, top_fraction=top_fraction
        )
    loaded = load_inference_model(model_id, jobs_dir=jobs_dir)
    check_model_for_pool(pool, loaded)
    scorer = Scorer(loaded.model, strategy, passes=passes, seed=seed, top_fraction=top_fraction)
    result = ScoreResult(pool.id, loaded.id, strategy, run=run, top_fraction=top_fraction)
    record = pool.record()
    todo = [
        c
        for c in sorted(record["candidates"].values(), key=lambda c: c["id"])
        if c["state"] not in (ACCEPTED, IN_REVIEW) and c.get("scored_in") != run
    ]
    total = len(todo)
    for ids, features, _sizes in _batches(record["source"], todo, loaded, max(1, int(batch_size)), result.skipped):
        scores, _ = scorer.score(ids, features)
        pool.record_scores(dict(zip(ids, scores.tolist())), strategy, run=run, model_id=loaded.id)
        result.scored += len(ids)
        if progress:
            progress({"done": result.scored + len(result.skipped), "total": total, "skipped": len(result.skipped)})
    if result.skipped:
        pool.record_errors({s["id"]: s["error"] for s in result.skipped})
    return result


def propose(
    pool: Pool,
    model_id: str,
    count: int,
    *,
    jobs_dir: Any = None,
    user: str | None = None,
    batch_size: int = DEFAULT_BATCH,
) -> list[str]:
    """Store the model's prediction for the ``count`` best-scoring unlabelled (or rejected) candidates.

    Each becomes ``proposals/<id>.png`` (class indices at the source image's size) and the candidate
    moves to ``proposed``. Returns their ids, highest score first. A pool of volumes stores each proposal as a
    multi-frame DICOM-SEG (:func:`~digits_core.labeling.volume_scoring.propose_volumes`).
    """
    if int(pool.record().get("dimensions") or 2) == 3:
        from .volume_scoring import propose_volumes

        return propose_volumes(pool, model_id, count, jobs_dir=jobs_dir, user=user)
    loaded = load_inference_model(model_id, jobs_dir=jobs_dir)
    check_model_for_pool(pool, loaded)
    record = pool.record()
    open_ones = [
        c for c in record["candidates"].values() if c["state"] in ("unlabelled", "rejected") and c["score"] is not None
    ]
    open_ones.sort(key=lambda c: (-c["score"], c["id"]))
    chosen = open_ones[: max(0, int(count))]
    scorer = Scorer(loaded.model, "entropy")
    classes = list(record.get("class_labels") or loaded.class_labels or ["background", "foreground"])
    skipped: list[dict] = []
    done: list[str] = []
    for ids, features, sizes in _batches(record["source"], chosen, loaded, batch_size, skipped):
        probs = scorer.probabilities(features)
        for cid, prob, (h, w) in zip(ids, probs, sizes):
            mask = resize_nearest(_uncropped(np.argmax(prob, axis=-1).astype(np.uint8), loaded), h, w)
            if pacs.is_plugin_source(record["source"]):  # a DICOM-SEG series on the PACS, referencing the image
                try:
                    where = pacs.store_proposal(
                        record["source"], record["candidates"][cid], mask, classes, model_id=loaded.id
                    )
                except DigitsError as exc:
                    skipped.append({"id": cid, "error": str(exc)})
                    continue
                pool.record_proposal(cid, {**where, "model_id": loaded.id}, user=user)
                done.append(cid)
                continue
            name = f"{PROPOSALS_DIR}/{cid}.png"
            _write_atomic(pool.path / name, encode_mask(mask))
            pool.record_proposal(cid, {"file": name, "model_id": loaded.id}, user=user)
            done.append(cid)
    if skipped:
        pool.record_errors({s["id"]: s["error"] for s in skipped})
    return done


def _uncropped(mask: np.ndarray, loaded: Any) -> np.ndarray:
    """A prediction on the model's centre crop placed back into its input size (background around it)."""
    height, width = loaded.feature_shape[:2]
    if mask.shape == (height, width):
        return mask
    from ..engine.preprocessing import center_crop_offsets  # numpy only: the crop the engine trained with

    top, left = center_crop_offsets(height, width, mask.shape[0])
    full = np.zeros((height, width), np.uint8)
    full[top : top + mask.shape[0], left : left + mask.shape[1]] = mask
    return full


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
