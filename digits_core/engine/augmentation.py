"""On-the-fly augmentation and cropping, as batched TensorFlow ops for tf.data.

All randomness is *stateless*, drawn from a per-batch seed that the pipeline
derives from ``(run seed, epoch, batch index)``, so a run is reproducible
and a resumed run sees exactly the batches an uninterrupted run would.

Geometry (random crop, flips, rot90, rotation, zoom) is one projective
transform per sample, applied to the image with bilinear sampling and to
the mask (segmentation) with nearest-neighbour sampling, both with the same
matrix and the same ``REFLECT`` fill, so masks stay aligned with images and
keep integer class ids. Photometric changes (noise, contrast, brightness,
hue, saturation) touch images only.
"""

from __future__ import annotations

import math

from ..errors import FormValidationError
from .options import Augmentation


def check_augmentation(aug: Augmentation, input_hw: tuple[int, int], channels: int) -> None:
    """Reject augmentations that cannot apply to this input (rot90 on non-square, hue on grey)."""
    errors = {}
    if aug.rot90 and input_hw[0] != input_hw[1]:
        errors["aug_rot90"] = [f"needs square inputs (got {input_hw[0]}x{input_hw[1]}); set crop_size"]
    if (aug.hue or aug.saturation) and channels != 3:
        errors["aug_hue" if aug.hue else "aug_saturation"] = [f"needs RGB images (dataset has {channels} channel(s))"]
    if errors:
        raise FormValidationError(errors, "training options")


def _needs_geometry(aug: Augmentation, crop: bool) -> bool:
    return crop or aug.flip != "none" or aug.rot90 or aug.rotation > 0 or aug.scale > 0


def augment_batch(  # noqa: C901 - split pending (the complexity ratchet in pyproject.toml)
    images,
    labels,
    seed,
    aug: Augmentation,
    *,
    out_hw,
    is_mask: bool,
    random_crop: bool,
    is_boxes: bool = False,
):
    """Augment one batch.

    Args:
        images: ``[N, H, W, C]`` float32, already normalized (mean-subtracted and scaled).
        labels: Labels; ``[N, H, W]`` integer masks when ``is_mask``.
        seed: int32/int64 tensor of shape ``[2]`` (stateless seed for this batch).
        aug: The augmentation settings.
        out_hw: Output ``(h, w)`` (the crop size, or the input size).
        is_mask: Transform ``labels`` with the images.
        random_crop: Pick a random crop window (else the centre one).
        is_boxes: ``labels`` are ``[N, M, 5]`` boxes (detection): they move with the image
            (:func:`digits_core.engine.detection.augment.move_boxes`), the fill is constant
            (reflections would show unlabelled objects), and with ``scale`` the window also
            shifts at random within the zoom's slack (a random crop at a random scale).

    Returns:
        ``(images, labels)`` of the output size.
    """
    import tensorflow as tf

    seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), num=10)
    n = tf.shape(images)[0]
    h_in = tf.cast(tf.shape(images)[1], tf.float32)
    w_in = tf.cast(tf.shape(images)[2], tf.float32)
    oh, ow = int(out_hw[0]), int(out_hw[1])

    if _needs_geometry(aug, random_crop or (images.shape[1] != oh or images.shape[2] != ow)):
        if random_crop:
            u = tf.random.stateless_uniform([n, 2], seeds[0])
            top = tf.floor(u[:, 0] * (h_in - oh + 1))
            left = tf.floor(u[:, 1] * (w_in - ow + 1))
        else:
            top = tf.fill([n], tf.floor((h_in - oh) / 2))
            left = tf.fill([n], tf.floor((w_in - ow) / 2))
        cy_in = top + (oh - 1) / 2.0
        cx_in = left + (ow - 1) / 2.0
        zoom = tf.ones([n])
        if aug.scale > 0:
            zoom = tf.random.stateless_uniform([n], seeds[5], 1.0 - aug.scale, 1.0 + aug.scale)
        if is_boxes and aug.scale > 0:
            shift = tf.random.stateless_uniform(
                [n, 2], tf.random.experimental.stateless_fold_in(seeds[5], 1), -1.0, 1.0
            )
            cx_in += shift[:, 0] * tf.abs(w_in - ow / zoom) / 2.0
            cy_in += shift[:, 1] * tf.abs(h_in - oh / zoom) / 2.0
        angle = tf.zeros([n])
        if aug.rot90:
            k = tf.floor(tf.random.stateless_uniform([n], seeds[1]) * 4.0)
            angle += k * (math.pi / 2)
        if aug.rotation > 0:
            angle += tf.random.stateless_uniform([n], seeds[2], -1.0, 1.0) * (aug.rotation * math.pi / 180.0)
        fx = tf.ones([n])
        fy = tf.ones([n])
        if aug.flip in ("horizontal", "both"):
            fx = tf.where(tf.random.stateless_uniform([n], seeds[3]) < 0.5, -1.0, 1.0)
        if aug.flip in ("vertical", "both"):
            fy = tf.where(tf.random.stateless_uniform([n], seeds[4]) < 0.5, -1.0, 1.0)
        cos, sin = tf.cos(angle) / zoom, tf.sin(angle) / zoom
        # input = c_in + R(angle) * diag(fx, fy) * (output - c_out) / zoom
        a0, a1 = cos * fx, -sin * fy
        b0, b1 = sin * fx, cos * fy
        cx_out, cy_out = (ow - 1) / 2.0, (oh - 1) / 2.0
        a2 = cx_in - a0 * cx_out - a1 * cy_out
        b2 = cy_in - b0 * cx_out - b1 * cy_out
        zeros = tf.zeros([n])
        transforms = tf.stack([a0, a1, a2, b0, b1, b2, zeros, zeros], axis=1)
        images = tf.raw_ops.ImageProjectiveTransformV3(
            images=images,
            transforms=transforms,
            output_shape=tf.constant([oh, ow]),
            fill_value=0.0,
            interpolation="BILINEAR",
            fill_mode="CONSTANT" if is_boxes else "REFLECT",
        )
        if is_boxes:
            from .detection.augment import move_boxes

            labels = move_boxes(labels, transforms, (oh, ow))
        if is_mask:
            masks = tf.cast(labels, tf.float32)[..., None]
            masks = tf.raw_ops.ImageProjectiveTransformV3(
                images=masks,
                transforms=transforms,
                output_shape=tf.constant([oh, ow]),
                fill_value=0.0,
                interpolation="NEAREST",
                fill_mode="REFLECT",
            )
            labels = tf.cast(tf.round(masks[..., 0]), labels.dtype)

    if aug.hue > 0 or aug.saturation > 0:
        # colour ops in [0, 1] space around the batch's value range
        lo = tf.reduce_min(images, axis=[1, 2, 3], keepdims=True)
        hi = tf.reduce_max(images, axis=[1, 2, 3], keepdims=True)
        span = tf.maximum(hi - lo, 1e-6)
        hsv = tf.image.rgb_to_hsv((images - lo) / span)
        hue, sat, val = hsv[..., 0], hsv[..., 1], hsv[..., 2]
        if aug.hue > 0:
            delta = tf.random.stateless_uniform([n, 1, 1], seeds[6], -aug.hue, aug.hue)
            hue = tf.math.floormod(hue + delta, 1.0)
        if aug.saturation > 0:
            factor = tf.random.stateless_uniform([n, 1, 1], seeds[7], 1 - aug.saturation, 1 + aug.saturation)
            sat = tf.clip_by_value(sat * factor, 0.0, 1.0)
        images = tf.image.hsv_to_rgb(tf.stack([hue, sat, val], axis=-1)) * span + lo
    if aug.contrast > 0:
        factor = tf.random.stateless_uniform([n, 1, 1, 1], seeds[8], 1 - aug.contrast, 1 + aug.contrast)
        mean = tf.reduce_mean(images, axis=[1, 2, 3], keepdims=True)
        images = (images - mean) * factor + mean
    if aug.brightness > 0:
        images = images + tf.random.stateless_uniform([n, 1, 1, 1], seeds[9], -aug.brightness, aug.brightness)
    if aug.noise > 0:
        noise_seed = tf.random.experimental.stateless_fold_in(seeds[9], 1)
        images = images + tf.random.stateless_normal(tf.shape(images), noise_seed, stddev=aug.noise)
    return images, labels
