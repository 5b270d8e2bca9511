"""Inputs into network-ready arrays for :func:`~digits_core.inference.infer`.

Files and arrays go through the dataset's own image preparation (channels,
resize mode, dtype: :mod:`~digits_core.inference.imageio`); with
``form_data``, the data plugin's inference form is validated and the plugin
encodes the entries of its stage ``"test"``. Labels given with the inputs are
turned into what the task compares against. An input that cannot be read or
encoded is skipped and counted against ``max_errors`` (:class:`Budget`, the
rule datasets use).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DigitsError, InferenceError
from ..interfaces import DataIngestion
from ..interfaces.labels import declared
from ..limits import REQUEST_PIXELS, InputTooLargeError
from ..plugins.registry import inference_plugin
from .imageio import prepare_image, read_image, read_mask
from .inputs import InputItem
from .model import InferenceModel

logger = logging.getLogger("digits_core.inference")


def resolve_label(model: InferenceModel, item: InputItem, height: int, width: int) -> Any:
    label = item.label
    if label is None:
        return None
    where = f"label {label!r} of {item.input_id}"
    if model.task == "classification":
        if isinstance(label, (int, np.integer)):
            return int(label)
        text = str(label).strip()
        labels = [str(c) for c in (model.class_labels or [])]
        if text in labels:
            return labels.index(text)
        try:
            index = int(text)
        except ValueError:
            raise InferenceError(
                f"{where}: not a class index or one of the classes ({', '.join(labels[:20])})."
            ) from None
        if labels and not 0 <= index < len(labels):
            raise InferenceError(f"{where}: class index out of range 0..{len(labels) - 1}.")
        return index
    if model.task == "segmentation":
        if isinstance(label, np.ndarray):
            return label
        mask_path = Path(str(label)).expanduser()
        if not mask_path.is_absolute() and item.base is not None:
            mask_path = item.base / mask_path
        if not mask_path.is_file():
            raise InferenceError(f"{where}: mask file {mask_path} does not exist.")
        return read_mask(mask_path, height, width, model.dataset.color_palette)
    if model.task == "image-to-image":
        return _target_image(model, item, label, where)
    if model.task == "detection":
        from .detection import ground_truth_boxes

        return ground_truth_boxes(model, item, label, where)
    try:
        values = [float(v) for v in str(label).replace(",", " ").split()] if isinstance(label, str) else label
    except ValueError:
        raise InferenceError(f"{where}: not a number.") from None
    return np.asarray(values, dtype=np.float32)


class Budget:
    """Skipped inputs and the ``max_errors`` rule (the one datasets use)."""

    def __init__(self, max_errors: Any, total: int):
        from ..datasets.options import allowed_errors, parse_max_errors

        try:
            self.allowed = allowed_errors(parse_max_errors(max_errors), total)
        except DigitsError as exc:
            raise InferenceError(str(exc).replace("max_errors", "max-errors", 1)) from None
        self.total = total
        self.errors: list[dict] = []

    def skip(self, name: str, exc: BaseException) -> None:
        message = str(exc) if isinstance(exc, DigitsError) else f"{type(exc).__name__}: {exc}"
        self.errors.append({"input": name, "error": message})
        logger.debug("skipped input %s: %s", name, message)  # reported once, by the caller (result.errors)

    def check(self, good: int) -> None:
        if not self.errors:
            return
        if len(self.errors) > self.allowed or good == 0:
            shown = "; ".join(f"{e['input']}: {e['error']}" for e in self.errors[:3])
            more = f" (and {len(self.errors) - 3} more)" if len(self.errors) > 3 else ""
            raise InferenceError(
                f"{len(self.errors)} of {self.total} inputs failed, more than max-errors allows ({self.allowed}): "
                f"{shown}{more}. Fix or remove them, or raise --max-errors."
            )


def _target_image(model: InferenceModel, item: InputItem, label: Any, where: str) -> np.ndarray:
    """An image-to-image target: an array as given, or an image file prepared like the inputs, scaled to [0, 1]."""
    if isinstance(label, np.ndarray):
        return label.astype(np.float32)
    path = Path(str(label)).expanduser()
    if not path.is_absolute() and item.base is not None:
        path = item.base / path
    if not path.is_file():
        raise InferenceError(f"{where}: target image {path} does not exist.")
    image = read_image(path)
    if image.ndim == 2:
        image = image[:, :, None]
    shape, dtype = model.feature_shape, model.feature_dtype
    if image.shape != shape or image.dtype != dtype:
        image = prepare_image(image, shape, dtype.name, model.dataset.resize_mode)
    top = 65535.0 if image.dtype == np.uint16 else 255.0
    return image.astype(np.float32) / top


def ready_batch(model: InferenceModel, inputs: Any) -> np.ndarray | None:
    """The inputs as one network-ready array, when they already are the model's raw images; else ``None``.

    A ``[N, H, W, C]`` array, or a list of ``[H, W, C]`` arrays, of the
    dataset's image shape and dtype needs no reading, preparing or checking
    image by image: it goes to the network as it is (the warm path of a
    caller that batches its own images). Anything else (files, other sizes
    or dtypes, labelled tuples) returns ``None`` and takes :func:`read_items`.
    """
    shape, dtype = model.feature_shape, model.feature_dtype
    if isinstance(inputs, np.ndarray):
        return inputs if inputs.ndim == len(shape) + 1 and inputs.shape[1:] == shape and inputs.dtype == dtype else None
    if not isinstance(inputs, (list, tuple)) or not inputs:
        return None
    if not all(type(given) is np.ndarray and given.dtype == dtype and given.shape == shape for given in inputs):
        return None
    if len(inputs) == 1:
        return inputs[0][None]  # a view, no copy
    # Equal shapes checked above, so joining along rows and splitting back is np.stack at half its cost.
    return np.concatenate(inputs).reshape(len(inputs), *shape)


def read_items(model: InferenceModel, items: list[InputItem], budget: Budget) -> tuple[list[str], np.ndarray, list]:
    shape, dtype = model.feature_shape, model.feature_dtype
    ids, features, labels = [], [], []
    for item in items:
        try:
            if item.array is not None:
                image = item.array
            elif item.path is not None:
                image = read_image(item.path, item.input_id)
            else:
                raise InferenceError(f"input {item.input_id} has neither a file nor an array.")
            if image.ndim == 2:
                image = image[:, :, None]
            if image.shape != shape or image.dtype != dtype:
                image = prepare_image(image, shape, dtype.name, model.dataset.resize_mode)
            label = resolve_label(model, item, shape[0], shape[1])
        except InputTooLargeError as exc:
            if exc.limit is REQUEST_PIXELS:  # the request as a whole is too big: no later input can fit either
                raise
            budget.skip(item.input_id, exc)
            continue
        except Exception as exc:  # noqa: BLE001 - one bad input is skipped and reported
            budget.skip(item.input_id, exc)
            continue
        features.append(image)
        ids.append(item.input_id)
        labels.append(label)
    budget.check(len(ids))
    return ids, _stack(features, shape, dtype), labels


def _stack(features: list, shape: tuple, dtype: Any) -> np.ndarray:
    return np.stack(features) if features else np.empty((0, *shape), dtype=dtype)


def entry_name(entry: Any) -> str:
    """How results name a data plugin's entry: its own ``str()``, or for a bare tuple its file and the rest.

    ``("dicoms/mr.dcm", 3, None)`` reads ``dicoms/mr.dcm (3)``; a named tuple names its fields
    (``dicoms/mr.dcm (frame 3)``); empty parts are left out.
    """
    if not isinstance(entry, tuple) or type(entry).__str__ is not tuple.__str__:
        return str(entry)
    fields = getattr(entry, "_fields", None) or [None] * len(entry)
    parts = [(field, value) for field, value in zip(fields, entry) if value is not None and value != ""]
    head = next((i for i, (_, value) in enumerate(parts) if isinstance(value, (str, Path))), None)
    if head is None:
        return ", ".join(str(value) for _, value in parts)
    rest = [f"{field} {value}" if field else str(value) for i, (field, value) in enumerate(parts) if i != head]
    return str(parts[head][1]) + (f" ({', '.join(rest)})" if rest else "")


def encode_with_plugin(
    model: InferenceModel, form_data: dict, max_errors: Any = None
) -> tuple[list[str], np.ndarray, list, list, DataIngestion, dict]:
    plugin_id = model.dataset.plugin_id
    if not plugin_id:
        raise InferenceError(
            f'The dataset of model "{model.id}" is not available, so its data plugin\'s '
            "inference form cannot be used; give image files instead."
        )
    instance, values = inference_plugin(plugin_id, model.dataset.userdata, form_data)
    try:
        entries = list(instance.itemize_entries("test"))
    except Exception as exc:  # noqa: BLE001 - report the plugin's own message
        if isinstance(exc, DigitsError):
            raise
        raise InferenceError(f'Data plugin "{plugin_id}" could not list the inference inputs: {exc}') from exc
    if not entries:
        raise InferenceError(f'Data plugin "{plugin_id}" found no inference inputs for {values}.')
    budget = Budget(max_errors, len(entries))
    ids, features, labels = [], [], []
    sizes: dict[str, tuple] = {}  # input id -> (H, W) before resizing
    shape, dtype = model.feature_shape, model.feature_dtype
    for entry in entries:
        name = entry_name(entry)
        try:
            encoded = instance.encode_entry(entry)
            pairs = encoded if isinstance(encoded, list) else [encoded]
            prepared = []
            for feature, label in pairs:
                feature = np.asarray(feature)
                if feature.ndim == 2:
                    feature = feature[:, :, None]
                sizes[name] = feature.shape[:2]  # before resizing: detection maps boxes back to it
                if feature.shape != shape or feature.dtype != dtype:
                    feature = prepare_image(feature, shape, dtype.name, model.dataset.resize_mode)
                prepared.append((feature, declared(label, None)[0]))  # the ground truth, kind or not
        except Exception as exc:  # noqa: BLE001 - one bad entry is skipped and reported
            budget.skip(name, exc)
            continue
        for k, (feature, label) in enumerate(prepared):
            ids.append(name if len(prepared) == 1 else f"{name}#{k}")
            features.append(feature)
            labels.append(label)
    budget.check(len(ids))
    return ids, _stack(features, shape, dtype), labels, budget.errors, instance, sizes
