"""Batches of dataset records into arrays: features ``[N, H, W, C]`` and labels.

Raw features are turned into one ``[N, H, W, C]`` array with a single
``numpy.frombuffer`` over the joined records (no per-record numpy work).
Encoded features (PNG/JPEG/original bytes) are decoded with Pillow, one
image at a time, into a preallocated array. Boxes labels have a box count
per record and are padded to the batch's largest (:func:`pad_boxes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import DatasetError
from ..interfaces import records as rec
from ..interfaces.images import RecordError
from ..interfaces.labels import raw_prefix_size


@dataclass(frozen=True)
class RecordLayout:
    """What a dataset's records hold, as ``dataset.json`` declares it."""

    dataset_id: str
    feature_shape: tuple
    feature_dtype: str
    label_kind: str
    label_dtype: str
    label_shape: tuple


#: Class id of the rows that pad a batch of boxes labels (no box).
PAD_CLASS = -1.0


def pad_boxes(boxes: Sequence[np.ndarray], rows: int | None = None) -> np.ndarray:
    """Stack ``N_i×5`` boxes labels into one float32 ``[n, M, 5]`` array.

    ``M`` is ``rows`` or the largest ``N_i``; missing rows are filled with
    :data:`PAD_CLASS` (``-1``) in every column. Labels with more than
    ``rows`` boxes are cut to their first ``rows``.
    """
    width = max((len(b) for b in boxes), default=0) if rows is None else int(rows)
    out = np.full((len(boxes), width, 5), PAD_CLASS, np.float32)
    for i, b in enumerate(boxes):
        b = np.asarray(b, np.float32).reshape(-1, 5)[:width]
        out[i, : len(b)] = b
    return out


def empty_batch(layout: RecordLayout) -> tuple[np.ndarray, np.ndarray]:
    """A batch of no records, with the right shapes and dtypes."""
    features = np.zeros((0, *layout.feature_shape), dtype=layout.feature_dtype)
    lshape = (0, 5) if layout.label_kind == "boxes" else layout.label_shape
    return features, np.zeros((0, *lshape), dtype=layout.label_dtype)


def unpack_records(values: list[bytes], layout: RecordLayout, *, decode: bool = True) -> tuple[Any, np.ndarray]:
    """Unpack a batch of records into ``(features, labels)``.

    Args:
        values: The records' bytes.
        layout: The dataset's record layout.
        decode: Decode encoded images; with False, encoded features come back
            as a list of ``bytes`` (raw ones as an array).

    Raises:
        DatasetError: A record is corrupt (the message names the dataset).
    """
    if not values:
        return empty_batch(layout)
    if layout.label_kind == "boxes":
        return _unpack_boxes(values, layout, decode)
    n = len(values)
    fshape = layout.feature_shape
    fdtype = np.dtype(layout.feature_dtype).newbyteorder("<")
    ldtype = np.dtype(layout.label_dtype).newbyteorder("<")
    lshape = layout.label_shape
    fbytes = int(np.prod(fshape)) * fdtype.itemsize
    lbytes = int(np.prod(lshape)) * ldtype.itemsize if lshape else ldtype.itemsize
    prefix = raw_prefix_size(lshape) if layout.label_kind == "raw" else 0  # a raw label's ndim and dims
    raw_len = rec.HEADER_SIZE + fbytes + prefix + lbytes
    # Fast path: every record raw (encoding byte 0) and of the raw length -> one frombuffer.
    if set(map(len, values)) == {raw_len}:
        table = np.frombuffer(b"".join(values), dtype=np.uint8).reshape(n, raw_len)
        if not table[:, 4].any():
            features = table[:, rec.HEADER_SIZE : rec.HEADER_SIZE + fbytes].copy().view(fdtype)
            features = features.reshape((n, *fshape)).astype(fdtype.name, copy=False)
            labels = table[:, rec.HEADER_SIZE + fbytes + prefix :].copy().view(ldtype).reshape((n, *lshape))
            return features, labels.astype(ldtype.name, copy=False)
    labels = np.frombuffer(b"".join([v[len(v) - lbytes :] for v in values]), dtype=ldtype)
    labels = labels.reshape((n, *lshape)).astype(ldtype.name, copy=False)
    if not decode:
        features_list = []
        for v in values:
            feature, _ = rec.unpack_record(v, decode=False)
            features_list.append(feature)
        if all(isinstance(f, np.ndarray) for f in features_list):
            return np.stack(features_list), labels
        return features_list, labels
    features = np.empty((n, *fshape), dtype=fdtype.name)
    for i, v in enumerate(values):
        try:
            features[i], _ = rec.unpack_record(v, decode=True)
        except (RecordError, OSError, ValueError) as exc:
            raise DatasetError(f'Record of dataset "{layout.dataset_id}" is corrupt: {exc}') from exc
    return features, labels


def _unpack_boxes(values: list[bytes], layout: RecordLayout, decode: bool) -> tuple[Any, np.ndarray]:
    """Records with boxes labels: each label has its own box count; pad them to the batch's largest."""
    features_list, boxes = [], []
    for v in values:
        try:
            feature, label = rec.unpack_record(v, decode=decode)
        except (RecordError, OSError, ValueError) as exc:
            raise DatasetError(f'Record of dataset "{layout.dataset_id}" is corrupt: {exc}') from exc
        features_list.append(feature)
        boxes.append(label)
    labels = pad_boxes(boxes)
    if all(isinstance(f, np.ndarray) for f in features_list):
        return np.stack(features_list).astype(layout.feature_dtype, copy=False), labels
    return features_list, labels
