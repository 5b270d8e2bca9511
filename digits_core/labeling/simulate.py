"""Choosing a strategy before spending an expert's time: active-learning rounds replayed on a labelled dataset.

:func:`simulate` takes a fully labelled segmentation dataset job, hides the labels of its ``train`` stage
and replays the loop for each strategy and seed: a random initial share of the images is "labelled",
a network is trained on it, then each round the strategy scores the still-hidden images (in batches,
:class:`~digits_core.labeling.strategies.Scorer`), the ``step`` best are "labelled" (their hidden labels
revealed, as a perfect reviewer would), and the network trains on from its last weights (the round's
fine-tune). After each round the mean per-case foreground Dice on the ``val`` stage is measured with
the evaluation package's figures (:func:`digits_core.evaluation.segmentation.case_metrics`). The same
seed gives every strategy the same initial images and the same initial weights, and ``random`` is always
run as the baseline. One network trained on every label gives the full-data Dice the curves are compared with.

The network is the engine's (built-in, plugin or file network by name, with ``network_params``), trained
in this process on the stage's arrays (Adam, its rate ramped up over the first 10 % of each training's epochs
then decayed along a cosine to 0, softmax
cross-entropy, inputs scaled to [0, 1]) so that many short rounds stay cheap; a real round
(:func:`digits_core.labeling.rounds.run_round`) trains a model job.

Results: :class:`SimulationResult` (``to_dict()``: per strategy the labelled fractions and each seed's Dice,
mean and standard deviation; the full-data Dice) and :func:`write_chart` (an SVG of Dice against the
labelled fraction, one line per strategy with its seed spread).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..datasets.reader import open_dataset
from ..errors import DigitsError
from ..evaluation.segmentation import case_metrics
from .strategies import DEFAULT_TOP_FRACTION, STRATEGIES, Scorer, check_strategy, check_top_fraction

#: What the simulation trains unless told otherwise (small U-Net with dropout, so ``variance`` can sample).
DEFAULT_NETWORK_PARAMS = {"filters": 8, "depth": 3, "dropout": 0.2}


class SimulationError(DigitsError):
    """The simulation cannot run on this dataset or with these settings (the message says which)."""


@dataclass
class SimulationResult:
    """Dice against the labelled fraction, per strategy and seed."""

    dataset_id: str
    fractions: list[float]
    curves: dict[str, list[list[float]]]  # strategy -> [seed][round] val Dice
    full_dice: float
    settings: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, dict[str, list[float]]]:
        """Per strategy: ``mean`` and ``std`` (population, over seeds) of the Dice at each fraction."""
        out = {}
        for name, runs in self.curves.items():
            arr = np.asarray(runs, np.float64)
            out[name] = {"mean": arr.mean(axis=0).tolist(), "std": arr.std(axis=0).tolist()}
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``dataset_id``, ``fractions``, ``full_dice``, ``curves``, ``summary``, ``settings``."""
        return {
            "dataset_id": self.dataset_id,
            "fractions": self.fractions,
            "full_dice": self.full_dice,
            "curves": self.curves,
            "summary": self.summary(),
            "settings": self.settings,
        }

    def table(self) -> str:
        """Text table: one row per fraction, ``mean ± std`` per strategy, and the share of the full-data Dice."""
        summ = self.summary()
        names = list(self.curves)
        head = "labelled  " + "  ".join(f"{n:>16}" for n in names)
        lines = [f"full-data val Dice: {self.full_dice:.4f}", head]
        for i, frac in enumerate(self.fractions):
            cells = [f"{summ[n]['mean'][i]:.4f} ± {summ[n]['std'][i]:.4f}" for n in names]
            lines.append(f"{frac * 100:7.1f}%  " + "  ".join(f"{c:>16}" for c in cells))
        return "\n".join(lines)


def _mean_dice(pred: np.ndarray, ref: np.ndarray, classes: Sequence[int]) -> float:
    values = []
    for p, r in zip(pred, ref):
        per_class = case_metrics(p, r, classes)
        dice = [m["Dice"] for m in per_class.values() if np.isfinite(m["Dice"])]
        if dice:
            values.append(float(np.mean(dice)))
    return float(np.mean(values)) if values else float("nan")


#: Share of each training's epochs over which the rate ramps up to its base (at least one epoch).
WARMUP_SHARE = 0.1


def cosine_rate(base: float, epoch: int, epochs: int) -> float:
    """The learning rate of ``epoch`` (from 0) of a training of ``epochs``: ``base`` halved along a cosine to 0."""
    return float(base) * 0.5 * (1.0 + math.cos(math.pi * epoch / max(1, epochs)))


def round_rate(base: float, epoch: int, epochs: int) -> float:
    """The rate of ``epoch`` of one of the simulation's trainings: :func:`cosine_rate` ramped up linearly over
    its first :data:`WARMUP_SHARE` of epochs (as the engine's ``warmup_steps``: ``(epoch + 1) / warmup``)."""
    warmup = max(1, math.ceil(WARMUP_SHARE * epochs))
    return cosine_rate(base, epoch, epochs) * min(1.0, (epoch + 1) / warmup)


class _Trainer:
    """One network per seed, restarted for each strategy from the same initial weights with a fresh optimizer.

    Building and compiling once per seed (not per strategy) keeps Keras's traced train step: the restart
    only assigns the initial weights and zeroes the optimizer's state.
    """

    def __init__(self, build: Callable, lr: float, batch_size: int, seed: int, min_steps: int = 0):
        import keras

        keras.utils.set_random_seed(seed)
        self.seed = seed
        self.model = build()
        self.model.compile(optimizer=keras.optimizers.Adam(lr), loss="sparse_categorical_crossentropy")
        # every variable, the dropout layers' seed states too (weights alone would leave them advanced)
        self.initial = [np.array(v.numpy()) for v in self.model.variables]
        self.batch_size = batch_size
        self.lr = float(lr)
        self.min_steps = int(min_steps)
        self.momentum: float | None = None

    def restart(self) -> _Trainer:
        """Back to the initial weights, a fresh optimizer and the seed's random state."""
        import keras

        for variable, value in zip(self.model.variables, self.initial):
            variable.assign(value)
        optimizer = self.model.optimizer
        for variable in optimizer.variables:
            # the step count and Adam's moments start again; the rate is one of these variables and stays
            if variable is not getattr(optimizer, "_learning_rate", None):
                variable.assign(np.zeros(variable.shape, variable.dtype))
        optimizer.learning_rate = self.lr
        keras.utils.set_random_seed(self.seed)
        return self

    def fit(self, x: np.ndarray, y: np.ndarray, epochs: int) -> None:
        """Train ``epochs`` epochs, or more when that is under ``min_steps`` steps (a round on 8 labelled images
        is one step an epoch: 30 epochs would be 30 steps), with BatchNorm fitted to the epoch's steps as the
        engine fits it (Keras's 0.99 keeps the initial statistics through such a short run, and the network
        validates at chance whatever it learned)."""
        import keras

        from ..engine.batchnorm import fit_batchnorm_momentum, momentum_for  # Keras is loaded by now

        steps = math.ceil(len(x) / self.batch_size)
        if momentum_for(steps) != self.momentum:
            self.momentum = fit_batchnorm_momentum(self.model, steps)
            self.model.train_function = None  # the traced step holds the momentum: trace it again
        epochs = max(int(epochs), math.ceil(self.min_steps / steps))
        # The rate decays to near 0 over each training (cosine, epoch by epoch): at a fixed rate the Dice a
        # round ends at moved by 0.01-0.02 from one round to the next with the luck of its last steps, as much
        # as strategies differ, and the comparison at one labelled share measured that luck. It also ramps up
        # first: a round starts from the last round's weights and Adam moments with the rate back at its base,
        # and new, harder images then met second moments fitted to a converged network (steps several times
        # the rate); a round so started once ended at val Dice 0.56 from 0.96 the round before.
        decay = keras.callbacks.LearningRateScheduler(lambda epoch, _rate: round_rate(self.lr, epoch, epochs))
        self.model.fit(x, y, epochs=epochs, batch_size=self.batch_size, verbose=0, shuffle=True, callbacks=[decay])

    def predict(self, x: np.ndarray) -> np.ndarray:
        out = [np.asarray(self.model(x[i : i + 64], training=False)) for i in range(0, len(x), 64)]
        return np.argmax(np.concatenate(out), axis=-1)


def _load(dataset_id: str, jobs_dir: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    ds = open_dataset(dataset_id, jobs_dir=jobs_dir)
    try:
        if ds.label_kind != "mask":
            raise SimulationError(
                f"Dataset {dataset_id} holds {ds.label_kind} labels; the simulation needs a segmentation dataset "
                "(label masks) with train and val stages."
            )
        missing = [s for s in ("train", "val") if s not in ds.stages or ds.count(s) == 0]
        if missing:
            raise SimulationError(
                f"Dataset {dataset_id} has no {' or '.join(missing)} records; both stages are needed."
            )
        xt, yt = ds.read_all("train")
        xv, yv = ds.read_all("val")
        classes = ds.num_classes or int(max(yt.max(), yv.max())) + 1
    finally:
        ds.close()
    scale = 1.0 / 255.0 if np.asarray(xt).dtype == np.uint8 else 1.0
    as_input = lambda x: (
        np.asarray(x, np.float32)[..., None] * scale if np.ndim(x) == 3 else np.asarray(x, np.float32) * scale
    )  # noqa: E731
    return as_input(xt), np.asarray(yt, np.int32), as_input(xv), np.asarray(yv, np.int32), int(classes)


def simulate(
    dataset_id: str,
    *,
    strategies: Sequence[str] = STRATEGIES,
    seeds: Sequence[int] = (0, 1, 2),
    initial: float = 0.05,
    step: float = 0.05,
    rounds: int = 5,
    network: str = "unet",
    network_params: dict[str, Any] | None = None,
    epochs: int = 20,
    round_epochs: int = 10,
    full_epochs: int | None = None,
    batch_size: int = 16,
    learning_rate: float = 3e-3,
    passes: int = 8,
    top_fraction: float = DEFAULT_TOP_FRACTION,
    min_steps: int = 200,
    jobs_dir: Any = None,
    progress: Callable[[str], None] | None = None,
) -> SimulationResult:
    """Replay active-learning rounds per strategy and seed on a labelled dataset (see the module docstring).

    Args:
        dataset_id: A segmentation dataset job with ``train`` (the pool) and ``val`` stages.
        strategies: Strategies to compare; ``random`` is added when missing.
        seeds: At least 3 seeds (the spread is over them).
        initial: Share of the train images labelled before the first round.
        step: Share labelled per round.
        rounds: Rounds after the initial training.
        network: Engine network name.
        network_params: Its parameters (default :data:`DEFAULT_NETWORK_PARAMS`).
        epochs: Epochs of the initial training.
        round_epochs: Epochs of each round's fine-tune (from the last weights).
        full_epochs: Epochs of the full-data reference (default ``epochs + rounds * round_epochs``).
        batch_size: Training batch size.
        learning_rate: Adam's base rate in each training (:func:`round_rate`: ramped up, then a cosine to 0).
        passes: MC-dropout passes.
        top_fraction: Each uncertainty strategy scores an image by the mean of its ``top_fraction`` most
            uncertain pixels; 1 is the mean over all (recorded in ``settings``).
        min_steps: Each training (initial, round, full data) runs at least this many steps, whatever
            ``epochs`` says: the first rounds have few labelled images, so few steps an epoch.
        jobs_dir: The jobs folder.
        progress: Called with one line per finished round.

    Raises:
        SimulationError: Not a segmentation dataset, a stage missing, fewer than 3 seeds, or too few images.
        StrategyError: Unknown strategy.
        FormValidationError: ``top_fraction`` is not in (0, 1].
    """
    from ..engine.networks import resolve_network  # the engine's networks load Keras: only when simulating

    names = [check_strategy(s) for s in strategies]
    top_fraction = check_top_fraction(top_fraction)
    if "random" not in names:
        names.insert(0, "random")
    if len(set(seeds)) < 3:
        raise SimulationError("Give at least 3 different seeds: the spread over seeds is what tells strategies apart.")
    xt, yt, xv, yv, classes = _load(dataset_id, jobs_dir)
    n = len(xt)
    first = max(1, round(initial * n))
    per_round = max(1, round(step * n))
    if first + rounds * per_round > n:
        raise SimulationError(
            f"Dataset {dataset_id} has {n} train images: {first} initial + {rounds} rounds of {per_round} do not fit."
        )
    params = dict(DEFAULT_NETWORK_PARAMS if network_params is None else network_params)
    spec = resolve_network(network)
    build = lambda: spec.build(tuple(xt.shape[1:]), classes, **params)  # noqa: E731
    fg = list(range(1, classes))
    say = progress or (lambda _line: None)
    fractions = [(first + r * per_round) / n for r in range(rounds + 1)]
    curves: dict[str, list[list[float]]] = {name: [] for name in names}
    full = []
    for seed in seeds:
        rng = np.random.default_rng(int(seed))
        start = rng.permutation(n)[:first]
        trainer = _Trainer(build, learning_rate, batch_size, int(seed), min_steps)
        for name in names:
            trainer.restart()
            labelled = np.zeros(n, bool)
            labelled[start] = True
            trainer.fit(xt[labelled], yt[labelled], epochs)
            dice = [_mean_dice(trainer.predict(xv), yv, fg)]
            for r in range(rounds):
                hidden = np.flatnonzero(~labelled)
                scorer = Scorer(
                    trainer.model, name, passes=passes, seed=int(seed) * 1000 + r, top_fraction=top_fraction
                )
                scores = np.concatenate(
                    [
                        scorer.score([f"{i}" for i in hidden[b : b + 64]], xt[hidden[b : b + 64]])[0]
                        for b in range(0, len(hidden), 64)
                    ]
                )
                labelled[hidden[np.argsort(-scores, kind="stable")[:per_round]]] = True
                trainer.fit(xt[labelled], yt[labelled], round_epochs)
                dice.append(_mean_dice(trainer.predict(xv), yv, fg))
                say(f"seed {seed} {name}: {fractions[r + 1] * 100:.1f}% labelled, val Dice {dice[-1]:.4f}")
            curves[name].append(dice)
        trainer.restart().fit(xt, yt, full_epochs or epochs + rounds * round_epochs)
        full.append(_mean_dice(trainer.predict(xv), yv, fg))
    say(f"full data: val Dice {np.mean(full):.4f}")
    settings = {
        "seeds": [int(s) for s in seeds],
        "initial": initial,
        "step": step,
        "rounds": rounds,
        "top_fraction": top_fraction,
        "lr_schedule": f"linear warm-up over {WARMUP_SHARE:.0%} of the epochs, then cosine to 0, each training",
        "network": network,
        "network_params": params,
        "epochs": epochs,
        "round_epochs": round_epochs,
        "min_steps": min_steps,
        "train_images": n,
        "val_images": len(xv),
        "full_dice_per_seed": full,
    }
    return SimulationResult(str(dataset_id), fractions, curves, float(np.mean(full)), settings)


_COLOURS = {"random": "#777777", "entropy": "#1f77b4", "variance": "#d62728", "tta": "#2ca02c"}


def write_chart(result: SimulationResult, path: str | Path, title: str = "Active learning: val Dice vs labels") -> Path:
    """An SVG chart: mean val Dice per strategy against the labelled fraction, a band of ± one seed std,
    and the full-data Dice as a dashed line. Returns the file."""
    w, h, left, right, top, bottom = 640, 400, 60, 130, 30, 50
    summ = result.summary()
    lows = [min(m - s for m, s in zip(v["mean"], v["std"])) for v in summ.values()]
    y0 = max(0.0, math.floor((min(lows + [result.full_dice]) - 0.05) * 10) / 10)
    y1 = 1.0
    fx = result.fractions
    x0, x1 = min(fx), max(fx) if max(fx) > min(fx) else min(fx) + 1

    def px(f: float) -> float:
        return left + (f - x0) / (x1 - x0) * (w - left - right)

    def py(d: float) -> float:
        return top + (y1 - d) / (y1 - y0) * (h - top - bottom)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
        f'<text x="{w / 2}" y="18" text-anchor="middle">{title}</text>',
        f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>',
        f'<text x="{(left + w - right) / 2}" y="{h - 12}" text-anchor="middle">labelled fraction of the pool</text>',
        f'<text x="14" y="{h / 2}" transform="rotate(-90 14 {h / 2})" text-anchor="middle">val Dice</text>',
    ]
    for f in fx:
        parts.append(f'<text x="{px(f):.1f}" y="{h - bottom + 16}" text-anchor="middle">{f * 100:.0f}%</text>')
    for k in range(6):
        d = y0 + (y1 - y0) * k / 5
        parts.append(f'<text x="{left - 6}" y="{py(d) + 4:.1f}" text-anchor="end">{d:.2f}</text>')
    full_y = py(result.full_dice)
    parts.append(
        f'<line x1="{left}" y1="{full_y:.1f}" x2="{w - right}" y2="{full_y:.1f}" stroke="black" stroke-dasharray="4 4"/>'
    )
    parts.append(f'<text x="{w - right + 6}" y="{full_y + 4:.1f}">full data</text>')
    for i, (name, v) in enumerate(summ.items()):
        colour = _COLOURS.get(name, "#9467bd")
        upper = [f"{px(f):.1f},{py(m + s):.1f}" for f, m, s in zip(fx, v["mean"], v["std"])]
        lower = [f"{px(f):.1f},{py(m - s):.1f}" for f, m, s in zip(fx, v["mean"], v["std"])]
        parts.append(f'<polygon points="{" ".join(upper + lower[::-1])}" fill="{colour}" fill-opacity="0.15"/>')
        line = " ".join(f"{px(f):.1f},{py(m):.1f}" for f, m in zip(fx, v["mean"]))
        parts.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2"/>')
        parts.append(f'<text x="{w - right + 6}" y="{top + 16 * i + 20}" fill="{colour}">{name}</text>')
    parts.append("</svg>")
    path = Path(path)
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path


def save(result: SimulationResult, folder: str | Path) -> tuple[Path, Path]:
    """Write ``simulation.json`` and ``simulation.svg`` into ``folder`` (made if missing)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "simulation.json"
    data.write_text(json.dumps(result.to_dict(), indent=2) + "\n", encoding="utf-8")
    return data, write_chart(result, folder / "simulation.svg")
