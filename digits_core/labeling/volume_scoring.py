"""Scoring a pool of volumes from a PACS with a volume model, one volume at a time, and its proposals as SEGs.

A DICOMweb pool of ``dimensions: 3`` lists image series (the ``dicomweb-volumes`` data plugin). Each candidate is
read and preprocessed exactly as the model's dataset was, by that dataset's data plugin
(``load_inference_volume("dicomweb:SERIES")``: the series assembled by the ``dicom-series`` code from its
instances over WADO-RS), and segmented whole (sliding window for ``unet3d``, slice stacks for ``unet2.5d``,
:func:`~digits_core.engine.volume_loop.predict_volume`). The strategies are those of 2-D pools, aggregated per
volume: ``entropy`` of the probabilities, ``variance`` over MC-dropout passes, ``tta`` over the flips of the two
in-plane axes (each mapped back), ``random``; each volume's voxel map is aggregated by the mean, or by the mean of its
``top_fraction`` most uncertain voxels (:func:`~digits_core.labeling.strategies.aggregate`). The across-pass variance
is accumulated pass by pass, so memory holds one volume, its probabilities and their running mean and variance,
whatever the pool's size or the passes.

A proposal is the prediction mapped back to the series' voxels (the plugin's ``write_volume_result``, nothing
written) as a slice stack (``D×H×W``: slices along the normal, rows, columns) stored by the pool's plugin as a
multi-frame DICOM-SEG referencing the series (``pool_store_proposal``). A folder pool of ``.npy`` volumes is
scored the same way (each ``.npy`` read at the model's voxel spacing, normalised by the same plugin) and its
proposals are ``proposals/<id>.npy`` in the pool's job folder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import DigitsError
from . import pacs
from .pool import ACCEPTED, IN_REVIEW, PROPOSALS_DIR, Pool, PoolError, encode_mask
from .strategies import (
    DEFAULT_PASSES,
    DEFAULT_TOP_FRACTION,
    aggregate,
    check_strategy,
    check_top_fraction,
    entropy,
    mc_dropout_model,
    random_scores,
)
from .volume_files import folder_volume, model_spacing

#: The inference-form value prefix naming a series on the DICOMweb server (the volume plugins' ``SERIES_PREFIX``).
SERIES_PREFIX = "dicomweb:"
#: Modality names that mean the same (a Decathlon dataset says ``MRI``, DICOM ``MR``).
_SAME_MODALITY = {"MRI": "MR"}


def is_volume_pool(pool: Pool) -> bool:
    """True for a pool whose candidates are 3-D volumes."""
    return int(pool.record().get("dimensions") or 2) == 3


def _server_form(source: dict[str, Any]) -> dict[str, str]:
    """The volume inference form's values that name the pool's server (never a secret)."""
    if source.get("named_server"):
        form = {"dicomweb_server": str(source["named_server"])}
    else:
        form = {"dicomweb_url": str(source.get("url") or "")}
    if source.get("username"):
        form["dicomweb_username"] = str(source["username"])
    return form


class VolumeModel:
    """A trained volume model, loaded once, and its dataset's data plugin set up to read the pool's volumes.

    A folder pool's candidate is a ``D×H×W`` ``.npy``: read as voxels at the model's target spacing (nothing
    resampled) and normalised by the plugin as the model's dataset was; its proposal is on the same voxels.

    Args:
        pool: A pool of volumes (series on a DICOMweb server, or a folder of ``.npy`` volumes).
        model_id: The volume model job.
        jobs_dir: The jobs folder.

    Raises:
        PoolError: Not a volume model, or another modality (both named).
    """

    def __init__(self, pool: Pool, model_id: str, jobs_dir: Any = None):
        from ..engine import jobio
        from ..engine.volume_infer import _plugin

        record = pool.record()
        self.source = dict(record.get("source") or {})
        self.on_server = pacs.is_plugin_source(self.source)
        folder = jobio.model_folder(model_id, jobs_dir)
        info: dict = dict(jobio.read_model_info(folder))
        self.id = folder.name
        if info.get("kind") != "volume":
            raise PoolError(f"Pool {pool.id} holds 3-D volumes; model {self.id} is a 2-D image model.")
        self.info, self.folder = info, folder
        try:
            self.plugin = _plugin(info, _server_form(record["source"]) if self.on_server else None)
        except DigitsError as exc:
            raise PoolError(f"Model {self.id} cannot read the series of pool {pool.id}: {exc}") from None
        want = str(record.get("modality") or "").upper()
        have = str((getattr(self.plugin, "userdata", None) or {}).get("modality") or "").upper()
        if want and have and _SAME_MODALITY.get(want, want) != _SAME_MODALITY.get(have, have):
            raise PoolError(
                f"Pool {pool.id} holds {want} volumes; model {self.id} was trained on {have} volumes. "
                "Use a model of the pool's modality."
            )
        self.class_labels = list(info.get("class_labels") or [])
        self._net: Any = None
        self._twin: Any = None

    @property
    def net(self) -> Any:
        """The Keras network (loaded on first use)."""
        if self._net is None:
            import keras

            self._net = keras.models.load_model(self.folder / self.info.get("model_file", "model.keras"), compile=False)
        return self._net

    def read(self, cand: dict[str, Any]) -> tuple[Any, dict]:
        """The candidate series preprocessed as the dataset was, and the context that maps a label back.

        Raises:
            DigitsError: The series cannot be fetched, or it is not one volume (named by the plugin).
        """
        if not self.on_server:  # a folder pool's .npy on the model's voxel spacing, normalised as its dataset was
            from ..interfaces.volume import Volume  # the plugin contract's volume type

            array = folder_volume(self.source, cand)
            spacing = model_spacing(self.info)
            affine = np.diag([spacing[2], spacing[1], spacing[0], 1.0])
            volume = Volume(array[..., None].astype(np.float32), spacing, affine, str(cand["id"]))
            return self.plugin.preprocess(volume, None)[0], {"kind": "npy", "shape": array.shape}
        return self.plugin.load_inference_volume(SERIES_PREFIX + str(cand["source"]["series"]))

    def probabilities(self, array: np.ndarray, *, dropout: bool = False) -> np.ndarray:
        """``D×H×W×K`` class probabilities of a preprocessed volume (``dropout``: an MC-dropout pass)."""
        from ..engine.volume_loop import predict_volume

        if dropout and self._twin is None:
            self._twin = mc_dropout_model(self.net)
        config = self.info["volume"]
        return predict_volume(
            self._twin if dropout else self.net,
            np.asarray(array, np.float32),
            config["network"],
            config["patch"],
            int(self.info["num_outputs"]),
            overlap=config["overlap"],
            adjacent=config["adjacent_slices"],
            unit=2 ** (config["levels"] - 1),
        )

    def score(
        self,
        cid: str,
        array: np.ndarray,
        strategy: str,
        *,
        passes: int,
        seed: int,
        top_fraction: float = DEFAULT_TOP_FRACTION,
    ) -> float:
        """One volume's score with ``strategy`` (see the module docstring)."""
        if strategy == "random":
            return float(random_scores([cid], seed)[0])
        if strategy == "entropy":
            return float(entropy(self.probabilities(array)[None], top_fraction)[0])
        if strategy == "variance":
            runs: list[Callable[[], np.ndarray]] = [
                lambda: self.probabilities(array, dropout=True) for _ in range(max(2, int(passes)))
            ]
        else:  # tta: the volume and its flips of the in-plane axes, each prediction flipped back
            runs = [lambda: self.probabilities(array)] + [self._flipped(array, axis) for axis in (1, 2)]
        return _running_disagreement(runs, top_fraction)

    def _flipped(self, array: np.ndarray, axis: int) -> Callable[[], np.ndarray]:
        """A run of ``tta``: the prediction of the volume flipped on ``axis``, flipped back."""
        return lambda: np.flip(self.probabilities(np.ascontiguousarray(np.flip(array, axis))), axis)

    def proposal(self, volume: Any, context: dict) -> np.ndarray:
        """The prediction on the series' own voxels as a ``D×H×W`` slice stack (slices, rows, columns)."""
        label = np.argmax(self.probabilities(volume.array), axis=-1).astype(np.uint8)
        if context.get("kind") == "npy":  # the .npy's own voxels (read at the model's spacing: nothing resampled)
            if tuple(label.shape) != tuple(context["shape"]):
                raise PoolError(f"The prediction is {label.shape}; the volume is {context['shape']}.")
            return np.ascontiguousarray(label)
        ijk, _ = self.plugin.write_volume_result(label, volume.spacing, context, None)
        return np.ascontiguousarray(np.transpose(np.asarray(ijk, np.uint8), (2, 1, 0)))


def _running_disagreement(runs: list[Callable[[], np.ndarray]], top_fraction: float = DEFAULT_TOP_FRACTION) -> float:
    """The across-run variance summed over classes, aggregated over the voxels, one run in memory at a time."""
    mean: np.ndarray | None = None
    m2: np.ndarray | None = None
    for count, run in enumerate(runs, start=1):
        probs = np.asarray(run(), np.float64)
        if mean is None or m2 is None:
            mean, m2 = probs.copy(), np.zeros_like(probs)
            continue
        delta = probs - mean
        mean += delta / count
        m2 += delta * (probs - mean)
    assert m2 is not None
    return float(aggregate((m2 / len(runs)).sum(axis=-1)[None], top_fraction)[0])


def score_volume_pool(
    pool: Pool,
    model_id: str,
    strategy: str,
    *,
    passes: int = DEFAULT_PASSES,
    seed: int = 0,
    top_fraction: float = DEFAULT_TOP_FRACTION,
    run: str,
    jobs_dir: Any = None,
    progress: Callable[[dict], None] | None = None,
) -> tuple[str, int, list[dict[str, Any]]]:
    """Score every volume nobody accepted yet, one at a time; each score stored as soon as it is known.

    Returns:
        ``(model id, volumes scored, skipped)``: ``{"id", "source", "error"}`` of each series that could not be
        read (not one volume, not fetched), also recorded on the candidate.

    Raises:
        PoolError: The model does not fit the pool. StrategyError: Unknown strategy, or ``variance`` without dropout.
        FormValidationError: ``top_fraction`` is not in (0, 1].
    """
    check_strategy(strategy)
    top_fraction = check_top_fraction(top_fraction)
    model = VolumeModel(pool, model_id, jobs_dir)
    if strategy == "variance":
        mc_dropout_model(model.net)  # a network without dropout is refused before any series is read
    record = pool.record()
    todo = [
        c
        for c in sorted(record["candidates"].values(), key=lambda c: c["id"])
        if c["state"] not in (ACCEPTED, IN_REVIEW) and c.get("scored_in") != run
    ]
    scored, skipped = 0, []
    for cand in todo:
        try:
            volume, _ = model.read(cand)
            value = model.score(cand["id"], volume.array, strategy, passes=passes, seed=seed, top_fraction=top_fraction)
        except DigitsError as exc:
            skipped.append({"id": cand["id"], "source": cand["source"], "error": str(exc)})
        else:
            pool.record_scores({cand["id"]: value}, strategy, run=run, model_id=model.id)
            scored += 1
        if progress:
            progress({"done": scored + len(skipped), "total": len(todo), "skipped": len(skipped)})
    if skipped:
        pool.record_errors({s["id"]: s["error"] for s in skipped})
    return model.id, scored, skipped


def propose_volumes(
    pool: Pool, model_id: str, count: int, *, jobs_dir: Any = None, user: str | None = None
) -> list[str]:
    """Store the model's prediction for the ``count`` best-scoring open volumes as DICOM-SEG proposals.

    Returns:
        Their ids, highest score first (a series that cannot be read or stored is skipped, its error recorded).
    """
    model = VolumeModel(pool, model_id, jobs_dir)
    record = pool.record()
    open_ones = [
        c for c in record["candidates"].values() if c["state"] in ("unlabelled", "rejected") and c["score"] is not None
    ]
    open_ones.sort(key=lambda c: (-c["score"], c["id"]))
    classes = list(record.get("class_labels") or model.class_labels or ["background", "foreground"])
    done: list[str] = []
    errors: dict[str, str] = {}
    for cand in open_ones[: max(0, int(count))]:
        try:
            volume, context = model.read(cand)
            mask = model.proposal(volume, context)
            if not model.on_server:  # a folder pool: proposals/<id>.npy in the pool's job folder
                name = f"{PROPOSALS_DIR}/{cand['id']}.npy"
                (pool.path / name).write_bytes(encode_mask(mask))
                pool.record_proposal(cand["id"], {"file": name, "model_id": model.id}, user=user)
                done.append(cand["id"])
                continue
            where = pacs.store_proposal(record["source"], cand, mask, classes, model_id=model.id)
        except DigitsError as exc:
            errors[cand["id"]] = str(exc)
            continue
        pool.record_proposal(cand["id"], {**where, "model_id": model.id}, user=user)
        done.append(cand["id"])
    if errors:
        pool.record_errors(errors)
    return done


__all__ = ["SERIES_PREFIX", "VolumeModel", "is_volume_pool", "propose_volumes", "score_volume_pool"]
