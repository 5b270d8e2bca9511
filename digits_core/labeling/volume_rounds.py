"""A round's retraining on a pool of volumes: the accepted labels as a volume dataset, a volume model trained on it.

:func:`retrain_volumes` is what :func:`~digits_core.labeling.rounds.retrain` runs for a pool of ``dimensions: 3``:

* a **folder pool** (candidates are ``D×H×W`` ``.npy`` volumes, labels ``labels/<cid>/vN.npy``): every accepted
  candidate's volume and its newest label version are written as a NIfTI pair (``rounds/r<N>/images`` and
  ``labels`` in the pool's job folder) on the voxels of the ``.npy`` (no resampling: the voxel spacing is the model's
  target spacing, as scoring reads the ``.npy``), and the ``nifti-volumes`` data plugin builds the dataset;
* a **PACS pool** (candidates are image series): the ``dicomweb-volumes`` data plugin builds the dataset of the
  accepted candidates' studies on the pool's server; it reads each series' newest reviewed label SEG (``DIGITS label
  vN by USER``) and never a proposal.

Both datasets are preprocessed as the model's was (its target spacing and normalisation), and the new model is
a volume run of the model's network and settings that **starts from the model's weights** (the ``pretrained``
option of a volume run: a volume model keeps no snapshots, so its final weights are where a round continues).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .masks import read_mask
from .pool import Pool, PoolError
from .volume_files import folder_volume, model_spacing, write_nifti

#: The volume settings a retrained model keeps from the model it continues (network parameters of a volume run).
VOLUME_CARRIED = ("patch", "steps_per_epoch", "foreground", "base_filters", "levels", "adjacent_slices", "overlap")
#: Normalisations the volume dataset forms take (anything else is left to the form's ``auto``).
_NORMALIZATIONS = ("zscore", "ct-window", "none")


def _folder_form(pool: Pool, folder: Path, info: dict[str, Any], spacing: tuple) -> dict[str, Any]:
    """Write the accepted candidates' NIfTI pairs; the ``nifti-volumes`` form of them (no pair: no form)."""
    import numpy as np

    record = pool.record()
    (folder / "images").mkdir(parents=True)
    (folder / "labels").mkdir()
    count = 0
    for cand in pool.accepted():
        if not cand["label"].get("file"):
            continue
        volume = folder_volume(record["source"], cand)
        label = np.asarray(read_mask(pool.file(cand["label"]["file"])), np.uint8)
        if label.shape != volume.shape:
            raise PoolError(f"Candidate {cand['id']}: its label is {label.shape}, its volume {volume.shape}.")
        write_nifti(volume.astype(np.float32), folder / "images" / f"{cand['id']}.nii.gz", spacing)
        write_nifti(label, folder / "labels" / f"{cand['id']}.nii.gz", spacing)
        count += 1
    modality = str(record.get("modality") or "").upper()
    return {
        "count": count,
        "image_folder": str(folder / "images"),
        "label_folder": str(folder / "labels"),
        "modality": modality if modality in ("MR", "CT") else "other",
    }


def _pacs_form(pool: Pool) -> dict[str, Any]:
    """The ``dicomweb-volumes`` form of the accepted candidates' studies on the pool's server (no secret)."""
    source = pool.record()["source"]
    studies = sorted({str(c["source"]["study"]) for c in pool.accepted() if c["label"].get("sop")})
    form: dict[str, Any] = {"count": len(studies), "study_uids": ",".join(studies)}
    if source.get("named_server"):
        form["named_server"] = source["named_server"]
    else:
        form["server_url"] = source.get("url") or ""
    for key in ("username", "cache_folder"):
        if source.get(key):
            form[key] = source[key]
    return form


def _val_dice(job: Any) -> float | None:
    """The last ``val_dice`` a volume run logged (``None`` without validation cases)."""
    from ..engine.jobio import read_metrics  # the engine's metrics.jsonl reader

    found = None
    for point in read_metrics(job.path):
        if point.get("name") == "val_dice" and isinstance(point.get("value"), (int, float)):
            found = float(point["value"])
    return found


def retrain_volumes(
    pool: Pool,
    model_id: str,
    number: int,
    *,
    epochs: int,
    val_percent: float,
    jobs_dir: Any = None,
    progress: Callable[[dict], None] | None = None,
) -> tuple[str, str, float | None] | None:
    """Train a volume model from ``model_id``'s weights on every accepted label; ``(dataset, model, val Dice)``.

    Returns ``None`` when nothing is accepted yet.

    Raises:
        PoolError: Not a volume model, fewer than 2 accepted labels, or the labels' classes are not the model's.
    """
    from ..datasets.create import create_dataset  # the dataset machinery loads only for a retraining
    from ..engine import jobio, train  # the engine (TensorFlow) loads only for a retraining
    from ..engine.volume_train import volume_dataset_folder  # as the engine finds a volume dataset

    folder_of_model = jobio.model_folder(model_id, jobs_dir)
    info: dict[str, Any] = dict(jobio.read_model_info(folder_of_model))
    if info.get("kind") != "volume":
        raise PoolError(f"Pool {pool.id} holds 3-D volumes; model {folder_of_model.name} is a 2-D image model.")
    config = dict(info.get("volume") or {})
    on_server = pool.record()["source"].get("kind") == "dicomweb"
    folder = pool.path / "rounds" / f"r{number}"
    shutil.rmtree(folder, ignore_errors=True)
    if on_server:
        form, plugin = _pacs_form(pool), "dicomweb-volumes"
    else:
        form, plugin = _folder_form(pool, folder, info, model_spacing(info)), "nifti-volumes"
    count = form.pop("count")
    if count == 0:
        shutil.rmtree(folder, ignore_errors=True)
        return None
    if count < 2:
        raise PoolError(f"Pool {pool.id} has {count} accepted volume; review at least 2 before retraining.")
    normalization = str(info.get("normalization") or "")
    form.update(
        target_spacing=",".join(str(s) for s in model_spacing(info)),
        normalization=normalization if normalization in _NORMALIZATIONS else "auto",
        pct_val=int(round(val_percent)),
        seed=0,
    )
    name = f"{pool.job.name} round {number}"
    dataset = create_dataset(plugin, form, name=name, workers=1, jobs_dir=jobs_dir)
    published = volume_dataset_folder(dataset, jobs_dir)
    classes = (
        int(json.loads((published / "dataset.json").read_text("utf-8")).get("num_classes") or 0) if published else 0
    )
    want = int(info.get("num_outputs") or 0)
    if classes and want and classes != want:
        raise PoolError(
            f"The accepted labels of pool {pool.id} hold {classes} classes; model {folder_of_model.name} "
            f"segments {want}. Dataset {dataset.id} was built; nothing was trained."
        )
    params = {k: config[k] for k in VOLUME_CARRIED if config.get(k) is not None}
    carried = {k: config[k] for k in ("batch_size", "learning_rate", "seed") if config.get(k) is not None}
    model = train(
        dataset.id,
        info.get("network") or config.get("network"),
        name=name,
        jobs_dir=jobs_dir,
        pretrained=folder_of_model.name,
        epochs=epochs,
        validation_interval=max(1, int(epochs)),
        network_params=params,
        progress=progress,
        **carried,
    )
    return dataset.id, model.id, _val_dice(model)


__all__ = ["retrain_volumes"]
