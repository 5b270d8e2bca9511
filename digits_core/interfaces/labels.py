"""Dataset labels: the declared label kinds and how each kind's label is checked and packed.

The label kind is **declared**, never read from an array's shape: by the
plugin (:attr:`digits_core.DataIngestion.label_kind`), by a
:class:`DeclaredLabel` (what the DIGITS 6 adapter returns), or, for a plugin
that declares nothing, from the label's *type* alone
(:func:`undeclared_kind`). An array that is none of the known kinds is
stored as a ``raw`` array with its shape. See ``docs/formats.md``.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

import numpy as np

from .images import RecordError

_INT64 = struct.Struct("<q")
#: dtype code -> numpy dtype (little-endian), as in :data:`.records.DTYPES`.
LABEL_DTYPES: tuple[str, ...] = ("uint8", "uint16", "int16", "float32", "int32", "int64", "float64")
#: Integer dtypes allowed for segmentation masks.
MASK_DTYPES = ("uint8", "uint16", "int16", "int32", "int64")
#: Float dtypes allowed for regression targets.
REGRESSION_DTYPES = ("float32", "float64")

CLASS, REGRESSION, MASK, BOXES, IMAGE, RAW_ARRAY, MULTILABEL = 0, 1, 2, 3, 4, 5, 6
#: Label kind code -> name (``Dataset.label_kind``).
LABEL_KINDS = ("class", "regression", "mask", "boxes", "image", "raw", "multilabel")
#: The names a plugin may declare as its label kind ("vector" is regression's other name).
DECLARED_KINDS = {**{name: code for code, name in enumerate(LABEL_KINDS)}, "vector": REGRESSION}
#: Columns of a boxes label: class id, x_min, y_min, x_max, y_max.
BOX_COLUMNS = 5


class DeclaredLabel(NamedTuple):
    """A label with its kind said beside it (what the DIGITS 6 adapter returns: DIGITS 6 plugins declare none).

    ``fallback`` is True when the kind is ``raw`` only because the layout
    matched no other kind (``digits plugin check`` warns about it).
    """

    label: Any
    kind: str
    fallback: bool = False


def declared(label: Any, kind: str | None) -> tuple[Any, str | None]:
    """Return ``(label, kind)``: a :class:`DeclaredLabel`'s own kind wins over the plugin's ``kind``."""
    if isinstance(label, DeclaredLabel):
        return label.label, label.kind
    return label, kind


def undeclared_kind(label: Any) -> str:
    """The kind of a label whose plugin declares none, from its type alone (never from its shape).

    An ``int`` is a class, a ``float`` or a 1-D float array a regression
    target, an integer ``H×W`` (or ``H×W×1``) array a mask (DIGITS Core 0.x
    plugins' masks); anything else is stored as a raw array with its shape.
    """
    if isinstance(label, (bool, np.bool_)):
        raise RecordError("label must be an int class, a float or float vector, or an H×W integer mask, not a bool")
    if isinstance(label, (int, np.integer)):
        return "class"
    if isinstance(label, (float, np.floating)):
        return "regression"
    if not isinstance(label, np.ndarray):
        raise RecordError(f"label must be an int, a float or a numpy array, not {type(label).__name__}")
    if label.ndim == 0:
        return "class" if label.dtype.kind in "iu" else "regression"
    if label.ndim == 1 and label.dtype.kind == "f":
        return "regression"
    if label.dtype.kind in "iu" and (label.ndim == 2 or (label.ndim == 3 and label.shape[2] == 1)):
        return "mask"
    return "raw"


def _kind_code(kind: str) -> int:
    code = DECLARED_KINDS.get(kind)
    if code is None:
        raise RecordError(f'label kind "{kind}" is not one of {", ".join(DECLARED_KINDS)}')
    return code


def _as_label(label: Any, feature_shape: tuple, kind: str | None = None) -> tuple[int, str, tuple, bytes]:
    """Return (kind, dtype, shape, payload) of ``label`` checked against its declared ``kind``."""
    label, kind = declared(label, kind)
    if isinstance(label, (bool, np.bool_)):
        raise RecordError("label must be an int class, a float or float vector, or an H×W integer mask, not a bool")
    code = _kind_code(kind if kind is not None else undeclared_kind(label))
    if isinstance(label, np.ndarray) and label.ndim == 0 and code in (CLASS, REGRESSION):
        label = label.item() if label.dtype.kind in "iu" else label[()]
    if not isinstance(label, (int, float, np.integer, np.floating, np.ndarray)):
        raise RecordError(f"label must be an int, a float or a numpy array, not {type(label).__name__}")
    return _ENCODERS[code](label, feature_shape)


def _contradicts(kind: str, label: Any, wanted: str) -> RecordError:
    shape = f"shape {label.shape} {label.dtype}" if isinstance(label, np.ndarray) else type(label).__name__
    return RecordError(f"label declared as {kind} must be {wanted}; got {shape}")


def _as_class(label: Any, feature_shape: tuple) -> tuple[int, str, tuple, bytes]:
    if isinstance(label, np.ndarray) and label.size == 1 and label.dtype.kind in "iu":
        label = label.item()
    if not isinstance(label, (int, np.integer)):
        raise _contradicts("class", label, "an int class index")
    if label < 0:
        raise RecordError(f"class index {label} is negative")
    try:
        return CLASS, "int64", (), _INT64.pack(int(label))
    except struct.error:
        raise RecordError(f"class index {label} does not fit in int64") from None


def _as_regression(label: Any, feature_shape: tuple) -> tuple[int, str, tuple, bytes]:
    if isinstance(label, (int, float, np.integer, np.floating)):
        dtype = "float32" if isinstance(label, np.float32) else "float64"
        return REGRESSION, dtype, (), np.asarray(label, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()
    if label.ndim != 1:
        raise _contradicts("regression", label, "a float or a 1-D float array")
    if label.dtype.name not in REGRESSION_DTYPES:
        raise RecordError(f"a 1-D label is a regression target and must be float32 or float64, not {label.dtype}")
    arr = np.ascontiguousarray(label, dtype=np.dtype(label.dtype.name).newbyteorder("<"))
    return REGRESSION, label.dtype.name, (int(arr.shape[0]),), arr.tobytes()


def _as_image(label: Any, feature_shape: tuple) -> tuple[int, str, tuple, bytes]:
    if not isinstance(label, np.ndarray) or label.ndim != 3 or label.dtype.kind != "f":
        raise _contradicts("image", label, "an H×W×C float array")
    if not np.isfinite(label).all():
        raise RecordError("image label has a NaN or infinite value")
    arr = np.ascontiguousarray(label, dtype=np.dtype("float32").newbyteorder("<"))
    return IMAGE, "float32", tuple(int(d) for d in arr.shape), arr.tobytes()


def _as_mask(label: Any, feature_shape: tuple) -> tuple[int, str, tuple, bytes]:
    if isinstance(label, np.ndarray) and label.ndim == 3 and label.shape[2] == 1:
        label = label[:, :, 0]
    if not isinstance(label, np.ndarray) or label.ndim != 2:
        raise _contradicts("mask", label, "an H×W integer array")
    if label.dtype.name not in MASK_DTYPES:
        raise RecordError(f"a mask label must be an integer array ({', '.join(MASK_DTYPES)}), not {label.dtype}")
    if label.dtype.kind == "i" and label.size and label.min() < 0:
        raise RecordError(f"mask has a negative class index ({label.min()})")
    if tuple(label.shape) != tuple(feature_shape[:2]):
        raise RecordError(f"mask shape {label.shape} differs from the feature's H×W {tuple(feature_shape[:2])}")
    arr = np.ascontiguousarray(label, dtype=np.dtype(label.dtype.name).newbyteorder("<"))
    return MASK, label.dtype.name, (int(arr.shape[0]), int(arr.shape[1])), arr.tobytes()


_RAW_DIM = struct.Struct("<I")


def _as_raw(label: Any, feature_shape: tuple) -> tuple[int, str, tuple, bytes]:
    """Any numeric array, stored with its shape: ``<u4`` ndim, ``<u4`` dims, then the little-endian bytes."""
    arr = np.asarray(label)
    if arr.dtype.kind == "b":
        arr = arr.astype(np.uint8)
    elif arr.dtype.name not in LABEL_DTYPES:
        arr = arr.astype(np.float64 if arr.dtype.kind == "f" else np.int64)
    arr = np.array(arr, dtype=np.dtype(arr.dtype.name).newbyteorder("<"), order="C")  # keeps a 0-d shape
    prefix = b"".join(_RAW_DIM.pack(int(d)) for d in (arr.ndim, *arr.shape))
    return RAW_ARRAY, arr.dtype.name, tuple(int(d) for d in arr.shape), prefix + arr.tobytes()


def raw_prefix_size(label_shape: tuple) -> int:
    """Bytes before a raw label's values: its ndim and dims, ``<u4`` each."""
    return _RAW_DIM.size * (1 + len(label_shape))


def _as_boxes(label: Any, feature_shape: tuple) -> tuple[int, str, tuple, bytes]:
    """A float32 ``N×5`` boxes label: finite, class ids whole and ``>= 0``, ``x_min <= x_max``, ``y_min <= y_max``."""
    if isinstance(label, np.ndarray) and label.size == 0:
        label = label.reshape(0, BOX_COLUMNS)
    if not isinstance(label, np.ndarray) or label.ndim != 2 or label.shape[1] != BOX_COLUMNS:
        raise _contradicts("boxes", label, f"an N×{BOX_COLUMNS} float array")
    label = label.astype(np.float32, copy=False)
    if not np.isfinite(label).all():
        raise RecordError("boxes label has a NaN or infinite value")
    classes = label[:, 0]
    if label.shape[0] and (classes.min() < 0 or not np.array_equal(classes, np.round(classes))):
        raise RecordError("boxes label: column 0 must hold whole class ids >= 0")
    if label.shape[0] and ((label[:, 3] < label[:, 1]).any() or (label[:, 4] < label[:, 2]).any()):
        raise RecordError("boxes label: every box needs x_min <= x_max and y_min <= y_max")
    arr = np.ascontiguousarray(label, dtype=np.dtype("float32").newbyteorder("<"))
    return BOXES, "float32", (int(arr.shape[0]), BOX_COLUMNS), arr.tobytes()


def _as_multilabel(label: Any, feature_shape: tuple) -> tuple[int, str, tuple, bytes]:
    """A multi-hot ``K``-vector (one 0/1 per class; any number of them 1), stored as ``uint8``."""
    if not isinstance(label, np.ndarray) or label.ndim != 1 or label.dtype.kind not in "biuf":
        raise _contradicts("multilabel", label, "a 1-D 0/1 array (one entry per class)")
    if label.size == 0:
        raise RecordError("multilabel label has no classes (a 1-D array of one 0/1 per class is needed)")
    if not np.isin(label, (0, 1)).all():
        raise RecordError("multilabel label must hold only 0 and 1 (one entry per class)")
    arr = np.ascontiguousarray(label, dtype=np.uint8)
    return MULTILABEL, "uint8", (int(arr.shape[0]),), arr.tobytes()


_ENCODERS = {
    CLASS: _as_class,
    REGRESSION: _as_regression,
    MASK: _as_mask,
    BOXES: _as_boxes,
    IMAGE: _as_image,
    RAW_ARRAY: _as_raw,
    MULTILABEL: _as_multilabel,
}
