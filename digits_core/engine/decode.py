"""Encoded records (PNG, JPEG, pass-through file bytes) decoded inside TensorFlow, in batches.

Used by the input pipeline (:mod:`~digits_core.engine.pipeline`): a
preloaded stage is decoded once by :func:`decode_all` (one parallel tf.data
pass), a streamed one per batch by :func:`make_batch_decoder`. 16-bit PNGs
decode to uint16; the channel count comes from the dataset's feature shape.
TensorFlow is imported inside the functions.
"""

from __future__ import annotations

import numpy as np

AUTOTUNE = -1

#: Encoding names (``dataset.json`` ``stages.<s>.encodings``) of encoded features.
ENCODED_KINDS = ("png", "jpg", "other")


def stage_encodings(reader, stage: str) -> frozenset | None:
    """The encodings of an encoded stage the pipeline decodes in TensorFlow, or ``None``.

    ``None`` (reader decodes) for raw stages, readers without
    ``feature_encodings``, stages mixing raw and encoded records, and
    dtypes PNG/JPEG cannot hold.
    """
    counts = getattr(reader, "feature_encodings", None)
    if counts is None:
        return None
    kinds = {k for k, v in counts(stage).items() if v}
    if not kinds or not kinds <= set(ENCODED_KINDS):
        return None
    if np.dtype(reader.feature_dtype()) not in (np.uint8, np.uint16):
        return None
    return frozenset(kinds)


def make_decoder(feature_shape: tuple, feature_dtype, kinds):
    """Return a TensorFlow function decoding one encoded image (scalar string) to ``feature_shape``.

    uint16 features decode with ``tf.io.decode_png(dtype=tf.uint16)``; uint8
    ones with ``decode_png`` (PNG-only stages), ``decode_jpeg`` (JPEG-only;
    ``dct_method="INTEGER_ACCURATE"``, the IDCT Pillow uses) or, for mixed
    or other formats, ``decode_jpeg`` for JPEG bytes and ``decode_image``
    for the rest, with ``channels`` = the
    feature shape's C, so gray stays gray and RGB stays RGB. The result is
    checked against the shape (a record that decodes to another shape
    fails the pipeline with InvalidArgumentError).
    """
    import tensorflow as tf

    shape = tuple(int(d) for d in feature_shape)
    channels = shape[2]
    kinds = frozenset(kinds)

    def decode_jpeg(data):
        # INTEGER_ACCURATE = libjpeg's ISLOW IDCT, Pillow's choice; TF's default (IFAST) differs by a few levels.
        return tf.io.decode_jpeg(data, channels=channels, dct_method="INTEGER_ACCURATE")

    if np.dtype(feature_dtype) == np.uint16:

        def raw_decode(data):
            return tf.io.decode_png(data, channels=channels, dtype=tf.uint16)
    elif kinds == {"png"}:

        def raw_decode(data):
            return tf.io.decode_png(data, channels=channels)
    elif kinds == {"jpg"}:

        def raw_decode(data):
            return decode_jpeg(data)
    else:

        def raw_decode(data):
            return tf.cond(
                tf.strings.substr(data, 0, 3) == b"\xff\xd8\xff",
                lambda: decode_jpeg(data),
                lambda: tf.io.decode_image(data, channels=channels, dtype=tf.uint8, expand_animations=False),
            )

    def decode(data):
        return tf.ensure_shape(raw_decode(data), shape)

    return decode


def make_batch_decoder(feature_shape: tuple, feature_dtype, kinds):
    """Like :func:`make_decoder` for a ``[N]`` string batch -> ``[N, H, W, C]`` (a graph loop, no Python)."""
    import tensorflow as tf

    decode = make_decoder(feature_shape, feature_dtype, kinds)
    spec = tf.TensorSpec(tuple(feature_shape), tf.as_dtype(np.dtype(feature_dtype)))

    def decode_batch(data):
        return tf.map_fn(decode, data, fn_output_signature=spec, parallel_iterations=16)

    return decode_batch


def bytes_array(items) -> np.ndarray:
    """A 1-D object array of ``bytes`` (numpy ``S`` arrays would drop trailing NUL bytes)."""
    out = np.empty(len(items), dtype=object)
    out[:] = list(items)
    return out


def decode_all(encoded, feature_shape: tuple, feature_dtype, kinds, chunk: int = 1024) -> np.ndarray:
    """Decode a list of encoded images with one parallel tf.data pass; return ``[N, H, W, C]``."""
    import tensorflow as tf

    n = len(encoded)
    out = np.empty((n, *feature_shape), dtype=np.dtype(feature_dtype))
    if n == 0:
        return out
    decode = make_decoder(feature_shape, feature_dtype, kinds)
    ds = (
        tf.data.Dataset.from_tensor_slices(bytes_array(encoded))
        .map(decode, num_parallel_calls=AUTOTUNE, deterministic=True)
        .batch(chunk)
        .prefetch(2)
    )
    pos = 0
    for batch in ds.as_numpy_iterator():
        out[pos : pos + len(batch)] = batch
        pos += len(batch)
    return out
