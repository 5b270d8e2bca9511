"""Decoding detections in the graph: heat-map peaks → top-K boxes, scores and classes.

A cell is a peak when it equals the maximum of its 3×3 neighbourhood on its
class channel (CenterNet's max-pool "NMS"); the ``k`` best peaks over all
classes but ``dontcare`` become boxes: centre = (cell + sigmoid(offset)) ×
stride, size = exp(log size) × stride. Boxes are in input (network) pixels,
clipped to the image. Everything is TensorFlow ops, so the same function
runs in validation, in ``digits infer`` and inside the exported SavedModel.
"""

from __future__ import annotations

#: Detections kept per image (COCO's maxDets).
TOP_K = 100


def decode_detections(pred, input_hw, num_classes: int, k: int = TOP_K):
    """Decode a batch of output maps.

    Args:
        pred: ``[B, h, w, num_classes + 4]`` network output.
        input_hw: ``(H, W)`` of the network input.
        num_classes: Classes including ``dontcare`` (channel 0, never decoded).
        k: Detections per image.

    Returns:
        ``(boxes [B, k, 4] (x1, y1, x2, y2), scores [B, k], classes [B, k] int32)``.
    """
    import tensorflow as tf

    pred = tf.cast(pred, tf.float32)
    h, w = int(pred.shape[1]), int(pred.shape[2])
    sy, sx = float(input_hw[0]) / h, float(input_hw[1]) / w
    real = num_classes - 1
    heat = tf.sigmoid(pred[..., 1:num_classes])
    peaks = tf.nn.max_pool2d(heat, 3, 1, "SAME")
    heat = tf.where(tf.equal(heat, peaks), heat, tf.zeros_like(heat))
    batch = tf.shape(pred)[0]
    k = min(int(k), h * w * real)
    scores, flat = tf.math.top_k(tf.reshape(heat, [batch, -1]), k=k)
    classes = flat % real + 1
    cell = flat // real
    row, col = cell // w, cell % w
    regression = tf.reshape(pred[..., num_classes : num_classes + 4], [batch, h * w, 4])
    reg = tf.gather(regression, cell, batch_dims=1)  # [B, k, 4]
    cx = (tf.cast(col, tf.float32) + tf.sigmoid(reg[..., 0])) * sx
    cy = (tf.cast(row, tf.float32) + tf.sigmoid(reg[..., 1])) * sy
    bw = tf.exp(tf.clip_by_value(reg[..., 2], -10.0, 10.0)) * sx
    bh = tf.exp(tf.clip_by_value(reg[..., 3], -10.0, 10.0)) * sy
    boxes = tf.stack(
        [
            tf.clip_by_value(cx - bw / 2, 0.0, float(input_hw[1])),
            tf.clip_by_value(cy - bh / 2, 0.0, float(input_hw[0])),
            tf.clip_by_value(cx + bw / 2, 0.0, float(input_hw[1])),
            tf.clip_by_value(cy + bh / 2, 0.0, float(input_hw[0])),
        ],
        axis=-1,
    )
    return boxes, scores, tf.cast(classes, tf.int32)


def as_rows(boxes, scores, classes, min_score: float = 0.0) -> list:
    """Numpy ``K×6`` ``(class, score, x1, y1, x2, y2)`` arrays per image (the format :mod:`.evaluate` takes)."""
    import numpy as np

    boxes, scores, classes = np.asarray(boxes), np.asarray(scores), np.asarray(classes)
    out = []
    for b, s, c in zip(boxes, scores, classes):
        keep = s > min_score
        out.append(np.column_stack([c[keep], s[keep], b[keep]]).astype(np.float64))
    return out
