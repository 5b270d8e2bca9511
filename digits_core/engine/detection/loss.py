"""The detector's training targets and loss, built inside the graph from padded box labels.

Labels reach the loss as float32 ``[batch, M, 5]`` ``(class, x1, y1, x2,
y2)`` in input pixels, padded with rows of class ``-1``. For an output map
of stride ``s`` (see :mod:`.network` for the channel layout):

* **heat map**: each box of class ``c >= 1`` puts an elliptical Gaussian
  (σ = 0.54·size/6 per axis, at least 0.5 cells; TTFNet's choice) at its
  centre cell on channel ``c``; overlapping Gaussians of a class keep the
  maximum. Loss: CenterNet's penalty-reduced focal loss (α = 2, β = 4),
  divided by the number of objects.
* **offset** and **log size**: L1 at each object's centre cell.
* ``dontcare`` boxes (class 0): every cell whose centre falls inside one is
  left out of the heat-map loss, and they are never targets.
"""

from __future__ import annotations

#: Weights of the three loss terms.
HEAT_WEIGHT, OFFSET_WEIGHT, SIZE_WEIGHT = 1.0, 1.0, 1.0


def stride_of(input_hw, map_hw) -> tuple[float, float]:
    """``(stride_y, stride_x)`` of an output map over its input."""
    return float(input_hw[0]) / float(map_hw[0]), float(input_hw[1]) / float(map_hw[1])


def encode_targets(boxes, map_hw, stride_yx, num_classes: int):
    """Targets of a batch.

    Returns:
        ``heat [B, h, w, C]``, ``care [B, h, w]`` (0 inside dontcare regions),
        ``index [B, M, 3]`` (batch, row, column of each box centre),
        ``offset [B, M, 2]``, ``log_size [B, M, 2]`` and ``positive [B, M]`` (1 for real objects).
    """
    import tensorflow as tf

    h, w = int(map_hw[0]), int(map_hw[1])
    sy, sx = stride_yx
    boxes = tf.cast(boxes, tf.float32)
    batch = tf.shape(boxes)[0]
    m = tf.shape(boxes)[1]
    cls = boxes[..., 0]
    x1, y1, x2, y2 = boxes[..., 1] / sx, boxes[..., 2] / sy, boxes[..., 3] / sx, boxes[..., 4] / sy
    positive = tf.cast(cls >= 1, tf.float32)
    cx, cy = (x1 + x2) / 2.0, (y1 + y2) / 2.0
    ix = tf.clip_by_value(tf.floor(cx), 0.0, w - 1.0)
    iy = tf.clip_by_value(tf.floor(cy), 0.0, h - 1.0)
    bw, bh = tf.maximum(x2 - x1, 1e-2), tf.maximum(y2 - y1, 1e-2)
    sigx = tf.maximum(0.54 * bw / 6.0, 0.5)
    sigy = tf.maximum(0.54 * bh / 6.0, 0.5)
    gx = tf.range(w, dtype=tf.float32)[None, None, None, :]
    gy = tf.range(h, dtype=tf.float32)[None, None, :, None]
    gauss = tf.exp(
        -((gx - ix[..., None, None]) ** 2) / (2 * sigx[..., None, None] ** 2)
        - ((gy - iy[..., None, None]) ** 2) / (2 * sigy[..., None, None] ** 2)
    )  # [B, M, h, w]
    # per class, the maximum over its boxes (a loop over classes rather than a segment reduction:
    # deterministic on every device, and only [B, M, h, w] at a time)
    heat = tf.stack(
        [
            tf.reduce_max(gauss * tf.cast(tf.equal(cls, float(c)), tf.float32)[..., None, None], axis=1)
            for c in range(num_classes)
        ],
        axis=-1,
    )
    heat = tf.where(tf.range(num_classes) >= 1, tf.maximum(heat, 0.0), 0.0)  # dontcare is never a target
    # dontcare: cells whose centre lies inside a class-0 box
    cgx = gx + 0.5
    cgy = gy + 0.5
    inside = (
        (cgx >= x1[..., None, None])
        & (cgx <= x2[..., None, None])
        & (cgy >= y1[..., None, None])
        & (cgy <= y2[..., None, None])
        & (tf.equal(cls, 0.0)[..., None, None])
    )
    care = 1.0 - tf.cast(tf.reduce_any(inside, axis=1), tf.float32)
    bidx = tf.tile(tf.range(batch)[:, None], [1, m])
    index = tf.stack([bidx, tf.cast(iy, tf.int32), tf.cast(ix, tf.int32)], axis=-1)
    offset = tf.stack([cx - ix, cy - iy], axis=-1)
    log_size = tf.math.log(tf.stack([bw, bh], axis=-1))
    return heat, care, index, offset, log_size, positive


def detection_loss_terms(boxes, pred, input_hw, num_classes: int):
    """``(heat loss, offset loss, size loss)`` of one batch (each a scalar averaged per object)."""
    import tensorflow as tf

    pred = tf.cast(pred, tf.float32)
    map_hw = (pred.shape[1], pred.shape[2])
    heat_t, care, index, offset_t, size_t, positive = encode_targets(
        boxes, map_hw, stride_of(input_hw, map_hw), num_classes
    )
    logits = pred[..., :num_classes]
    log_p = tf.math.log_sigmoid(logits)
    log_not_p = tf.math.log_sigmoid(-logits)
    p = tf.sigmoid(logits)
    is_center = tf.cast(heat_t >= 1.0 - 1e-6, tf.float32)
    pos_loss = -is_center * tf.square(1.0 - p) * log_p
    neg_loss = -(1.0 - is_center) * tf.pow(1.0 - heat_t, 4.0) * tf.square(p) * log_not_p
    num_pos = tf.maximum(tf.reduce_sum(positive), 1.0)
    heat_loss = tf.reduce_sum((pos_loss + neg_loss) * care[..., None]) / num_pos
    at_centres = tf.gather_nd(pred[..., num_classes : num_classes + 4], index)  # [B, M, 4]
    offset_l1 = tf.reduce_sum(tf.abs(tf.sigmoid(at_centres[..., :2]) - offset_t), axis=-1)
    size_l1 = tf.reduce_sum(tf.abs(at_centres[..., 2:] - size_t), axis=-1)
    offset_loss = tf.reduce_sum(offset_l1 * positive) / num_pos
    size_loss = tf.reduce_sum(size_l1 * positive) / num_pos
    return heat_loss, offset_loss, size_loss


def make_detection_loss(input_hw, num_classes: int):
    """``loss(boxes, pred, valid=None)`` for the engine: the weighted sum of the three terms.

    ``valid`` (``[B]``, 0 for padding samples of a validation batch) drops
    samples by removing their boxes and their heat-map loss.
    """
    import tensorflow as tf

    def loss(boxes, pred, valid=None):
        boxes = tf.cast(boxes, tf.float32)
        if valid is not None:
            keep = tf.cast(valid, tf.float32)[:, None, None]
            boxes = boxes * keep + (keep - 1.0)  # padding samples: every row becomes class -1
            pred = tf.where(keep[..., None] > 0, pred, tf.fill(tf.shape(pred), -20.0))
        heat, off, size = detection_loss_terms(boxes, pred, input_hw, num_classes)
        return HEAT_WEIGHT * heat + OFFSET_WEIGHT * off + SIZE_WEIGHT * size

    return loss
