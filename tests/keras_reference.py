"""An independent reference for what a trained model job predicts: plain Keras and numpy.

Written from the on-disk layout (docs/formats.md: ``model.json``,
``mean.npy``, ``snapshots/epoch-NNN.keras``), not with the engine's
helpers, so a test comparing the engine or inference against it fails when
either side drifts from the documented format.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

#: What inference reads from ``model.json``: the layout the hand-written model jobs of
#: ``tests/test_inference_api.py`` follow, and that ``tests/test_inference_engine.py`` checks the
#: engine writes. Top-level key -> type; ``preprocessing`` and snapshot entries have their own keys.
MODEL_JSON_LAYOUT = {
    "network": str,
    "dataset_id": str,
    "task": str,
    "class_labels": list,
    "input_shape": list,
    "preprocessing": dict,
    "last_epoch": (int, float),
    "dataset_plugin": str,
    "feature_dtype": str,
    "snapshots": list,
}
PREPROCESSING_KEYS = {"mean_subtraction", "mean_file", "scale", "crop_size", "feature_shape", "input_shape"}
SNAPSHOT_KEYS = {"epoch", "file"}


def check_model_json_layout(info: dict, *, exact: bool) -> None:
    """Assert ``info`` has the :data:`MODEL_JSON_LAYOUT` (exactly, or at least those keys)."""
    keys = set(MODEL_JSON_LAYOUT)
    assert (set(info) == keys) if exact else (keys <= set(info)), sorted(set(info) ^ keys)
    for key, kind in MODEL_JSON_LAYOUT.items():
        assert isinstance(info[key], kind), (key, info[key])
    prep = set(info["preprocessing"])
    assert (prep == PREPROCESSING_KEYS) if exact else (prep >= PREPROCESSING_KEYS), sorted(prep ^ PREPROCESSING_KEYS)
    assert info["snapshots"] and all(set(s) >= SNAPSHOT_KEYS for s in info["snapshots"])


def model_info(job_path) -> dict:
    return json.loads((Path(job_path) / "model.json").read_text(encoding="utf-8"))


def preprocess(job_path, features: np.ndarray) -> np.ndarray:
    """``(float32(x) - mean) * scale``, then the centre crop (floor offsets), as model.json describes."""
    prep = model_info(job_path)["preprocessing"]
    x = np.asarray(features).astype(np.float32)
    if prep["mean_subtraction"] != "none":
        mean = np.load(Path(job_path) / prep["mean_file"]).astype(np.float32)
        if prep["mean_subtraction"] == "pixel":
            mean = mean.reshape(-1, mean.shape[-1]).mean(axis=0)
        x = x - mean
    x = x * np.float32(prep["scale"])
    crop = prep.get("crop_size")
    if crop:
        top, left = (x.shape[1] - crop) // 2, (x.shape[2] - crop) // 2
        x = x[:, top : top + crop, left : left + crop, :]
    return x


def reference_predict(job_path, features: np.ndarray, epoch: int | None = None) -> np.ndarray:
    """Outputs of the model job's last (or ``epoch``'s) snapshot, loaded with plain Keras."""
    import keras

    snapshots = model_info(job_path)["snapshots"]
    entry = snapshots[-1] if epoch is None else next(s for s in snapshots if int(s["epoch"]) == epoch)
    model = keras.saving.load_model(Path(job_path) / "snapshots" / entry["file"], compile=False)
    return np.asarray(model(preprocess(job_path, features), training=False))


def dice(truth: np.ndarray, predicted: np.ndarray, num_classes: int) -> float:
    """Mean over foreground classes present in ``truth`` of 2|T∩P| / (|T|+|P|), over all pixels at once."""
    scores = []
    for c in range(1, num_classes):
        t, p = truth == c, predicted == c
        if t.any():
            scores.append(2.0 * np.logical_and(t, p).sum() / (t.sum() + p.sum()))
    return float(np.mean(scores))


def constant_predictor_dice(truth: np.ndarray, num_classes: int) -> float:
    """The best :func:`dice` any constant prediction reaches on ``truth`` (every pixel one class)."""
    return max(dice(truth, np.full_like(truth, c), num_classes) for c in range(num_classes))
