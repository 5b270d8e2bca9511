"""The dataset's image preparation as TensorFlow ops, for exported models.

:func:`tf_prepare` takes raw images ``[N, h, w, C_in]`` of any size and
gives exactly what :func:`digits_core.resize.prepare_array` gives (channels,
the dataset's resize mode, cast), so an exported model sees the pixels
``digits infer`` feeds the network:

* **channels**: 4 → 3 drops the 4th; RGB → gray with Pillow's integer
  weights (``(19595 R + 38470 G + 7471 B + 32768) >> 16``) for uint8,
  ``0.299/0.587/0.114`` rounded half to even otherwise; gray → RGB repeats
  (uint16 becomes ``>> 8`` first);
* **resize**: Pillow's bilinear filter (the triangle filter widened by the
  scale when shrinking, i.e. antialiased), rebuilt as two matrix products,
  horizontal pass first: uint8 with Pillow's 22-bit fixed-point
  coefficients and its rounding after each pass, other dtypes in float64
  stored as float32 after each pass, then rounded half to even and clipped;
* **geometry**: :func:`digits_core.resize.resize_plan` (intermediate size,
  centre crop, padding; sizes and offsets rounded half away from zero);
* **padding** (``fill``, ``half_crop``): a constant, :data:`PAD_VALUES`
  (mid-grey), not DIGITS's random noise: an export must be deterministic,
  and ``digits infer`` pads with the same value (see
  :func:`digits_core.resize.pad_value`).

The arithmetic is float64 (exact for the uint8 fixed-point sums), shape
logic int32; no Python control flow depends on the image size, so one
traced graph serves every size. TFLite has no float64 kernels: with
``float_type=tf.float32`` the same graph runs in float32 (the fixed-point
sums split in two exact halves, combined in int32), which matches up to
float32 rounding of the coefficients and of the resize geometry (measured in
``tests/test_export_preprocessing.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..resize import pad_value

#: Pillow's fixed-point precision of 8-bit resampling coefficients.
_PRECISION_BITS = 22


def _round_half_away(value: Any) -> Any:
    import tensorflow as tf

    return tf.cast(tf.sign(value) * tf.floor(tf.abs(value) + 0.5), tf.int32)


def _bilinear_matrix(in_size: Any, out_size: Any, fixed_point: bool, ft: Any) -> Any:
    """``[out, in]`` weights (float type ``ft``) of Pillow's bilinear resampling along one axis."""
    import tensorflow as tf

    n_in = tf.cast(in_size, ft)
    scale = n_in / tf.cast(out_size, ft)
    filterscale = tf.maximum(scale, 1.0)
    support = filterscale  # the bilinear filter's support is 1
    center = (tf.cast(tf.range(out_size), ft) + 0.5) * scale
    xmin = tf.maximum(tf.floor(center - support + 0.5), 0.0)
    xmax = tf.minimum(tf.floor(center + support + 0.5), n_in)
    j = tf.cast(tf.range(in_size), ft)[None, :]
    distance = tf.abs((j - center[:, None] + 0.5) * (1.0 / filterscale))
    weights = tf.where(distance < 1.0, 1.0 - distance, tf.zeros_like(distance))
    weights = tf.where((j >= xmin[:, None]) & (j < xmax[:, None]), weights, tf.zeros_like(weights))
    total = tf.reduce_sum(weights, axis=1, keepdims=True)
    weights = tf.math.divide_no_nan(weights, total)
    if fixed_point:
        # Two exact power-of-two steps: a float16 TFLite export stores constants in float16 (2^22 would overflow).
        weights = tf.floor(0.5 + (weights * 2048.0) * float(1 << (_PRECISION_BITS - 11)))
    return weights


def _fixed_point_pass(x: Any, weights: Any, equation: str) -> Any:
    """One 8-bit pass: Pillow's clip8 of ``(sum + 2^21) >> 22``, exact in float32 too."""
    import tensorflow as tf

    half, one = 1 << (_PRECISION_BITS - 1), 1 << _PRECISION_BITS
    if x.dtype == tf.float64:  # every sum is an integer below 2^53: exact
        total = tf.einsum(equation, x, weights)
        return tf.clip_by_value(tf.floor((total + float(half)) / float(one)), 0.0, 255.0)
    high = tf.floor(weights / 2048.0)  # weights < 2^23: two 11-bit halves whose sums float32 holds exactly
    low = weights - high * 2048.0
    total = (
        tf.cast(tf.einsum(equation, x, high), tf.int32) * 2048 + tf.cast(tf.einsum(equation, x, low), tf.int32) + half
    )
    return tf.cast(tf.clip_by_value(tf.math.floordiv(total, one), 0, 255), x.dtype)


def _resize(x: Any, height: Any, width: Any, integer8: bool) -> Any:
    """Pillow's ``resize(..., BILINEAR)`` of a float ``[N, h, w, C]`` batch: horizontal pass, then vertical."""
    import tensorflow as tf

    size = tf.shape(x)
    wx = _bilinear_matrix(size[2], width, integer8, x.dtype)
    wy = _bilinear_matrix(size[1], height, integer8, x.dtype)
    if integer8:
        return _fixed_point_pass(_fixed_point_pass(x, wx, "nyxc,jx->nyjc"), wy, "nyjc,iy->nijc")

    def stored(values):  # Pillow "F" images store float32 after each pass
        return tf.cast(tf.cast(values, tf.float32), x.dtype)

    return stored(tf.einsum("nyjc,iy->nijc", stored(tf.einsum("nyxc,jx->nyjc", x, wx)), wy))


def tf_resize_plan(src_h: Any, src_w: Any, height: int, width: int, mode: str, ft: Any = None) -> tuple:
    """:func:`digits_core.resize.resize_plan` on int32 tensors: ``(resize_h, resize_w, crop_y, crop_x, pad_y, pad_x)``."""
    import tensorflow as tf

    ft = ft or tf.float64
    zero = tf.constant(0, tf.int32)
    h_t, w_t = tf.constant(height, tf.int32), tf.constant(width, tf.int32)
    if mode == "squash":
        return h_t, w_t, zero, zero, zero, zero
    sh, sw = tf.cast(src_h, ft), tf.cast(src_w, ft)
    wr, hr = sw / width, sh / height
    wide = wr > hr
    plain = tf.equal(wr, hr) | (tf.equal(src_h, height) & tf.equal(src_w, width))

    def even_up(size, target):  # bump by one pixel so the padding splits evenly
        return size + tf.math.floormod(target - size, 2)

    if mode == "crop":
        rh = tf.where(wide, h_t, _round_half_away(sh / wr))
        rw = tf.where(wide, _round_half_away(sw / hr), w_t)
        crop_y = tf.where(wide, zero, _round_half_away(tf.cast(rh - height, ft) / 2.0))
        crop_x = tf.where(wide, _round_half_away(tf.cast(rw - width, ft) / 2.0), zero)
        pad_y = pad_x = zero
    else:
        if mode == "fill":
            rh = tf.where(wide, even_up(_round_half_away(sh / wr), h_t), h_t)
            rw = tf.where(wide, w_t, even_up(_round_half_away(sw / hr), w_t))
            crop_y = crop_x = zero
        else:  # half_crop
            ratio = (wr + hr) / 2.0
            rw0, rh0 = _round_half_away(sw / ratio), _round_half_away(sh / ratio)
            rh = tf.where(wide, even_up(rh0, h_t), rh0)
            rw = tf.where(wide, rw0, even_up(rw0, w_t))
            crop_x = tf.where(wide, _round_half_away(tf.cast(rw - width, ft) / 2.0), zero)
            crop_y = tf.where(wide, zero, _round_half_away(tf.cast(rh - height, ft) / 2.0))
        pad_y = tf.where(wide, tf.maximum(zero, tf.math.floordiv(h_t - rh, 2)), zero)
        pad_x = tf.where(wide, zero, tf.maximum(zero, tf.math.floordiv(w_t - rw, 2)))
    pick = lambda value, default: tf.where(plain, default, value)  # noqa: E731
    return (pick(rh, h_t), pick(rw, w_t), pick(crop_y, zero), pick(crop_x, zero), pick(pad_y, zero), pick(pad_x, zero))


def _to_gray(x: Any, dtype: np.dtype) -> Any:
    import tensorflow as tf

    r, g, b = x[..., 0:1], x[..., 1:2], x[..., 2:3]
    if dtype == np.uint8:  # Pillow's convert("L")
        return tf.floor((r * 19595.0 + g * 38470.0 + b * 7471.0 + 32768.0) / 256.0 / 256.0)
    gray = r * 0.299 + g * 0.587 + b * 0.114
    return _cast_values(gray, dtype)


def _cast_values(x: Any, dtype: np.dtype) -> Any:
    """:func:`digits_core.resize.cast_to`'s values (still float): integers rounded half to even and clipped."""
    import tensorflow as tf

    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return tf.clip_by_value(tf.round(x), float(info.min), float(info.max))
    return tf.cast(tf.cast(x, tf.as_dtype(dtype)), x.dtype)


def _convert_channels(x: Any, channels_in: int, channels: int, dtype: np.dtype) -> tuple[Any, np.dtype]:
    """:func:`digits_core.resize.convert_channels` for a static channel count; returns the values and their dtype."""
    import tensorflow as tf

    if channels_in == 4 and channels != 4:
        x, channels_in = x[..., :3], 3
    if channels_in == channels:
        return x, dtype
    if channels == 1 and channels_in == 3:
        return _to_gray(x, dtype), dtype
    if channels == 3 and channels_in == 1:
        if dtype == np.uint16:
            x, dtype = tf.floor(x / 256.0), np.dtype(np.uint8)
        return tf.concat([x, x, x], axis=-1), dtype
    raise ValueError(f"cannot convert images with {channels_in} channels to {channels} channels")


def tf_prepare(
    images: Any,
    shape: tuple,
    dtype: Any,
    resize_mode: str = "squash",
    channels_in: int | None = None,
    float_type: Any = None,
) -> Any:
    """Raw images ``[N, h, w, channels_in]`` → ``[N, H, W, C]`` float32 holding the dataset dtype's values.

    Args:
        images: A batch of raw images of one size (any numeric dtype holding the dataset dtype's values).
        shape: The dataset's feature shape ``(H, W, C)``.
        dtype: The dataset's feature dtype.
        resize_mode: ``squash``, ``crop``, ``fill`` or ``half_crop``.
        channels_in: The input's channel count (default: the static last dimension of ``images``).
        float_type: ``tf.float64`` (default, exact) or ``tf.float32`` (for TFLite).

    Returns:
        What ``digits infer`` would feed the network (before mean, scale and crop), as float32.
    """
    import tensorflow as tf

    height, width, channels = (int(v) for v in shape)
    dtype = np.dtype(dtype)
    channels_in = int(channels_in or images.shape[-1])
    ft = float_type or tf.float64
    x = tf.cast(images, ft)
    x, work_dtype = _convert_channels(x, channels_in, channels, dtype)
    size = tf.shape(x)
    rh, rw, crop_y, crop_x, pad_y, pad_x = tf_resize_plan(size[1], size[2], height, width, resize_mode, ft)
    integer8 = work_dtype == np.uint8
    resized = _resize(x, rh, rw, integer8)
    if not integer8 and np.issubdtype(work_dtype, np.integer):
        resized = _cast_values(resized, work_dtype)
    resized = resized[:, crop_y : crop_y + height, crop_x : crop_x + width, :]
    padded = tf.pad(
        resized, [[0, 0], [pad_y, pad_y], [pad_x, pad_x], [0, 0]], constant_values=float(pad_value(work_dtype))
    )
    # An image already at the dataset size passes unchanged: its resize matrices are the identity.
    out = _cast_values(padded, dtype)
    return tf.reshape(tf.cast(out, tf.float32), [-1, height, width, channels])  # static shape; TFLite lacks EnsureShape
