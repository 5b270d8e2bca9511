"""One dataset record: a feature and a label packed into bytes, and back.

A record is a fixed 32-byte little-endian header followed by the feature
payload and then the label payload (see ``docs/formats.md``)::

    offset size  field
    0      4     magic b"DGR1"
    4      1     feature encoding: 0 raw, 1 png, 2 jpg, 3 other (original file bytes Pillow decodes)
    5      1     feature dtype code (see DTYPES)
    6      1     label kind: 0 class, 1 regression, 2 mask, 3 boxes, 4 image, 5 raw
    7      1     label dtype code
    8      4     feature height H
    12     4     feature width W
    16     4     feature channels C
    20     4     feature payload length in bytes
    24     4     label dim 0 (regression length K, mask/image height, box count N, raw ndim; 0 for a scalar)
    28     4     label dim 1 (mask/image width, 5 for boxes; 0 otherwise)

Raw features are the ``H×W×C`` array's bytes in C order, little-endian.
Labels are stored raw, little-endian: a class as one int64, a regression
target as a float32/float64 scalar or vector, a mask as ``H×W`` integers,
boxes as an ``N×5`` float32 array ``(class_id, x_min, y_min, x_max, y_max)``
(N may be 0; the layout every record shares says ``(None, 5)``), an image
target (image-to-image) as an ``H×W×C`` float32 array (its channel count C is
the label payload length divided by ``H·W·4``), a raw array (any other
label) as its ndim and dims (``<u4`` each) followed by its bytes.

The label kind is **declared**, never read from an array's shape (see
:mod:`~digits_core.interfaces.labels`, whose names this module re-exports).

Encoded image features (:class:`EncodedImage`) and their decoding are
:mod:`~digits_core.interfaces.images`; this module imports no Pillow. The record format sits with the
plugin interfaces (below the dataset builder) because it is the data contract: ``digits plugin check`` runs a
plugin's entries through it without loading the job machinery.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .images import EncodedImage, RecordError, decode_image_bytes  # noqa: F401  (re-exported)
from .labels import (  # noqa: F401  (re-exported)
    _RAW_DIM,
    BOX_COLUMNS,
    BOXES,
    CLASS,
    DECLARED_KINDS,
    IMAGE,
    LABEL_KINDS,
    MASK,
    MASK_DTYPES,
    MULTILABEL,
    RAW_ARRAY,
    REGRESSION,
    REGRESSION_DTYPES,
    DeclaredLabel,
    _as_label,
    declared,
    raw_prefix_size,
    undeclared_kind,
)

MAGIC = b"DGR1"
HEADER = struct.Struct("<4sBBBBIIIIII")
HEADER_SIZE = HEADER.size  # 32

#: dtype code -> numpy dtype (little-endian). The code is stored in each record.
DTYPES: tuple[str, ...] = ("uint8", "uint16", "int16", "float32", "int32", "int64", "float64")
DTYPE_CODES = {name: code for code, name in enumerate(DTYPES)}
#: Feature dtypes the data contract allows.
FEATURE_DTYPES = ("uint8", "uint16", "int16", "float32")
_LITTLE_ENDIAN_FEATURES = {np.dtype(name).newbyteorder("<"): name for name in FEATURE_DTYPES}
RAW, PNG, JPG, OTHER = 0, 1, 2, 3
#: Feature encoding code -> name used in dataset.json.
ENCODINGS = ("none", "png", "jpg", "other")
ENCODING_CODES = {name: code for code, name in enumerate(ENCODINGS)}
ENCODING_CODES["jpeg"] = JPG


def _as_feature(feature: Any) -> tuple[int, Any, tuple, Any, np.ndarray | None]:
    """Return (encoding, dtype, shape, payload: bytes or a contiguous array, decoded array or None)."""
    if isinstance(feature, EncodedImage):
        enc = ENCODING_CODES.get(feature.format)
        if enc is None or enc == RAW:
            raise RecordError(f'EncodedImage.format must be png, jpg or other, not "{feature.format}"')
        if feature.dtype not in ("uint8", "uint16"):
            raise RecordError(f"EncodedImage.dtype must be uint8 or uint16, not {feature.dtype}")
        shape = tuple(int(s) for s in feature.shape)
        if len(shape) != 3 or shape[2] not in (1, 3) or min(shape) < 1:
            raise RecordError(f"EncodedImage.shape must be (H, W, 1) or (H, W, 3), not {feature.shape}")
        if not isinstance(feature.data, (bytes, bytearray, memoryview)) or len(feature.data) == 0:
            raise RecordError("EncodedImage.data must be non-empty bytes")
        return enc, feature.dtype, shape, bytes(feature.data), feature.array
    if not isinstance(feature, np.ndarray):
        raise RecordError(f"feature must be a numpy array or EncodedImage, not {type(feature).__name__}")
    arr = feature
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3:
        raise RecordError(f"feature must be H×W×C (or H×W), got shape {feature.shape}")
    if min(arr.shape) < 1:
        raise RecordError(f"feature has an empty dimension: shape {feature.shape}")
    name = _LITTLE_ENDIAN_FEATURES.get(arr.dtype)  # fast path: already little-endian
    if name is None:
        name = arr.dtype.name
        if name not in FEATURE_DTYPES:
            raise RecordError(f"feature dtype {arr.dtype} is not one of {', '.join(FEATURE_DTYPES)}")
        arr = arr.astype(np.dtype(name).newbyteorder("<"))  # same values, little-endian bytes
    return RAW, name, arr.shape, np.ascontiguousarray(arr), arr


class RecordMeta(NamedTuple):
    """What must agree between the records of one dataset (plus the encoding)."""

    encoding: int
    feature_dtype: str
    feature_shape: tuple
    label_kind: int
    label_dtype: str
    label_shape: tuple

    @property
    def layout(self) -> tuple:
        """Everything but the encoding: records of a dataset must share it."""
        return self[1:]


class PreparedRecord(NamedTuple):
    """A checked ``(feature, label)`` pair, ready to be written as one record (see :func:`prepare_record`)."""

    header: bytes
    payload: Any  # the feature: bytes, or a C-contiguous little-endian array (written without a copy of its own)
    label: bytes
    meta: RecordMeta
    pixels: np.ndarray | None

    @property
    def size(self) -> int:
        """The record's length in bytes."""
        return len(self.header) + memoryview(self.payload).nbytes + len(self.label)

    def write_into(self, buffer: memoryview, offset: int) -> int:
        """Write the record's bytes at ``buffer[offset:]`` (one copy of the feature); return its length."""
        end = offset + len(self.header)
        buffer[offset:end] = self.header
        payload = memoryview(self.payload).cast("B")
        buffer[end : end + payload.nbytes] = payload
        end += payload.nbytes
        buffer[end : end + len(self.label)] = self.label
        return end + len(self.label) - offset


def prepare_record(feature: Any, label: Any, kind: str | None = None) -> PreparedRecord:
    """Check one ``(feature, label)`` pair against the data contract, as :func:`pack_record`, without packing it.

    Args:
        feature: As for :func:`pack_record`.
        label: As for :func:`pack_record`.
        kind: The label kind the plugin declares (see :data:`DECLARED_KINDS`), or
            ``None`` for one that declares none (:func:`undeclared_kind`).

    Raises:
        RecordError: The pair breaks the contract.
    """
    enc, fdtype, fshape, fpayload, pixels = _as_feature(feature)
    if label is None:
        raise RecordError("label is None; a dataset record needs a label")
    code, ldtype, lshape, lpayload = _as_label(label, fshape, kind)
    dims = (len(lshape), 0) if code == RAW_ARRAY else tuple(lshape) + (0,) * (2 - len(lshape))
    header = HEADER.pack(
        MAGIC,
        enc,
        DTYPE_CODES[fdtype],
        code,
        DTYPE_CODES[ldtype],
        fshape[0],
        fshape[1],
        fshape[2],
        memoryview(fpayload).nbytes,
        dims[0],
        dims[1],
    )
    if code == BOXES:  # records differ in box count N; the layout they share is (None, 5)
        lshape = (None, BOX_COLUMNS)
    return PreparedRecord(header, fpayload, lpayload, RecordMeta(enc, fdtype, fshape, code, ldtype, lshape), pixels)


def pack_record(feature: Any, label: Any, kind: str | None = None) -> tuple[bytes, RecordMeta, np.ndarray | None]:
    """Check one ``(feature, label)`` pair against the data contract and pack it.

    Args:
        feature: ``H×W×C`` numpy array (uint8, uint16, int16, float32) or :class:`EncodedImage`.
        label: int class, float / 1-D float array, ``H×W`` integer mask,
            float32 ``N×5`` boxes, ``H×W×C`` float image, any array (raw), or
            a :class:`DeclaredLabel`.
        kind: The declared label kind (see :func:`prepare_record`).

    Returns:
        ``(record_bytes, meta, pixels)``: ``pixels`` is the decoded feature
        when known without decoding (for the mean image), else ``None``.

    Raises:
        RecordError: The pair breaks the contract.
    """
    prepared = prepare_record(feature, label, kind)
    data = b"".join((prepared.header, memoryview(prepared.payload).cast("B"), prepared.label))
    return data, prepared.meta, prepared.pixels


def parse_header(record: bytes) -> tuple:
    """Return the header fields ``(enc, fdtype, (H, W, C), flen, kind, ldtype, lshape)``.

    Raises:
        RecordError: The bytes are not a DIGITS record.
    """
    if len(record) < HEADER_SIZE:
        raise RecordError(f"record of {len(record)} bytes is shorter than the header")
    magic, enc, fcode, kind, lcode, h, w, c, flen, d0, d1 = HEADER.unpack_from(record)
    if magic != MAGIC:
        raise RecordError(f"not a DIGITS record (magic {magic!r})")
    lshape: tuple[int, ...] = (
        ()
        if kind == CLASS or (kind == REGRESSION and d0 == 0)
        else ((d0,) if kind in (REGRESSION, MULTILABEL) else (d0, d1))
    )
    if kind == IMAGE:
        lshape = (d0, d1, (len(record) - HEADER_SIZE - flen) // max(d0 * d1 * np.dtype(DTYPES[lcode]).itemsize, 1))
    elif kind == RAW_ARRAY:
        start = HEADER_SIZE + flen + _RAW_DIM.size
        lshape = struct.unpack_from(f"<{d0}I", record, start) if len(record) >= start + d0 * _RAW_DIM.size else ()
    return enc, DTYPES[fcode], (h, w, c), flen, kind, DTYPES[lcode], lshape


def unpack_record(record: bytes, *, decode: bool = True) -> tuple[Any, Any]:
    """Unpack one record into ``(feature, label)``.

    Args:
        record: Bytes made by :func:`pack_record`.
        decode: Decode encoded images; if False an encoded feature is
            returned as its bytes.

    Returns:
        ``(feature, label)``: the feature as ``H×W×C`` array (or bytes);
        the label as ``numpy.int64``, a float scalar/vector, an ``H×W`` array,
        an ``N×5`` float32 boxes array, an ``H×W×C`` image or a raw array.
    """
    enc, fdtype, fshape, flen, kind, ldtype, lshape = parse_header(record)
    start = HEADER_SIZE
    fbytes = record[start : start + flen]
    feature: Any
    if enc == RAW:
        feature = np.frombuffer(fbytes, dtype=np.dtype(fdtype).newbyteorder("<")).reshape(fshape).astype(fdtype)
    elif decode:
        feature = decode_image_bytes(fbytes, fshape, fdtype)
    else:
        feature = bytes(fbytes)
    if kind == RAW_ARRAY:
        start += raw_prefix_size(lshape)
    label = np.frombuffer(record[start + flen :], dtype=np.dtype(ldtype).newbyteorder("<")).astype(ldtype)
    label = label[0] if lshape == () else label.reshape(lshape)
    return feature, label


#: Class ids above this are not counted in label histograms.
MAX_HISTOGRAM_CLASSES = 65536


def label_histogram(label: Any, kind: int) -> np.ndarray | None:
    """Count class ids in a class label (one), a multilabel (each class it carries), a mask (pixels) or boxes
    (boxes); ``None`` for regression or huge ids."""
    if kind == CLASS:
        index = int(label)
        if index >= MAX_HISTOGRAM_CLASSES:
            return None
        counts = np.zeros(index + 1, np.int64)
        counts[index] = 1
        return counts
    if kind == MULTILABEL:  # images carrying each class
        return np.asarray(label).astype(np.int64)
    if kind in (MASK, BOXES):
        flat = np.asarray(label).ravel() if kind == MASK else np.asarray(label)[:, 0]
        if flat.size and int(flat.max()) >= MAX_HISTOGRAM_CLASSES:
            return None
        return np.bincount(flat.astype(np.int64, copy=False)) if flat.size else np.zeros(0, np.int64)
    return None


def add_histograms(total: np.ndarray | None, extra: np.ndarray | None) -> np.ndarray | None:
    """Return ``total + extra`` for histograms of different lengths (``None`` counts as empty)."""
    if extra is None:
        return total
    if total is None:
        return extra.astype(np.int64, copy=True)
    if len(extra) > len(total):
        total, extra = extra.astype(np.int64, copy=True), total
    total[: len(extra)] += extra
    return total


#: A feature with more channels than this and at most this many rows looks channels-first.
MAX_CHANNELS_LAST = 4


def channels_first_problem(shape: Sequence[int], plugin_id: str | None = None) -> str | None:
    """Return an error message if a feature ``shape`` looks channels-first, else ``None``.

    DIGITS 6 plugins returned ``C×H×W`` arrays (e.g. ``image[np.newaxis, ...]``
    → 1×32×32); DIGITS Core stores ``H×W×C``, so such a feature would become
    a 1-pixel-high image with 32 channels. A shape with ``C > 4`` and
    ``H <= 4`` is taken for that mistake.

    Args:
        shape: The feature's shape as returned by ``encode_entry``.
        plugin_id: Named in the message when given.
    """
    shape = tuple(int(s) for s in shape)
    if len(shape) != 3 or not (shape[2] > MAX_CHANNELS_LAST and shape[0] <= MAX_CHANNELS_LAST):
        return None
    who = f'Plugin "{plugin_id}"' if plugin_id else "The plugin"
    hwc = (shape[1], shape[2], shape[0])
    return (
        f"{who} returns features of shape {shape}, which looks channels-first (C×H×W, the DIGITS 6 "
        f"habit); DIGITS Core stores H×W×C. Transpose the array in encode_entry, e.g. "
        f"feature.transpose(1, 2, 0) → {hwc}."
    )
