"""Moving box labels with the engine's geometric augmentation.

The engine augments a batch with one projective transform per image
(:func:`digits_core.engine.augmentation.augment_batch`): output pixel
``(x, y)`` samples input pixel ``(a0·x + a1·y + a2, b0·x + b1·y + b2)``
(pixel centres at integers). :func:`move_boxes` applies the inverse map to
the four corners of each box (continuous coordinates, pixel ``i`` spanning
``[i, i+1)``), takes their bounding box, clips it to the output, and drops
boxes whose centre left the image (their rows become padding, class ``-1``).
Flips, zoom and crops keep boxes exact; rotations give the bounding box of
the rotated box.
"""

from __future__ import annotations


def move_boxes(boxes, transforms, out_hw):
    """Map ``[B, M, 5]`` boxes through per-image transforms ``[B, 8]`` (ImageProjectiveTransformV3 layout).

    Returns:
        float32 ``[B, M, 5]`` boxes in the output image.
    """
    import tensorflow as tf

    boxes = tf.cast(boxes, tf.float32)
    oh, ow = float(out_hw[0]), float(out_hw[1])
    a0, a1, a2 = transforms[:, 0], transforms[:, 1], transforms[:, 2]
    b0, b1, b2 = transforms[:, 3], transforms[:, 4], transforms[:, 5]
    det = a0 * b1 - a1 * b0
    # inverse of [[a0, a1], [b0, b1]], per image, broadcast over the M boxes
    i00, i01 = (b1 / det)[:, None], (-a1 / det)[:, None]
    i10, i11 = (-b0 / det)[:, None], (a0 / det)[:, None]
    cls = boxes[..., 0]
    xs = tf.stack([boxes[..., 1], boxes[..., 3], boxes[..., 1], boxes[..., 3]], axis=-1) - 0.5
    ys = tf.stack([boxes[..., 2], boxes[..., 2], boxes[..., 4], boxes[..., 4]], axis=-1) - 0.5
    dx = xs - a2[:, None, None]
    dy = ys - b2[:, None, None]
    ox = i00[..., None] * dx + i01[..., None] * dy + 0.5
    oy = i10[..., None] * dx + i11[..., None] * dy + 0.5
    x1, x2 = tf.reduce_min(ox, axis=-1), tf.reduce_max(ox, axis=-1)
    y1, y2 = tf.reduce_min(oy, axis=-1), tf.reduce_max(oy, axis=-1)
    cx, cy = (x1 + x2) / 2.0, (y1 + y2) / 2.0
    inside = (cx >= 0) & (cx < ow) & (cy >= 0) & (cy < oh) & (cls >= 0)
    moved = tf.stack(
        [
            cls,
            tf.clip_by_value(x1, 0.0, ow),
            tf.clip_by_value(y1, 0.0, oh),
            tf.clip_by_value(x2, 0.0, ow),
            tf.clip_by_value(y2, 0.0, oh),
        ],
        axis=-1,
    )
    return tf.where(inside[..., None], moved, tf.fill(tf.shape(moved), -1.0))
