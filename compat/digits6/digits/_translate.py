"""The DIGITS 6 → DIGITS Core translations, as plain functions (each unit-tested).

* :func:`feature_to_core`: a DIGITS 6 feature is ``C×H×W`` (Caffe's datum
  layout, e.g. ``image[np.newaxis, ...]``); DIGITS Core stores ``H×W×C``.
  Dtypes DIGITS Core stores as they are (``uint8``, ``uint16``, ``int16``,
  ``float32``) are kept; any other is stored as ``float32``, as DIGITS 6's
  datum did with every non-``uint8`` array.
* :func:`label_to_core`: the adapter declares the label kind DIGITS 6
  plugins never did: a ``1×1×N`` (or ``N×1×1``) label is a vector of N
  floats (``float32``, as DIGITS 6 stored it), an integer ``1×H×W`` label an
  ``H×W`` mask, a float ``C×H×W`` label an ``H×W×C`` image, a one-element
  integer array a class index, anything else a raw array.
* :func:`palette_to_core`: DIGITS 6 kept ``userdata['color_palette']`` as
  a flat PIL palette ``[r, g, b, r, g, b, ...]``; DIGITS Core reads a list
  of ``[r, g, b]``.
* :func:`view_input` / :func:`view_outputs`: views get a grayscale input as
  ``H×W`` (as DIGITS 6 passed it) and the network output as
  ``{name: array}``.
* :func:`form_class`: a form *instance* (what DIGITS 6 plugins return)
  becomes a form class DIGITS Core can bind, keeping what the plugin did to
  the instance (e.g. choices it appended).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

#: Feature dtypes DIGITS Core stores bit-exactly.
CORE_FEATURE_DTYPES = ("uint8", "uint16", "int16", "float32")
#: The key of a single-output network's output in the dict a DIGITS 6 view gets.
OUTPUT_NAME = "output"


def feature_to_core(feature: Any) -> np.ndarray:
    """Translate a DIGITS 6 ``C×H×W`` feature into DIGITS Core's ``H×W×C``.

    Raises:
        ValueError: The feature is neither ``C×H×W`` nor ``H×W``.
    """
    array = np.asarray(feature)
    if array.ndim == 3:
        array = np.transpose(array, (1, 2, 0))
    elif array.ndim != 2:
        raise ValueError(f"a DIGITS 6 feature is a C×H×W array; got shape {array.shape}")
    if array.dtype.name not in CORE_FEATURE_DTYPES:
        array = array.astype(np.float32)
    return np.ascontiguousarray(array)


def label_to_core(label: Any, feature_hw: tuple | None = None) -> Any:
    """Translate a DIGITS 6 label (scalar or ``C×H×W`` array) into a DIGITS Core label of a declared kind.

    DIGITS 6 plugins declare no label kind, so the adapter declares it
    (a :class:`~digits_core.interfaces.labels.DeclaredLabel`) from what
    DIGITS 6 did with each layout: a one-element integer array is a class,
    ``1×1×N`` (or ``N×1×1``) a vector, an integer ``1×H×W`` with the
    feature's ``H×W`` a mask, a float ``C×H×W`` (C > 1) with the feature's
    ``H×W`` an ``H×W×C`` image. Anything else (the bAbI plugin's
    ``1×story×sentence`` floats) is a raw array, stored with its DIGITS 6
    shape, never taken for boxes or a mask.

    Args:
        label: What the plugin's ``encode_entry`` returned as the label.
        feature_hw: The feature's ``(H, W)``; ``None`` when unknown.
    """
    from digits_core import DeclaredLabel

    if not isinstance(label, np.ndarray):
        return label
    if label.size == 1 and label.ndim <= 3 and label.dtype.kind in "biu":
        return int(label.reshape(()))
    if label.ndim == 3:
        channels, height, width = label.shape
        same_hw = feature_hw is None or (height, width) == tuple(feature_hw)
        if (channels == 1 and height == 1) or (height == 1 and width == 1):  # 1×1×N (or N×1×1): a vector
            return DeclaredLabel(label.reshape(-1).astype(np.float32), "regression")
        if channels == 1 and label.dtype.kind in "iu" and same_hw:
            return DeclaredLabel(np.ascontiguousarray(label[0]), "mask")
        if channels > 1 and label.dtype.kind == "f" and same_hw:
            return DeclaredLabel(np.ascontiguousarray(np.transpose(label, (1, 2, 0))), "image")
        return DeclaredLabel(_raw_dtype(label), "raw", fallback=True)
    if label.ndim == 1 and label.dtype.kind in "fiu":
        return DeclaredLabel(label.astype(np.float32), "regression")
    return DeclaredLabel(_raw_dtype(label), "raw", fallback=True)


def _raw_dtype(label: np.ndarray) -> np.ndarray:
    """A raw label's floats as ``float32``, as DIGITS 6's datum stored them (bAbI builds ``np.zeros``: float64)."""
    return label.astype(np.float32) if label.dtype.kind == "f" and label.dtype != np.float32 else label


def palette_to_core(palette: Any) -> Any:
    """Translate a flat DIGITS 6 (PIL) palette ``[r, g, b, r, g, b, ...]`` into ``[[r, g, b], ...]``.

    Anything else (already a list of triples, ``None``) is returned as it is.
    """
    if isinstance(palette, np.ndarray):
        palette = palette.tolist()
    if (
        isinstance(palette, (list, tuple))
        and palette
        and len(palette) % 3 == 0
        and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in palette)
    ):
        return [[int(v) for v in palette[i : i + 3]] for i in range(0, len(palette), 3)]
    return palette


def pairs_to_core(encoded: Any, declared_kind: str | None = None) -> Any:
    """Translate what a DIGITS 6 ``encode_entry`` returned: one ``(feature, label)`` pair or a list of them.

    When the plugin declares its ``label_kind`` itself, the label's layout is
    translated but its kind is the plugin's (the adapter declares none).
    """
    if isinstance(encoded, list):
        return [pairs_to_core(pair, declared_kind) for pair in encoded]
    feature, label = encoded
    feature = feature_to_core(feature)
    label = label_to_core(label, feature.shape[:2])
    return feature, (label.label if declared_kind is not None and hasattr(label, "kind") else label)


def view_input(input_data: Any) -> Any:
    """A view's input as DIGITS 6 passed it: ``H×W`` for one channel, else ``H×W×C``."""
    if isinstance(input_data, np.ndarray) and input_data.ndim == 3 and input_data.shape[2] == 1:
        return input_data[:, :, 0]
    return input_data


class Outputs(dict):
    """The network outputs of one sample, ``{name: array}``.

    ``keys()``, ``values()`` and ``items()`` return lists, as Python 2 dicts
    did, so DIGITS 6's ``output_data[output_data.keys()[0]]`` keeps working.
    """

    def keys(self):  # type: ignore[override]
        return list(super().keys())

    def values(self):  # type: ignore[override]
        return list(super().values())

    def items(self):  # type: ignore[override]
        return list(super().items())


def view_outputs(output_data: Any) -> Outputs:
    """The network output of one sample as DIGITS 6 views get it: ``{name: array}``."""
    if isinstance(output_data, dict):
        return Outputs(output_data)
    return Outputs({OUTPUT_NAME: np.asarray(output_data)})


def form_class(form: Any, factory: Callable[[], Any] | None = None) -> Any:
    """Return a form class for what a DIGITS 6 ``get_*_form`` returned.

    ``None`` and classes pass through. For an instance, the result is a
    subclass of its class whose construction calls ``factory`` (the plugin's
    own ``get_*_form``) for a fresh instance and binds the new data to it,
    so what the plugin did to its instance (choices appended to a select
    field, constructor arguments) survives every bind the core does.
    Without a factory, the instance's class is returned.
    """
    if form is None or isinstance(form, type):
        return form
    base = type(form)
    if factory is None:
        return base

    def __new__(cls, formdata=None, obj=None, prefix="", data=None, meta=None, **kwargs):
        fresh = factory()
        fresh.process(formdata, obj, data=data, **kwargs)
        return fresh

    return type(base)(
        base.__name__,
        (base,),
        {
            "__new__": __new__,
            "__module__": base.__module__,
            "__qualname__": base.__qualname__,
            "__doc__": base.__doc__,
        },
    )


def static_form_method(function: Callable[..., Any]) -> staticmethod:
    """Wrap a DIGITS 6 static ``get_*_form`` so it returns a form class (see :func:`form_class`)."""

    @functools.wraps(function)
    def get_form(*args, **kwargs):
        return form_class(function(*args, **kwargs), lambda: function(*args, **kwargs))

    return staticmethod(get_form)


def wrap_own_methods(cls: type, wrappers: dict[str, Callable[[Any], Any]], static_forms: tuple[str, ...] = ()) -> None:
    """Replace the methods ``cls`` defines itself (not inherited ones) by their translating wrappers.

    Args:
        cls: A DIGITS 6 plugin class being created.
        wrappers: Method name to a function taking the class attribute and returning its replacement.
        static_forms: Names of static ``get_*_form`` methods to wrap with :func:`static_form_method`.
    """
    own = cls.__dict__
    for name, wrap in wrappers.items():
        if name in own:
            setattr(cls, name, wrap(own[name]))
    for name in static_forms:
        if isinstance(own.get(name), staticmethod):
            setattr(cls, name, static_form_method(own[name].__func__))
