"""Uncertainty strategies: how unsure a segmentation model is about each candidate, one number per image/volume.

Every strategy turns the class probabilities of a batch into one score per case (higher: label it first):

* ``random``: a seeded uniform number per candidate id (the baseline every strategy is compared with);
* ``entropy``: predictive entropy ``-Σ p log p`` of the softmax, averaged over the pixels (voxels);
* ``variance``: MC-dropout (Gal & Ghahramani): ``passes`` forward passes with the network's dropout layers
  kept on (batch normalisation stays in inference mode), the variance of the probabilities across passes
  summed over classes, averaged over the pixels;
* ``tta``: test-time augmentation: the image, its two flips and its 90/180/270° rotations (square images),
  each prediction mapped back; the variance across them, as for ``variance``.

The per-pixel maps are averaged over the case (mean aggregation), so a large image does not outscore a
small one by its size alone. With ``top_fraction`` F below 1 a case is scored by the mean of its
``k = max(1, round(F * pixels))`` most uncertain pixels instead (:func:`aggregate`): a model confidently wrong on
most of an image has a low mean uncertainty, and its few uncertain pixels are the signal. Only a batch of images
and its passes are in memory at once (:class:`Scorer`): a pool of any size is scored in memory bounded by the batch.
"""

from __future__ import annotations

import hashlib
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import DigitsError, FormValidationError

#: The strategies, in the order the docs list them.
STRATEGIES = ("random", "entropy", "variance", "tta")
#: Forward passes of ``variance`` unless told otherwise.
DEFAULT_PASSES = 8
#: Share of each case's most uncertain pixels (voxels) its score averages: 1 is all of them, the plain mean.
DEFAULT_TOP_FRACTION = 1.0


class StrategyError(DigitsError):
    """A strategy cannot run as asked (unknown name, a network without dropout for ``variance``)."""


def check_strategy(name: str) -> str:
    """``name`` when it is a strategy.

    Raises:
        StrategyError: Unknown strategy (the message lists the known ones).
    """
    if name not in STRATEGIES:
        raise StrategyError(f'Unknown strategy "{str(name)[:40]}"; use one of {", ".join(STRATEGIES)}.')
    return name


def top_fraction_problem(value: Any) -> str | None:
    """Why ``value`` is no ``top_fraction`` (a number greater than 0 and at most 1), or ``None`` when it is one.

    The one check of the option: the run requests (:func:`digits_core.labeling.jobs.prepare_run`: JSON API, pool
    page) and :func:`check_top_fraction` (CLI, Python API) both ask it.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 < float(value) <= 1.0:
        shown = repr(value) if isinstance(value, str) else str(value)
        return f"a number greater than 0 and at most 1 (1: the mean over all pixels), not {shown[:40]}"
    return None


def check_top_fraction(value: Any) -> float:
    """``value`` as a float when it is a ``top_fraction`` (see :func:`top_fraction_problem`).

    Raises:
        FormValidationError: It is not a number in (0, 1] (NaN, 0, negative, above 1, not a number), named.
    """
    problem = top_fraction_problem(value)
    if problem:
        raise FormValidationError({"top_fraction": [problem]}, "scoring")
    return float(value)


def aggregate(per_pixel: np.ndarray, top_fraction: float = DEFAULT_TOP_FRACTION) -> np.ndarray:
    """One score per case of per-pixel uncertainties ``[N, ...]``: the mean of its ``top_fraction`` most uncertain.

    ``k = max(1, round(top_fraction * pixels))`` pixels per case (Python's rounding, half to even); 1 is the
    plain mean over every pixel.
    """
    flat = per_pixel.reshape(len(per_pixel), -1)
    if top_fraction >= 1.0:
        return flat.mean(axis=1)
    k = max(1, int(round(top_fraction * flat.shape[1])))
    return np.sort(flat, axis=1)[:, -k:].mean(axis=1)


def random_scores(ids: list[str], seed: int = 0) -> np.ndarray:
    """A uniform number in [0, 1) per id, the same for the same id and seed (independent of the pool's order)."""
    out = np.empty(len(ids), np.float64)
    for i, cid in enumerate(ids):
        digest = hashlib.sha256(f"{seed}:{cid}".encode()).digest()
        out[i] = int.from_bytes(digest[:8], "big") / 2.0**64
    return out


def entropy(probs: np.ndarray, top_fraction: float = DEFAULT_TOP_FRACTION) -> np.ndarray:
    """Predictive entropy per case of probabilities ``[N, ..., C]`` (nats), aggregated by :func:`aggregate`."""
    p = np.clip(np.asarray(probs, np.float64), 1e-12, 1.0)
    return aggregate(-(p * np.log(p)).sum(axis=-1), top_fraction)


def disagreement(passes: np.ndarray, top_fraction: float = DEFAULT_TOP_FRACTION) -> np.ndarray:
    """The across-pass variance summed over classes, aggregated per case (:func:`aggregate`); ``[T, N, ..., C]``."""
    return aggregate(np.asarray(passes, np.float64).var(axis=0).sum(axis=-1), top_fraction)


def tta_transforms(height: int, width: int) -> list[tuple[Callable, Callable]]:
    """``(forward, inverse)`` pairs over ``[N, H, W, C]`` arrays: identity, flips, and rotations on square images."""

    def flip(axis: int) -> tuple[Callable, Callable]:
        return (lambda a: np.flip(a, axis), lambda a: np.flip(a, axis))

    def turn(k: int) -> tuple[Callable, Callable]:
        return (lambda a: np.rot90(a, k, axes=(1, 2)), lambda a: np.rot90(a, -k, axes=(1, 2)))

    pairs = [turn(0), flip(1), flip(2)]
    if height == width:
        pairs += [turn(1), turn(2), turn(3)]
    return pairs


def has_dropout(model: Any) -> bool:
    """True when the Keras model (or a nested model) has a dropout layer with a rate above 0."""
    import keras

    return any(isinstance(layer, keras.layers.Dropout) and float(layer.rate) > 0 for layer in _all_layers(model))


def _all_layers(model: Any) -> list:
    found = []
    for layer in getattr(model, "layers", []):
        found.append(layer)
        if hasattr(layer, "layers"):
            found.extend(_all_layers(layer))
    return found


def mc_dropout_model(model: Any) -> Any:
    """A copy of ``model`` whose dropout layers drop even when called with ``training=False``.

    Called in inference mode, batch normalisation keeps its moving statistics while dropout samples
    a new mask each pass: MC-dropout without touching the trained model.

    Raises:
        StrategyError: The network has no dropout layer (its name given, with what to do).
    """
    import keras

    if not has_dropout(model):
        raise StrategyError(
            f'The network "{model.name}" has no dropout layer, so MC-dropout (strategy "variance") has nothing to '
            "sample; train it with dropout (e.g. --network-param dropout=0.2 for unet) or use entropy or tta."
        )

    class AlwaysDropout(keras.layers.Dropout):
        def call(self, inputs: Any, training: Any = False) -> Any:
            return super().call(inputs, training=True)

    def clone(layer: Any) -> Any:
        if isinstance(layer, keras.layers.Dropout):
            return AlwaysDropout.from_config(layer.get_config())
        return layer.__class__.from_config(layer.get_config())

    twin = keras.models.clone_model(model, clone_function=clone, recursive=True)  # nested models too (backbones)
    twin.set_weights(model.get_weights())
    return twin


class Scorer:
    """Scores batches of raw images with one strategy.

    Args:
        network: A Keras model on preprocessed inputs, probabilities out (``[N, H, W, C]``).
        strategy: One of :data:`STRATEGIES`.
        prepare: Raw features -> network inputs (the model's preprocessing); identity when ``None``.
        passes: MC-dropout passes (``variance``).
        seed: Seed of ``random``.
        top_fraction: Share of each image's most uncertain pixels its score averages (1: all, the mean).

    Raises:
        StrategyError: Unknown strategy, or ``variance`` on a network without dropout.
        FormValidationError: ``top_fraction`` is not in (0, 1].
    """

    def __init__(
        self,
        network: Any,
        strategy: str,
        *,
        prepare: Callable | None = None,
        passes: int = DEFAULT_PASSES,
        seed: int = 0,
        top_fraction: float = DEFAULT_TOP_FRACTION,
    ):
        self.strategy = check_strategy(strategy)
        self.top_fraction = check_top_fraction(top_fraction)
        self.passes = max(2, int(passes))
        self.seed = int(seed)
        self.network = network
        # Eager calls: a pool's last batch is smaller, and a traced function would be traced again for it.
        self._runner = mc_dropout_model(network) if strategy == "variance" else network
        self._prepare = prepare or (lambda x: np.asarray(x, np.float32))

    def _forward(self, features: np.ndarray) -> np.ndarray:
        return np.asarray(self._runner(self._prepare(features), training=False))

    def _plain(self, features: np.ndarray) -> np.ndarray:
        return np.asarray(self.network(self._prepare(features), training=False))

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """The network's probabilities for raw ``features`` (dropout off): the proposal's source."""
        return np.asarray(self._plain(features))

    def score(self, ids: list[str], features: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
        """Scores of one batch, and the plain probabilities (``None`` for ``random``, which reads no image).

        Args:
            ids: The candidates' ids (``random`` hashes them with the seed).
            features: Their raw images ``[N, H, W, C]`` (may be ``None`` for ``random``).
        """
        if self.strategy == "random":
            return random_scores(ids, self.seed), None
        assert features is not None
        probs = self.probabilities(features)
        if self.strategy == "entropy":
            return entropy(probs, self.top_fraction), probs
        if self.strategy == "variance":
            runs = np.stack([np.asarray(self._forward(features)) for _ in range(self.passes)])
            return disagreement(runs, self.top_fraction), probs
        runs = np.stack(
            [
                inverse(np.asarray(self._plain(np.ascontiguousarray(forward(features)))))
                for forward, inverse in self._tta(features)
            ]
        )
        return disagreement(runs, self.top_fraction), probs

    @staticmethod
    def _tta(features: np.ndarray) -> list[tuple[Callable, Callable]]:
        return tta_transforms(int(features.shape[1]), int(features.shape[2]))
