"""One active-learning round: score the pool, propose the top candidates, retrain on every accepted label.

:func:`run_round` is what ``digits label round`` and the JSON API's round run:

1. score every candidate not yet accepted with the model and a strategy
   (:func:`~digits_core.labeling.scoring.score_pool`, batch by batch, resumable);
2. store the model's prediction for the ``count`` best as proposals
   (:func:`~digits_core.labeling.scoring.propose`): the reviewers' queue;
3. when candidates were accepted (reviewed labels), build a dataset of all of them with the bundled
   ``image-segmentation`` data plugin (the images and their newest label versions, sized and typed as the
   model's dataset, its class names kept; a DICOMweb pool's images and label SEGs are read from its server and
   written as 8-bit PNGs first) and train a new model job from the model's last snapshot
   (the engine's fine-tune path, ``pretrained=<model>``), with its network and options. A pool of volumes
   builds a volume dataset of its accepted labels and continues the volume model from its weights instead
   (:func:`~digits_core.labeling.volume_rounds.retrain_volumes`).

The round is recorded in ``pool.json["rounds"]`` (strategy, model, counts, the new dataset and model, their
validation Dice), so a chart of Dice against the number of labels per round comes from the pool alone
(:func:`round_history`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..inference.model import load_inference_model
from ..jobs import JobStore
from . import pacs
from .pool import Pool, PoolError, load_pool
from .scoring import DEFAULT_BATCH, propose, score_pool, source_path
from .strategies import DEFAULT_PASSES, DEFAULT_TOP_FRACTION

#: The folder of a pool that holds each round's training images and labels.
ROUNDS_DIR = "rounds"
#: Training options carried over from the model to the retrained one (when it set them).
CARRIED_OPTIONS = ("network_params", "crop_size", "solver", "learning_rate", "mean_subtraction", "loss", "batch_size")


@dataclass
class RoundResult:
    """What a round did: its number, scores, proposals and the retrained model (``None`` without labels)."""

    round: int
    strategy: str
    model_id: str
    scored: int
    skipped: list[dict[str, Any]]
    proposed: list[str]
    labels: int
    dataset_id: str | None = None
    new_model_id: str | None = None
    val_dice: float | None = None
    top_fraction: float = DEFAULT_TOP_FRACTION

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def _link_or_copy(src: Path, dest: Path) -> None:
    try:
        os.link(src, dest)
    except OSError:
        shutil.copyfile(src, dest)


def build_training_folder(
    pool: Pool, number: int, class_labels: list[str] | None, channels: int = 1
) -> tuple[Path, int]:
    """``rounds/r<N>/images`` and ``labels`` (matched by file name) of every accepted candidate; and their count.

    A folder pool's files are linked; a DICOMweb pool's image and newest label SEG are read from its server
    and written as 8-bit PNGs with ``channels`` channels (:func:`~digits_core.labeling.pacs.write_training_pair`).
    """
    record = pool.record()
    folder = pool.path / ROUNDS_DIR / f"r{number}"
    if folder.exists():
        shutil.rmtree(folder)
    (folder / "images").mkdir(parents=True)
    (folder / "labels").mkdir()
    on_server = pacs.is_plugin_source(record["source"])
    count = 0
    for cand in pool.accepted():
        label = cand["label"]
        images, labels = folder / "images", folder / "labels" / f"{cand['id']}.png"
        if on_server and label.get("sop"):
            pacs.write_training_pair(record["source"], cand, label, images / f"{cand['id']}.png", labels, channels)
        elif not on_server and label.get("file"):
            src = source_path(record["source"], cand)
            _link_or_copy(src, images / f"{cand['id']}{src.suffix.lower()}")
            _link_or_copy(pool.file(label["file"]), labels)
        else:
            continue
        count += 1
    if class_labels:
        (folder / "classes.txt").write_text("\n".join(class_labels) + "\n", encoding="utf-8")
    return folder, count


def _val_dice(model_job: Any) -> float | None:
    info = model_job.model_record()
    metrics = (info or {}).get("final_metrics") or {}
    for key in ("val_dice", "val_mean_dice", "val_dice_coefficient"):
        if isinstance(metrics.get(key), (int, float)):
            return float(metrics[key])
    return None


def retrain(
    pool: Pool,
    model_id: str,
    number: int,
    *,
    epochs: int = 5,
    val_percent: float = 20.0,
    jobs_dir: Any = None,
    progress: Callable[[dict], None] | None = None,
) -> tuple[str, str] | None:
    """Train a new model from ``model_id``'s last snapshot on all accepted labels; ``(dataset id, model id)``.

    Returns ``None`` when nothing is accepted yet.

    Raises:
        PoolError: Too few accepted labels for a training and a validation image.
    """
    from ..datasets.create import create_dataset  # its encoder machinery loads only for a retraining
    from ..engine import train  # the engine (TensorFlow) loads only for a retraining

    loaded = load_inference_model(model_id, jobs_dir=jobs_dir)
    classes = list(loaded.class_labels or pool.record().get("class_labels") or [])
    h, w, c = loaded.feature_shape
    folder, count = build_training_folder(pool, number, classes, c)
    if count == 0:
        shutil.rmtree(folder, ignore_errors=True)
        return None
    if count < 2:
        raise PoolError(f"Pool {pool.id} has {count} accepted label; review at least 2 before retraining.")
    form = {
        "image_folder": str(folder / "images"),
        "label_folder": str(folder / "labels"),
        "label_format": "auto",
        "val_percent": val_percent,
        "image_type": "grayscale" if c == 1 else "color",
        "width": w,
        "height": h,
        "resize_mode": loaded.dataset.resize_mode,
    }
    if classes:
        form["class_labels_file"] = str(folder / "classes.txt")
    dataset = create_dataset(
        "image-segmentation", form, name=f"{pool.job.name} round {number}", workers=1, jobs_dir=jobs_dir
    )
    options = loaded.info.get("options") or {}
    carried = {k: options[k] for k in CARRIED_OPTIONS if options.get(k) is not None}
    model = train(
        dataset.id,
        loaded.info.get("network"),
        name=f"{pool.job.name} round {number}",
        jobs_dir=jobs_dir,
        pretrained=loaded.id,
        epochs=epochs,
        progress=progress,
        **carried,
    )
    return dataset.id, model.id


def run_round(
    pool_id: str | Pool,
    model_id: str,
    *,
    strategy: str = "variance",
    count: int = 10,
    epochs: int = 5,
    retrain_model: bool = True,
    batch_size: int = DEFAULT_BATCH,
    passes: int = DEFAULT_PASSES,
    seed: int = 0,
    top_fraction: float = DEFAULT_TOP_FRACTION,
    val_percent: float = 20.0,
    user: str | None = None,
    run: str | None = None,
    jobs_dir: Any = None,
    progress: Callable[[dict], None] | None = None,
) -> RoundResult:
    """Score, propose ``count`` candidates, then retrain on the accepted labels (see the module docstring).

    Args:
        pool_id: The pool (id or :class:`Pool`).
        model_id: The model that scores and proposes, and whose last snapshot the retraining starts from.
        strategy: ``random``, ``entropy``, ``variance`` or ``tta``.
        count: Candidates to propose.
        epochs: Epochs of the retraining.
        retrain_model: Retrain when labels were accepted (False: score and propose only).
        batch_size: Candidates per scoring batch.
        passes: MC-dropout passes.
        seed: Seed of ``random``.
        top_fraction: Score each candidate by the mean of its ``top_fraction`` most uncertain pixels (voxels);
            1 is the mean over all (recorded with the round).
        val_percent: Share of the accepted labels the retraining validates on.
        user: Who started the round (recorded).
        run: Resume this scoring run (its scored candidates are skipped).
        jobs_dir: The jobs folder.
        progress: Called with ``{"phase": "score"|"train", ...}``.

    Raises:
        PoolError: The model does not fit the pool (task, dimensions, modality: both named).
        StrategyError: Unknown strategy, or ``variance`` on a network without dropout.
        FormValidationError: ``top_fraction`` is not in (0, 1] (nothing is scored or recorded).
    """
    pool = pool_id if isinstance(pool_id, Pool) else load_pool(pool_id, jobs_dir)
    say = progress or (lambda _info: None)
    scored = score_pool(
        pool,
        model_id,
        strategy,
        batch_size=batch_size,
        passes=passes,
        seed=seed,
        top_fraction=top_fraction,
        run=run,
        jobs_dir=jobs_dir,
        progress=lambda info: say({"phase": "score", **info}),
    )
    proposed = propose(pool, scored.model_id, count, jobs_dir=jobs_dir, user=user, batch_size=batch_size)
    labels = len(pool.accepted())
    number = pool.add_round(
        {
            "strategy": strategy,
            "top_fraction": scored.top_fraction,
            "model_id": scored.model_id,
            "count": count,
            "proposed": proposed,
            "labels": labels,
            "by": user,
        }
    )
    result = RoundResult(
        number, strategy, scored.model_id, scored.scored, scored.skipped, proposed, labels,
        top_fraction=scored.top_fraction,
    )  # fmt: skip
    if retrain_model and labels and int(pool.record().get("dimensions") or 2) == 3:
        from .volume_rounds import retrain_volumes  # a pool of volumes: a volume dataset and a volume run

        done = retrain_volumes(
            pool,
            scored.model_id,
            number,
            epochs=epochs,
            val_percent=val_percent,
            jobs_dir=jobs_dir,
            progress=lambda info: say({"phase": "train", **info}),
        )
        if done:
            result.dataset_id, result.new_model_id, result.val_dice = done
            pool.update_round(
                number, dataset_id=result.dataset_id, new_model_id=result.new_model_id, val_dice=result.val_dice
            )
    elif retrain_model and labels:
        trained = retrain(
            pool,
            scored.model_id,
            number,
            epochs=epochs,
            val_percent=val_percent,
            jobs_dir=jobs_dir,
            progress=lambda info: say({"phase": "train", **info}),
        )
        if trained:
            result.dataset_id, result.new_model_id = trained
            result.val_dice = _val_dice(JobStore(jobs_dir).get(result.new_model_id))
            pool.update_round(
                number, dataset_id=result.dataset_id, new_model_id=result.new_model_id, val_dice=result.val_dice
            )
    return result


def round_history(pool: Pool) -> list[dict[str, Any]]:
    """The pool's rounds (number, strategy, labels, models, validation Dice), oldest first: the chart's points."""
    return list(pool.record().get("rounds", []))


def rounds_chart_svg(rounds: list[dict[str, Any]], width: int = 480, height: int = 260) -> str:
    """An SVG of validation Dice against the number of accepted labels, one line per strategy (the pool page's chart).

    Rounds without a retrained model (no Dice yet) are left out; ``""`` when none has one.
    """
    from html import escape

    points: dict[str, list[tuple[int, float]]] = {}
    for entry in rounds:
        if isinstance(entry.get("val_dice"), (int, float)) and isinstance(entry.get("labels"), int):
            points.setdefault(str(entry.get("strategy")), []).append((entry["labels"], float(entry["val_dice"])))
    if not points:
        return ""
    left, right, top, bottom = 50, 110, 20, 40
    xs = [x for line in points.values() for x, _ in line]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * (width - left - right)

    def py(d: float) -> float:
        return top + (1.0 - d) * (height - top - bottom)

    colours = ["#d62728", "#1f77b4", "#2ca02c", "#777777", "#9467bd"]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-size="11" '
        'role="img" aria-label="validation Dice against the number of labels">',
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="black"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="black"/>',
        f'<text x="{(left + width - right) / 2}" y="{height - 8}" text-anchor="middle">accepted labels</text>',
        f'<text x="{left - 6}" y="{top + 4}" text-anchor="end">1.0</text>',
        f'<text x="{left - 6}" y="{height - bottom + 4}" text-anchor="end">0.0</text>',
        f'<text x="{px(x0):.1f}" y="{height - bottom + 14}" text-anchor="middle">{x0}</text>',
        f'<text x="{px(x1):.1f}" y="{height - bottom + 14}" text-anchor="middle">{x1}</text>',
    ]
    for i, (name, line) in enumerate(sorted(points.items())):
        colour = colours[i % len(colours)]
        coords = " ".join(f"{px(x):.1f},{py(d):.1f}" for x, d in sorted(line))
        parts.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"/>')
        parts += [f'<circle cx="{px(x):.1f}" cy="{py(d):.1f}" r="3" fill="{colour}"/>' for x, d in line]
        parts.append(f'<text x="{width - right + 6}" y="{top + 14 * i + 10}" fill="{colour}">{escape(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)
