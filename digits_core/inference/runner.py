"""``infer()``: run a trained model on inputs and build its results page.

::

    from digits_core import infer
    result = infer("20261202-120000-ab12", ["cat.png", "images/", "val.txt"])
    result.samples[0].top          # [{"index", "label", "probability"}, ...]
    result.metrics                 # top-1/top-5 accuracy, confusion matrix (labelled inputs)
    result.save_html("report.html")
    result.to_json()

Inputs go through the dataset's own image preparation (channels, resize
mode, dtype: :mod:`~digits_core.inference.imageio`) unless ``form_data``
is given: then the data plugin's inference form is validated and
``DataIngestion(is_inference_db=True, **dataset.userdata, **form_values)``
encodes the entries of its stage ``"test"`` (e.g. one Sunnybrook DICOM
file or a validation record, with its ground truth). The network then gets
the engine's preprocessing (mean, scale, centre crop) inside one compiled
function (:mod:`~digits_core.inference.model`).

Inputs are treated as datasets treat entries: an input that cannot be read
or encoded (an unreadable image, one broken DICOM file in a folder, a bad
label) is skipped and listed in :attr:`InferenceResult.errors` while the
others get results, unless more inputs fail than ``max_errors`` allows (a
count, a fraction or a percentage, default 5 %, as for datasets): then
:class:`~digits_core.errors.InferenceError` names the first failures.

The view runs lazily, the first time the HTML or JSON is asked for, so an
API call that only needs predictions pays for the network alone.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from ..errors import DigitsError, FormValidationError, InferenceError
from ..interfaces import DataIngestion
from .imageio import prepare_image, read_image, read_mask
from .inputs import InputItem, collect_inputs
from .metrics import classification_metrics, top_n_batch
from .model import InferenceModel, load_inference_model

logger = logging.getLogger("digits_core.inference")
DEFAULT_TOP_N = 5


@dataclass
class InferenceSample:
    """One input and what the network made of it.

    Attributes:
        input_id: The input's name.
        input_data: The raw feature the network saw (centre-cropped like
            the network input), in the dataset's dtype.
        output: The network's output for it (numpy).
        ground_truth: The known label (class index, ``H×W`` mask, numbers) or ``None``.
        top: For classification, the top-N ``[{index, label, probability}]``.
        detections: For detection, ``[{class, class_id, score, box}]`` in the *input image's*
            pixels, best first (see :mod:`digits_core.inference.detection`).
    """

    input_id: str
    input_data: np.ndarray
    output: np.ndarray
    ground_truth: Any = None
    top: list | None = None
    detections: list | None = None

    def to_dict(self) -> dict:
        """JSON-friendly summary (no arrays except small outputs)."""
        data: dict[str, Any] = {"input_id": self.input_id}
        if self.top is not None:
            data["top"] = self.top
        elif self.detections is not None:
            data["detections"] = self.detections
        elif self.output.size <= 64:
            data["output"] = self.output.tolist()
        else:
            data["output_shape"] = list(self.output.shape)
        truth = self.ground_truth
        if truth is not None:
            data["ground_truth"] = truth.tolist() if isinstance(truth, np.ndarray) and truth.size <= 64 else (
                "mask" if isinstance(truth, np.ndarray) else truth)
        return data


@dataclass
class InferenceResult:
    """What :func:`infer` returns.

    Attributes:
        model: The :class:`~digits_core.inference.model.InferenceModel` used.
        samples: One :class:`InferenceSample` per input, in input order.
        metrics: Classification figures over the labelled inputs (see
            :func:`~digits_core.inference.metrics.classification_metrics`), or ``None``.
        view_id: The view that renders the results (``None``: no view for this task).
        view_config: The validated view options.
        errors: The inputs that were skipped, as ``{"input": name, "error": message}``.
        notes: One-line messages from the data plugin after inference (e.g.
            where a PACS source stored the results; see
            :meth:`~digits_core.interfaces.DataIngestion.finish_inference`).
    """

    model: InferenceModel
    samples: list[InferenceSample]
    metrics: dict | None = None
    view_id: str | None = None
    view_config: dict = field(default_factory=dict)
    errors: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _rendered: Any = field(default=None, repr=False)

    @property
    def outputs(self) -> np.ndarray:
        """All outputs stacked ``[N, ...]``."""
        return np.stack([s.output for s in self.samples]) if self.samples else np.zeros((0,))

    def run_view(self):
        """Create the view and process every sample (once); return ``(view, processed)``.

        Raises:
            InferenceError: No view for this model's task and none chosen.
            PluginError: The view failed.
        """
        if self._rendered is None:
            if not self.view_id:
                raise InferenceError(f'No view renders "{self.model.task}" models by default; choose one with '
                                     "--view (see `digits plugins`).")
            from ..plugin_registry import registry
            from .report import run_view

            from ..contract import create_view

            view_class = registry.get_view(self.view_id)
            view = create_view(view_class, self.model.dataset, self.view_config)
            processed = run_view(view, ((s.input_id, s.input_data, s.output, s.ground_truth) for s in self.samples))
            self._rendered = (view, processed)
        return self._rendered

    def page_info(self) -> dict:
        """The key/value pairs listed under the page title."""
        info = {"Model": f"{self.model.job.name} ({self.model.id})", "Epoch": self.model.epoch,
                "Task": self.model.task, "Inputs": len(self.samples)}
        if self.model.dataset.id:
            info["Dataset"] = self.model.dataset.id
        if self.metrics:
            info["Top-1 accuracy"] = f"{self.metrics['top1_accuracy'] * 100:.2f}%"
        if self.errors:
            first = self.errors[0]
            info["Skipped inputs"] = (f"{len(self.errors)} (first: {first['input']}: {first['error']})"
                                      + ("; see the JSON output for all" if len(self.errors) > 1 else ""))
        return info

    def to_html(self, title: str | None = None) -> str:
        """Render the self-contained HTML results page."""
        from .report import render_html

        view, processed = self.run_view()
        return render_html(view, processed, title=title or f"Inference: {self.model.job.name or self.model.id}",
                           info=self.page_info())

    def save_html(self, path: str | os.PathLike, title: str | None = None) -> Path:
        """Write :meth:`to_html` to ``path`` (atomically) and return the path."""
        path = Path(path)
        text = self.to_html(title)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
        return path

    def to_json(self, *, include_images: bool = False, include_view: bool = True) -> dict:
        """Return the results as JSON-serializable data.

        Args:
            include_images: Keep the view's PNG data URIs.
            include_view: Run the view and add its per-sample data and header/summary contexts.
        """
        from .report import report_json, to_jsonable

        data: dict[str, Any] = {
            "model": self.model.describe(),
            "samples": [s.to_dict() for s in self.samples],
            "metrics": self.metrics,
            "view": self.view_id,
            "errors": list(self.errors),
            "notes": list(self.notes),
        }
        if include_view and self.view_id:
            view, processed = self.run_view()
            report = report_json(view, processed, include_images=include_images)
            for sample, view_sample in zip(data["samples"], report["samples"]):
                sample["view"] = view_sample["data"]
            data["view_header"] = report["header"]
            data["view_summary"] = report["summary"]
        return to_jsonable(data, include_images=True)


def _resolve_label(model: InferenceModel, item: InputItem, height: int, width: int):
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
            raise InferenceError(f"{where}: not a class index or one of the classes ({', '.join(labels[:20])}).") from None
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


class _Budget:
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
        logger.warning("skipped input %s: %s", name, message)

    def check(self, good: int) -> None:
        if not self.errors:
            return
        if len(self.errors) > self.allowed or good == 0:
            shown = "; ".join(f"{e['input']}: {e['error']}" for e in self.errors[:3])
            more = f" (and {len(self.errors) - 3} more)" if len(self.errors) > 3 else ""
            raise InferenceError(
                f"{len(self.errors)} of {self.total} inputs failed, more than max-errors allows ({self.allowed}): "
                f"{shown}{more}. Fix or remove them, or raise --max-errors.")


def _target_image(model: InferenceModel, item: InputItem, label, where: str) -> np.ndarray:
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


def _read_items(model: InferenceModel, items: list[InputItem], budget: _Budget) -> tuple[list[str], np.ndarray, list]:
    shape, dtype = model.feature_shape, model.feature_dtype
    ids, features, labels = [], [], []
    for item in items:
        try:
            image = item.array if item.array is not None else read_image(item.path)
            if image.ndim == 2:
                image = image[:, :, None]
            if image.shape != shape or image.dtype != dtype:
                image = prepare_image(image, shape, dtype.name, model.dataset.resize_mode)
            label = _resolve_label(model, item, shape[0], shape[1])
        except Exception as exc:  # noqa: BLE001 - one bad input is skipped and reported
            budget.skip(item.input_id, exc)
            continue
        features.append(image)
        ids.append(item.input_id)
        labels.append(label)
    budget.check(len(ids))
    return ids, _stack(features, shape, dtype), labels


def _stack(features: list, shape, dtype) -> np.ndarray:
    return np.stack(features) if features else np.empty((0, *shape), dtype=dtype)


def _encode_with_plugin(model: InferenceModel, form_data: dict,
                        max_errors: Any = None) -> tuple[list[str], np.ndarray, list, list, DataIngestion, dict]:
    from ..contract import inference_form, plugin_code, strip_reserved
    from ..forms import validate_values
    from ..plugin_registry import registry

    plugin_id = model.dataset.plugin_id
    if not plugin_id:
        raise InferenceError(f'The dataset of model "{model.id}" is not available, so its data plugin\'s '
                             "inference form cannot be used; give image files instead.")
    plugin = registry.get_data_ingestion(plugin_id)
    userdata = strip_reserved("data", model.dataset.userdata, plugin_id)
    form = inference_form(plugin, userdata)
    if form is None:
        raise InferenceError(f'Data plugin "{plugin_id}" has no inference form; give image files, a folder '
                             "or a list file instead.")
    values = validate_values(form, form_data, f'inference form of plugin "{plugin_id}"')
    with plugin_code(plugin_id, "__init__"):
        instance = plugin(is_inference_db=True, **{**userdata, **values})
    try:
        entries = list(instance.itemize_entries("test"))
    except Exception as exc:  # noqa: BLE001 - report the plugin's own message
        if isinstance(exc, DigitsError):
            raise
        raise InferenceError(f'Data plugin "{plugin_id}" could not list the inference inputs: {exc}') from exc
    if not entries:
        raise InferenceError(f'Data plugin "{plugin_id}" found no inference inputs for {values}.')
    budget = _Budget(max_errors, len(entries))
    ids, features, labels = [], [], []
    sizes: dict[str, tuple] = {}  # input id -> (H, W) before resizing
    shape, dtype = model.feature_shape, model.feature_dtype
    for entry in entries:
        name = str(entry)
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
                prepared.append((feature, label))
        except Exception as exc:  # noqa: BLE001 - one bad entry is skipped and reported
            budget.skip(name, exc)
            continue
        for k, (feature, label) in enumerate(prepared):
            ids.append(name if len(prepared) == 1 else f"{name}#{k}")
            features.append(feature)
            labels.append(label)
    budget.check(len(ids))
    return ids, _stack(features, shape, dtype), labels, budget.errors, instance, sizes


def _finish_inference(instance: DataIngestion | None, plugin_id: str, samples: list) -> list[str]:
    """Let the data plugin act on the results (:meth:`DataIngestion.finish_inference`); return its notes."""
    if instance is None:
        return []
    from ..contract import plugin_code

    with plugin_code(plugin_id, "finish_inference"):
        message = instance.finish_inference(samples)
    return [str(message)] if message else []


_validated_configs: dict[tuple, dict] = {}


def _view_config(view_id: str | None, config: dict | None) -> dict:
    """Validate view options with the view's config form (memoized per view class and options)."""
    from ..plugin_registry import registry

    try:
        key = (registry.get_view(view_id) if view_id else None, tuple(sorted((config or {}).items())))
        hash(key)
    except TypeError:
        return _validate_view_config(view_id, config)
    except Exception:  # noqa: BLE001 - unknown view: let validation raise the proper error
        return _validate_view_config(view_id, config)
    if key not in _validated_configs:
        if len(_validated_configs) > 256:
            _validated_configs.clear()
        _validated_configs[key] = _validate_view_config(view_id, config)
    return dict(_validated_configs[key])


def _validate_view_config(view_id: str | None, config: dict | None) -> dict:
    if not view_id:
        if config:
            raise InferenceError("View options were given but no view renders this model; choose one with --view.")
        return {}
    from ..forms import validate_values
    from ..plugin_registry import registry

    from ..contract import config_form

    view_class = registry.get_view(view_id)
    form = config_form(view_class)
    if form is None:
        if config:
            raise FormValidationError({k: ["this view has no options"] for k in config}, f'options of view "{view_id}"')
        return {}
    return validate_values(form, config or {}, f'options of view "{view_id}"')


def infer(model_id, inputs: Iterable[Any] = (), *, epoch: float | None = None, view_id: str | None = None,
          view_config: dict | None = None, form_data: dict | None = None, jobs_dir=None,
          top_n_classes: int | None = None, batch_size: int = 64,
          progress: Callable[[int, int], None] | None = None, max_errors: Any = None) -> InferenceResult:
    """Run a trained model on inputs.

    Args:
        model_id: Model job id (or unique prefix, or job folder).
        inputs: Image files, folders, list files (``path [label]`` per
            line), numpy arrays, or ``(input_id, array[, label])`` tuples.
        epoch: Snapshot epoch, a number (``1.5`` for a mid-epoch snapshot; default: the last).
        view_id: View plugin rendering the results (default: the bundled view
            of the model's task).
        view_config: View options (validated by the view's config form).
        form_data: Values of the data plugin's inference form, used instead of
            ``inputs`` (e.g. ``{"dicom_file": "IM-0001-0048.dcm"}``).
        jobs_dir: The jobs folder.
        top_n_classes: How many classes ``samples[i].top`` lists (classification); default:
            the view's ``top_n`` option when it has one, else 5.
        batch_size: Largest batch per network call.
        progress: Called as ``progress(done, total)`` after each batch.
        max_errors: Inputs that may fail (be skipped and listed in
            ``result.errors``) before inference fails: a count (``10``), a
            fraction (``0.05``) or a percentage (``"5%"``); default 5 %.

    Returns:
        An :class:`InferenceResult`.

    Raises:
        JobNotFoundError: No such model.
        InferenceError: Bad inputs (missing file, no snapshot), or more
            unreadable inputs than ``max_errors`` allows.
        FormValidationError: Bad view options or inference form values.
        PluginNotFoundError: Unknown view or data plugin.
    """
    model = load_inference_model(model_id, epoch=epoch, jobs_dir=jobs_dir)
    view_id = view_id or model.default_view()
    config = _view_config(view_id, view_config)
    inputs = list(inputs)
    if form_data:
        if inputs:
            raise InferenceError("Give either input files or the data plugin's inference form fields, not both.")
        ids, features, labels, errors, instance, sizes = _encode_with_plugin(model, form_data, max_errors)
    else:
        instance = None
        if not inputs:
            raise InferenceError("No inputs: give image files, folders or list files.")
        items = collect_inputs(inputs)
        budget = _Budget(max_errors, len(items))
        ids, features, labels = _read_items(model, items, budget)
        errors = budget.errors
        sizes = {}
        if model.task == "detection":
            from .detection import source_size

            sizes = {item.input_id: source_size(item) for item in items}
    outputs = []
    for start in range(0, len(features), batch_size):
        outputs.append(model.predict(features[start:start + batch_size], batch_size))
        if progress:
            progress(min(start + batch_size, len(features)), len(features))
    outputs = np.concatenate(outputs) if len(outputs) > 1 else outputs[0]
    samples = []
    classification = model.task == "classification"
    if top_n_classes is None:
        top_n_classes = int(config.get("top_n") or DEFAULT_TOP_N)
    tops = top_n_batch(outputs, top_n_classes, model.class_labels) if classification else [None] * len(ids)
    for i, input_id in enumerate(ids):
        truth = model.crop_label(labels[i])
        samples.append(InferenceSample(input_id, model.network_input(features[i]), outputs[i], truth, tops[i]))
    if model.task == "detection":
        from .detection import DEFAULT_SCORE_THRESHOLD, to_detections

        threshold = float(config.get("score_threshold", DEFAULT_SCORE_THRESHOLD))
        for sample in samples:
            sample.detections = to_detections(sample.output, model.feature_shape[:2], sizes.get(sample.input_id),
                                              model.dataset.resize_mode, model.class_labels, threshold)
    metrics = None
    labelled = [i for i, s in enumerate(samples) if s.ground_truth is not None]
    if classification and labelled:
        metrics = classification_metrics(outputs[labelled], [int(np.asarray(samples[i].ground_truth).reshape(-1)[0]) for i in labelled],
                                         model.class_labels)
    notes = _finish_inference(instance, model.dataset.plugin_id, samples)
    return InferenceResult(model, samples, metrics, view_id, config, errors, notes)
