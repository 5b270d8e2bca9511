"""Detection engine pieces with real TensorFlow: targets ↔ decoding, boxes moved by augmentation, the loss."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.slow

BOXES = np.array([[[1, 4, 8, 20, 30], [2, 30, 2, 60, 14], [0, 40, 40, 60, 60], [-1, -1, -1, -1, -1]]], np.float32)


def _perfect_map(boxes, hw=(64, 64), stride=4, classes=3):
    """The output map a perfect detector would give for ``boxes`` (from the engine's own targets)."""
    import tensorflow as tf

    from digits_core.engine.detection.loss import encode_targets

    h, w = hw[0] // stride, hw[1] // stride
    heat, care, index, offset, log_size, positive = (
        np.asarray(t) for t in encode_targets(boxes, (h, w), (stride, stride), classes)
    )
    out = np.full((1, h, w, classes + 4), -12.0, np.float32)
    out[..., :classes] = np.where(heat >= 1.0 - 1e-6, 12.0, -12.0)
    for m in np.nonzero(positive[0])[0]:
        _, r, c = index[0, m]
        off = np.clip(offset[0, m], 1e-4, 1 - 1e-4)
        out[0, r, c, classes : classes + 2] = np.log(off / (1 - off))
        out[0, r, c, classes + 2 :] = log_size[0, m]
    return tf.constant(out), care


def test_decoding_a_perfect_map_gives_back_the_boxes():
    from digits_core.engine.detection.decode import decode_detections

    pred, care = _perfect_map(BOXES)
    boxes, scores, classes = (np.asarray(t) for t in decode_detections(pred, (64, 64), 3, k=5))
    found = scores[0] > 0.5
    assert found.sum() == 2  # the two objects; dontcare and padding are never decoded
    got = sorted(zip(classes[0][found].tolist(), boxes[0][found].round(3).tolist()))
    assert got == [(1, [4.0, 8.0, 20.0, 30.0]), (2, [30.0, 2.0, 60.0, 14.0])]
    assert care[0, 12, 12] == 0 and care[0, 2, 2] == 1  # the dontcare region is left out of the heat loss


def test_loss_is_lower_for_the_perfect_map_and_ignores_padding_samples():
    import tensorflow as tf

    from digits_core.engine.detection.loss import make_detection_loss

    loss = make_detection_loss((64, 64), 3)
    perfect, _ = _perfect_map(BOXES)
    noise = tf.random.stateless_normal(perfect.shape, seed=[1, 2])
    assert float(loss(BOXES, perfect)) < 0.05 < float(loss(BOXES, noise))
    both_boxes = np.concatenate([BOXES, BOXES])
    both_pred = tf.concat([perfect, noise], axis=0)
    # a padding sample (valid 0) of a validation batch must not count
    assert float(loss(both_boxes, both_pred, tf.constant([1.0, 0.0]))) == pytest.approx(
        float(loss(BOXES, perfect)), abs=1e-5
    )


def test_augmentation_moves_boxes_with_the_pixels():
    import tensorflow as tf

    from digits_core.engine.augmentation import augment_batch
    from digits_core.engine.options import Augmentation

    n = 16
    images = np.zeros((n, 64, 64, 1), np.float32)
    images[:, 10:30, 20:44] = 1.0  # one bright box per image
    labels = np.tile(np.array([[[1, 20, 10, 44, 30], [-1, -1, -1, -1, -1]]], np.float32), (n, 1, 1))
    aug = Augmentation(flip="both", scale=0.3)
    out, moved = augment_batch(
        tf.constant(images),
        tf.constant(labels),
        tf.constant([3, 4], tf.int64),
        aug,
        out_hw=(64, 64),
        is_mask=False,
        random_crop=False,
        is_boxes=True,
    )
    out, moved = np.asarray(out), np.asarray(moved)
    assert not np.allclose(moved[:, 0], labels[:, 0])  # something moved
    for i in range(n):
        assert (moved[i, 1] == -1).all()  # padding stays padding
        ys, xs = np.nonzero(out[i, :, :, 0] > 0.5)
        if moved[i, 0, 0] < 0:  # the box left the image: so did its pixels' centre
            continue
        x1, y1, x2, y2 = moved[i, 0, 1:]
        assert abs(xs.min() - x1) <= 1.0 and abs(xs.max() + 1 - x2) <= 1.0
        assert abs(ys.min() - y1) <= 1.0 and abs(ys.max() + 1 - y2) <= 1.0
