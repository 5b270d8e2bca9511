"""Inference with a volume model: a NIfTI file or DICOM series folder in, its label volume out.

:func:`infer_volume` asks the dataset's data plugin (which knows the
formats) to read and preprocess the source exactly as the dataset was
(``load_inference_volume``), runs the network over the whole volume
(sliding window for ``unet3d``, slice stacks for ``unet2.5d``), and has the
plugin map the label back to the source's voxels and write it
(``write_volume_result``: NIfTI with the source affine, plus a multi-frame
DICOM-SEG for a DICOM series).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..errors import DigitsError, FormValidationError, InferenceError
from . import jobio
from .volume_loop import predict_volume


class VolumeResult(NamedTuple):
    """One inferred volume.

    Attributes:
        source: The input (file or series folder).
        label: The label volume on the source's voxels (NIfTI ``i, j, k`` order), uint8 class ids.
        files: What was written (NIfTI, DICOM-SEG).
        volumes_ml: Volume per foreground class name, in mL.
        volume: The preprocessed canonical image the network saw (a ``Volume``).
        canonical_label: The label on that image's voxels (``D×H×W``), as a view shows it.
        note: What the plugin did besides (the DICOM-SEG stored on the server), or ``None``.
        ground_truth: The given ground truth on the voxels of ``canonical_label``, or ``None``.
    """

    source: str
    label: np.ndarray
    files: list
    volumes_ml: dict
    volume: Any = None
    canonical_label: Any = None
    note: str | None = None
    ground_truth: Any = None


class VolumeSourceError(InferenceError):
    """A source is not a volume this model can segment (the message names it)."""


def is_volume_model(model: Any, jobs_dir=None) -> bool:
    """True when the model job's ``model.json`` says ``"kind": "volume"`` (reads files only; no TensorFlow)."""
    try:
        return jobio.read_model_info(jobio.model_folder(model, jobs_dir)).get("kind") == "volume"  # type: ignore[comparison-overlap]
    except (DigitsError, OSError, ValueError):
        return False


def _plugin(info: dict, form_data: dict | None = None):
    """The dataset's data plugin for inference, with the values of its inference form (validated) when given."""
    from ..plugins.registry import inference_plugin  # the plugin registry loads pluggy: only when a volume model infers

    plugin_id = info["dataset_plugin"]
    dataset_json = Path(info["dataset_path"]) / "dataset.json"
    try:
        userdata = json.loads(dataset_json.read_text(encoding="utf-8")).get("userdata", {})
    except (OSError, ValueError) as exc:
        raise InferenceError(f"{dataset_json}: the model's dataset cannot be read ({exc})") from None
    plugin, _ = inference_plugin(plugin_id, userdata, form_data, "give NIfTI files or DICOM series folders")
    if not hasattr(plugin, "load_inference_volume"):
        raise InferenceError(f'data plugin "{plugin_id}" cannot read volumes for inference')
    return plugin


def infer_volume(
    model: Any,
    sources: list,
    *,
    jobs_dir=None,
    out_dir: str | None = None,
    form_data: dict | None = None,
    labels: dict | None = None,
) -> list[VolumeResult]:
    """Segment volumes with a trained volume model.

    Args:
        model: The model job (id, unique prefix, folder or :class:`~digits_core.Job`).
        sources: NIfTI files and/or DICOM series folders.
        jobs_dir: The jobs folder.
        out_dir: Where to write ``NAME_seg.nii.gz`` (and ``NAME_seg.dcm`` for a series); nothing when ``None``.
        form_data: Values of the data plugin's inference form: the inputs it names (a DICOMweb series,
            ``dicomweb_series``) are inferred after ``sources``; ``store`` sends each DICOM-SEG back to it.
        labels: Ground truth per source (``{source: label file}``): the result's ``ground_truth``.

    Raises:
        InferenceError: Not a volume model.
        VolumeSourceError: A source is not a volume (the message names it).
        FormValidationError: On field ``label``: a ground-truth file cannot be read or does not fit its source.
    """
    import keras

    folder = jobio.model_folder(model, jobs_dir)
    info: dict = dict(jobio.read_model_info(folder))
    if info.get("kind") != "volume":
        raise InferenceError(f"model job {folder.name} is not a volume model; use `digits infer` on images")
    model_file = folder / info.get("model_file", "model.keras")
    if not model_file.is_file():
        raise InferenceError(f"model job {folder.name} has no trained model ({model_file.name}); did it finish?")
    plugin = _plugin(info, form_data)
    sources = list(sources) + list(getattr(plugin, "inference_inputs", list)())
    if not sources:
        raise InferenceError("give NIfTI files (.nii, .nii.gz), DICOM series folders or a DICOMweb series")
    net = keras.models.load_model(model_file, compile=False)
    config = info["volume"]
    class_labels = list(info.get("class_labels") or [])
    results: list[VolumeResult] = []
    names: set[str] = set()
    for source in sources:
        label_file = (labels or {}).get(source)
        try:
            volume, context = plugin.load_inference_volume(str(source), *([label_file] if label_file else []))
        except FormValidationError:
            raise
        except DigitsError as exc:
            raise VolumeSourceError(str(exc)) from None
        name = str(context.get("name") or "volume")
        if name in names:  # two inputs of one name (a case's NIfTI and its series) never overwrite each other
            name = context["name"] = f"{name}_{len(results) + 1}"
        names.add(name)
        probs = predict_volume(
            net,
            volume.array.astype(np.float32),
            config["network"],
            config["patch"],
            int(info["num_outputs"]),
            overlap=config["overlap"],
            adjacent=config["adjacent_slices"],
            unit=2 ** (config["levels"] - 1),
        )
        label = np.argmax(probs, axis=-1).astype(np.uint8)
        try:
            ijk, files = plugin.write_volume_result(label, volume.spacing, context, out_dir)
        except DigitsError as exc:
            raise InferenceError(str(exc)) from None
        voxel_ml = float(np.prod(volume.spacing)) / 1000.0
        counts = np.bincount(label.ravel(), minlength=len(class_labels))
        volumes = {
            (class_labels[c] if c < len(class_labels) else str(c)): round(float(counts[c]) * voxel_ml, 3)
            for c in range(1, len(counts))
        }
        results.append(
            VolumeResult(
                str(source), ijk, files, volumes, volume, label, context.get("note"), context.get("ground_truth")
            )
        )
    return results
