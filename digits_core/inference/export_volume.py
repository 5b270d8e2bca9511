"""Export of a volume model (``unet3d``, ``unet2.5d``): the whole-volume inference in one SavedModel graph.

``digits infer`` on a volume model reads the source (NIfTI, DICOM series) with the dataset's data plugin,
which resamples and normalises it as the dataset was built, and runs the network over the whole volume:
a Gaussian-blended sliding window for ``unet3d`` (:mod:`digits_core.volumes.sliding`), slice stacks for
``unet2.5d``. The exported SavedModel holds that second part: its ``serving_default`` signature takes
``images``, a batch of such preprocessed volumes ``[N, D, H, W, C]`` float32 of any D, H, W, and returns
``probabilities`` ``[N, D, H, W, K]`` and ``classes`` ``[N, D, H, W]`` (uint8 class ids). Reading and
resampling a medical file is the data plugin's (``info.json`` records the target spacing and the
normalisation), not something a graph on raw files can hold.

Formats: ``savedmodel`` (with TF Serving's folder layout and a parity report) and ``keras`` (the bare
network: run the sliding window yourself, as ``info.json``'s ``volume`` block describes). ONNX and TFLite
are refused with an error that says so: their converters are not run on the sliding-window loop.

The parity report runs the SavedModel in its own runtime (a subprocess importing only TensorFlow) on the
dataset's validation volumes, against the network pass ``digits infer`` makes on them
(:func:`~digits_core.engine.volume_loop.predict_volume`): mean mask IoU over the classes present, voxel
agreement and the largest probability difference. It passes at mask IoU ≥ 0.99.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__
from ..datasets.volumes import VolumeStageReader
from ..engine import jobio
from ..engine.volume_loop import predict_volume
from ..errors import InferenceError
from ..volumes.sliding import gaussian_weights
from .export_formats import export_archive, hard_link_tree, serving_version
from .export_parity import THRESHOLDS, mean_iou, run_runtime, tolerance

VOLUME_FORMATS = ("savedmodel", "keras")


def check_volume_format(fmt: str, folder_name: str, network: str, channels_in: int | None) -> None:
    """Refuse what a volume model cannot be exported as, naming what it can."""
    if fmt not in VOLUME_FORMATS:
        raise InferenceError(
            f"model job {folder_name} is a volume model ({network}): it exports as savedmodel (the sliding-window "
            f"inference over the whole volume in the graph) or keras (the bare network), not {fmt}; ONNX and "
            "TFLite exports of volume models are not supported."
        )
    if channels_in is not None:
        raise InferenceError(
            f"--input-channels does not apply to a volume model ({folder_name}): its inputs are "
            "the preprocessed volumes the data plugin reads"
        )


def _edge_take(tf, x, axis: int, index):
    """``x`` at ``index`` along ``axis``, indices clipped to the axis (numpy's ``mode="edge"`` padding)."""
    return tf.gather(x, tf.clip_by_value(index, 0, tf.shape(x)[axis] - 1), axis=axis)


def _sliding_window(tf, net, volume, patch: list[int], num_classes: int, overlap: float):
    """:func:`digits_core.volumes.sliding.sliding_window` as TensorFlow ops on one ``D×H×W×C`` volume."""
    shape = tf.shape(volume)[:3]
    full = tf.maximum(shape, patch)
    padded = volume
    for axis in range(3):
        padded = _edge_take(tf, padded, axis, tf.range(full[axis]))
    steps = [max(1, int(p * (1.0 - overlap))) for p in patch]
    starts = [tf.concat([tf.range(0, full[a] - patch[a], steps[a]), [full[a] - patch[a]]], 0) for a in range(3)]
    corners = tf.reshape(tf.stack(tf.meshgrid(*starts, indexing="ij"), axis=-1), [-1, 3])
    offsets = tf.constant(np.indices(patch).reshape(3, -1).T, tf.int32)
    weights = tf.constant(gaussian_weights(patch).reshape(-1))
    channels = volume.shape[-1]

    def tile(i, total, norm):
        corner = corners[i]
        x = tf.slice(padded, tf.concat([corner, [0]], 0), patch + [channels])
        probs = tf.reshape(net(x[None], training=False)[0], [-1, num_classes])
        voxels = offsets + corner
        return (
            i + 1,
            tf.tensor_scatter_nd_add(total, voxels, probs * weights[:, None]),
            tf.tensor_scatter_nd_add(norm, voxels, weights),
        )

    total = tf.zeros(tf.concat([full, [num_classes]], 0), tf.float32)
    _, total, norm = tf.while_loop(
        lambda i, *_: i < tf.shape(corners)[0], tile, (tf.constant(0), total, tf.zeros(full, tf.float32))
    )
    return (total / norm[..., None])[: shape[0], : shape[1], : shape[2]]


def _slice_stacks(tf, net, volume, radius: int, unit: int):
    """:func:`digits_core.engine.volume_loop.predict_volume`'s ``unet2.5d`` pass as TensorFlow ops."""
    depth, height, width = tf.unstack(tf.shape(volume)[:3])
    padded = _edge_take(tf, volume, 0, tf.range(-radius, depth + radius))
    stacks = tf.concat([padded[offset : offset + depth] for offset in range(2 * radius + 1)], axis=-1)
    stacks = _edge_take(tf, stacks, 1, tf.range(height + (-height) % unit))
    stacks = _edge_take(tf, stacks, 2, tf.range(width + (-width) % unit))
    probs = tf.map_fn(lambda s: net(s[None], training=False)[0], stacks, fn_output_signature=tf.float32)
    return probs[:, :height, :width]


def volume_serving_function(net, info: dict):
    """``(serve, input signature)``: whole-volume class probabilities and class ids for a batch of volumes."""
    import tensorflow as tf

    config, classes = info["volume"], int(info["num_outputs"])
    channels = int(info["input_channels"])

    def one(volume):
        if config["network"] == "unet3d":
            return _sliding_window(tf, net, volume, [int(p) for p in config["patch"]], classes, config["overlap"])
        return _slice_stacks(tf, net, volume, int(config["adjacent_slices"]), 2 ** (int(config["levels"]) - 1))

    def serve(images):
        probs = tf.map_fn(one, tf.cast(images, tf.float32), fn_output_signature=tf.float32)
        return {"probabilities": probs, "classes": tf.cast(tf.argmax(probs, axis=-1), tf.uint8)}

    return serve, [tf.TensorSpec([None, None, None, None, channels], tf.float32, name="images")]


def _val_cases(info: dict, sample: int) -> list[tuple[str, np.ndarray]]:
    stage = Path(info["dataset_path"]) / ("val" if info.get("val_count") else "train")
    if not (stage / "data.mdb").is_file():
        return []
    reader = VolumeStageReader(stage)
    try:
        count = int(info.get("val_count") or info.get("train_count") or 0)
        cases = [reader.case(i)[0] for i in range(min(sample, count))]
    finally:
        reader.close()
    return [(f"{stage.name}[{i}] {v.name}", v.array.astype(np.float32)) for i, v in enumerate(cases)]


def volume_parity(net, info: dict, folder: Path, sample: int) -> dict:
    """The SavedModel in ``folder`` in its own runtime against ``digits infer``'s pass on the validation volumes."""
    cases = _val_cases(info, sample)
    if not cases:
        return {
            "format": "savedmodel",
            "passed": None,
            "sample": 0,
            "skipped": "the model's dataset is not available: no validation volumes to compare on",
        }
    config = info["volume"]
    reference = [
        predict_volume(
            net,
            array,
            config["network"],
            config["patch"],
            int(info["num_outputs"]),
            overlap=config["overlap"],
            adjacent=config["adjacent_slices"],
            unit=2 ** (config["levels"] - 1),
        )
        for _, array in cases
    ]
    got = run_runtime("savedmodel", folder, [array for _, array in cases])
    diffs = [np.abs(g["probabilities"] - r) for g, r in zip(got, reference)]
    ious = [mean_iou(g["classes"], np.argmax(r, axis=-1)) for g, r in zip(got, reference)]
    agree = [float(np.mean(g["classes"] == np.argmax(r, axis=-1))) for g, r in zip(got, reference)]
    largest = float(max(d.max() for d in diffs))
    bound, rule = tolerance("savedmodel", False, 1.0)  # probabilities lie in [0, 1]
    failed = [
        name
        for name, bad in (("mask_iou", np.mean(ious) < THRESHOLDS["mask_iou"]), ("max_abs_diff", largest > bound))
        if bad
    ]
    return {
        "format": "savedmodel",
        "runtime": "tf.saved_model.load",
        "reference": "digits infer (predict_volume)",
        "inputs": len(cases),
        "sample": sample,
        "max_abs_diff": largest,
        "mean_abs_diff": float(np.mean([d.mean() for d in diffs])),
        "tolerance": bound,
        "tolerance_rule": rule,
        "mask_iou": float(np.mean(ious)),
        "voxel_agreement": float(np.mean(agree)),
        "worst_input": cases[int(np.argmin(ious))][0],
        "passed": not failed,
        "failed_checks": failed,
    }


def build_volume_export(model: Any, fmt: str, folder: Path, *, parity_sample: int | None, jobs_dir=None) -> Path:
    """Write the export files of a volume model job into ``folder`` (created), with ``parity.json`` for savedmodel."""
    import keras

    job_folder = jobio.model_folder(model, jobs_dir)
    info: dict[str, Any] = dict(jobio.read_model_info(job_folder))
    model_file = job_folder / info.get("model_file", "model.keras")
    if not model_file.is_file():
        raise InferenceError(f"model job {job_folder.name} has no trained model ({model_file.name}); did it finish?")
    folder.mkdir(parents=True)
    epochs = info["volume"].get("epochs", 1)
    described: dict[str, Any] = {
        "format": fmt,
        "digits_core_version": __version__,
        "kind": "volume",
        "task": info.get("task"),
        "network": info.get("network"),
        "model": job_folder.name,
        "class_labels": info.get("class_labels"),
        "volume": info["volume"],
        "input_channels": info.get("input_channels"),
        "target_spacing_mm": info.get("target_spacing_mm"),
        "normalization": info.get("normalization"),
        "dataset_plugin": info.get("dataset_plugin"),
    }
    net = keras.models.load_model(model_file, compile=False)
    if fmt == "keras":
        shutil.copy2(model_file, folder / "model.keras")
    else:
        target = folder / "serving" / job_folder.name / str(serving_version(epochs))
        target.parent.mkdir(parents=True)
        serve, signature = volume_serving_function(net, info)
        export_archive(net, serve, signature, target)
        hard_link_tree(target, folder / "saved_model")
        described["signature"] = {
            "inputs": {
                "images": "float32 [N, D, H, W, C]: volumes as the data plugin's "
                "load_inference_volume returns them (resampled, normalised)"
            },
            "outputs": {"probabilities": "float32 [N, D, H, W, K]", "classes": "uint8 [N, D, H, W] class ids"},
        }
        described["tf_serving"] = {"base_path": f"serving/{job_folder.name}", "version": serving_version(epochs)}
    if info.get("class_labels"):
        (folder / "labels.txt").write_text("\n".join(str(c) for c in info["class_labels"]) + "\n", encoding="utf-8")
    (folder / "info.json").write_text(json.dumps(described, indent=2, default=str) + "\n", encoding="utf-8")
    if parity_sample and fmt == "savedmodel":
        report = volume_parity(net, info, folder, parity_sample)
        (folder / "parity.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return folder
