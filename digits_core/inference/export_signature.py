"""The one serving function every export format is built from.

``serve(images)`` takes raw images ``[N, h, w, C_in]`` (the dataset's dtype,
any ``h × w``, one size per batch) and runs, in one graph:

1. the dataset's image preparation (:func:`~digits_core.inference.export_graph.tf_prepare`:
   channels, resize mode, cast; constant mid-grey padding, as ``digits infer``);
2. the engine's preprocessing and the network (:meth:`InferenceModel.serve`:
   mean subtraction, scale, centre crop);
3. the task's post-processing. Outputs by task:

   * classification: ``outputs`` (probabilities ``[N, K]``), ``classes``
     and ``scores`` (top-N, ``[N, n]``, best first, n = min(5, K));
   * segmentation: ``outputs`` (``[N, H', W', K]``) and ``classes`` (argmax ``[N, H', W']``);
   * regression: ``outputs`` (the target vector ``[N, T]``);
   * image-to-image: ``outputs`` (the image ``[N, H', W', C]``);
   * multilabel: ``outputs`` (probabilities ``[N, K]``) and ``labels`` (``[N, K]`` int32, 1 where
     the probability reaches the label's tuned threshold, :mod:`~digits_core.inference.multilabel`);
   * detection: ``boxes`` ``[N, 100, 4]`` (``x1, y1, x2, y2`` in each input
     image's pixels, the resize mode undone), ``scores`` and ``classes``
     (int32), best first; rows below the score threshold have score 0 and class -1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .model import InferenceModel

#: Classes listed per input by a classification export.
TOP_N = 5


def _detection_outputs(loaded: InferenceModel, rows: Any, src_hw: Any, threshold: float, ft: Any) -> dict:
    """Decoded rows in network pixels → boxes in the input's pixels (:func:`~.detection.to_detections` in TF)."""
    import tensorflow as tf

    from .export_graph import tf_resize_plan

    h, w = loaded.feature_shape[:2]
    src_h, src_w = src_hw[0], src_hw[1]
    rh, rw, crop_y, crop_x, pad_y, pad_x = tf_resize_plan(src_h, src_w, h, w, loaded.dataset.resize_mode, ft)
    f32 = tf.float32
    sx, sy = tf.cast(rw, f32) / tf.cast(src_w, f32), tf.cast(rh, f32) / tf.cast(src_h, f32)
    ox, oy = tf.cast(pad_x - crop_x, f32), tf.cast(pad_y - crop_y, f32)
    boxes = rows[..., 2:]
    x1 = tf.clip_by_value((boxes[..., 0] - ox) / sx, 0.0, tf.cast(src_w, f32))
    y1 = tf.clip_by_value((boxes[..., 1] - oy) / sy, 0.0, tf.cast(src_h, f32))
    x2 = tf.clip_by_value((boxes[..., 2] - ox) / sx, 0.0, tf.cast(src_w, f32))
    y2 = tf.clip_by_value((boxes[..., 3] - oy) / sy, 0.0, tf.cast(src_h, f32))
    keep = rows[..., 1] >= threshold
    zero = tf.zeros_like(x1)
    return {
        "boxes": tf.stack([tf.where(keep, v, zero) for v in (x1, y1, x2, y2)], axis=-1),
        "scores": tf.where(keep, rows[..., 1], zero),
        "classes": tf.where(keep, tf.cast(rows[..., 0], tf.int32), -tf.ones_like(rows[..., 0], tf.int32)),
    }


def task_outputs(loaded: InferenceModel, out: Any, src_hw: Any, *, threshold: float, ft: Any) -> dict:
    """The post-processing of ``loaded.task`` on the network output (see the module docstring)."""
    import tensorflow as tf

    if loaded.task == "detection":
        return _detection_outputs(loaded, out, src_hw, threshold, ft)
    if loaded.task == "classification":
        scores, classes = tf.math.top_k(out, k=min(TOP_N, int(out.shape[-1])))
        return {"outputs": out, "classes": classes, "scores": scores}
    if loaded.task == "segmentation":
        return {"outputs": out, "classes": tf.argmax(out, axis=-1, output_type=tf.int32)}
    if loaded.task == "multilabel":
        from .multilabel import label_thresholds  # only multi-label models read their thresholds

        thresholds = tf.constant(np.asarray(label_thresholds(loaded), np.float32))
        return {"outputs": out, "labels": tf.cast(out >= thresholds, tf.int32)}
    return {"outputs": out}


def serving_function(
    loaded: InferenceModel, *, channels_in: int | None = None, float_type: Any = None, threshold: float | None = None
) -> tuple[Callable, list]:
    """``(serve, input_signature)`` for ``loaded`` (see the module docstring).

    Args:
        loaded: The model.
        channels_in: Channels of the raw input (default: the dataset's; 1 ↔ 3 are converted in the graph).
        float_type: Precision of the preparation graph (``tf.float64``; ``tf.float32`` for TFLite).
        threshold: Lowest detection score reported (default: ``digits infer``'s).
    """
    import tensorflow as tf

    from .export_graph import tf_prepare

    if threshold is None:
        from .detection import DEFAULT_SCORE_THRESHOLD

        threshold = DEFAULT_SCORE_THRESHOLD
    ft = float_type or tf.float64
    shape, dtype, mode = loaded.feature_shape, np.dtype(loaded.feature_dtype), loaded.dataset.resize_mode
    channels = int(channels_in or shape[2])

    def serve(images):
        x = tf_prepare(images, shape, dtype, mode, channels, float_type=ft)
        return task_outputs(loaded, loaded.serve(x), tf.shape(images)[1:3], threshold=float(threshold), ft=ft)

    return serve, [tf.TensorSpec([None, None, None, channels], tf.as_dtype(dtype), name="images")]


def describe_signature(loaded: InferenceModel, channels_in: int | None = None) -> dict:
    """The serving signature as JSON (for ``info.json``)."""
    h, w, c = loaded.feature_shape
    outputs: dict[str, Any]
    if loaded.task == "detection":
        outputs = {
            "boxes": "[N, 100, 4] x1, y1, x2, y2 in input image pixels",
            "scores": "[N, 100]",
            "classes": "[N, 100] int32 (-1: below the score threshold)",
        }
    else:
        outputs = {"outputs": [None, *loaded.model.output_shape[1:]]}
        if loaded.task == "classification":
            outputs.update(classes="[N, n] int32 top-n class ids", scores="[N, n] their probabilities")
        elif loaded.task == "segmentation":
            outputs.update(classes="[N, H, W] int32 argmax")
        elif loaded.task == "multilabel":
            outputs.update(labels="[N, K] int32: 1 where the probability reaches the label's tuned threshold")
    return {
        "name": "serving_default",
        "input": {
            "name": "images",
            "shape": [None, None, None, int(channels_in or c)],
            "dtype": np.dtype(loaded.feature_dtype).name,
            "resized_to": [h, w],
            "resize": f"{loaded.dataset.resize_mode} (digits_core.resize, padding mid-grey)",
        },
        "outputs": outputs,
    }
