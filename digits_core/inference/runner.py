"""``infer()``: run a trained model on inputs and build its results page.

::

    from digits_core.inference import infer
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

This module runs the network and assembles the result; reading and encoding
the inputs is :mod:`~digits_core.inference.reading`, the result and its
rendering :mod:`~digits_core.inference.result`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..errors import FormValidationError, InferenceError
from ..interfaces import DataIngestion
from .inputs import collect_inputs
from .metrics import BatchTopN, classification_metrics
from .model import load_inference_model
from .reading import Budget, encode_with_plugin, read_items, ready_batch
from .result import InferenceResult, InferenceSample, SampleList

__all__ = ["DEFAULT_TOP_N", "InferenceResult", "InferenceSample", "SampleList", "infer"]

DEFAULT_TOP_N = 5


def _run_network(
    model: Any, features: np.ndarray, batch_size: int, progress: Callable[[int, int], None] | None
) -> np.ndarray:
    """The network's outputs for ``features``, ``batch_size`` at a time (one call when there is no progress to report)."""
    if not progress or not len(features):
        return model.predict(features, batch_size)
    batches = []
    for start in range(0, len(features), batch_size):
        batches.append(model.predict(features[start : start + batch_size], batch_size))
        progress(min(start + batch_size, len(features)), len(features))
    return np.concatenate(batches) if len(batches) > 1 else batches[0]


def _finish_inference(instance: DataIngestion | None, plugin_id: str | None, samples: list) -> list[str]:
    """Let the data plugin act on the results (:meth:`DataIngestion.finish_inference`); return its notes."""
    if instance is None:
        return []
    from ..plugins.contract import plugin_code

    with plugin_code(plugin_id or type(instance).__name__, "finish_inference"):
        message = instance.finish_inference(samples)
    return [str(message)] if message else []


_validated_configs: dict[tuple, dict] = {}


def _view_config(view_id: str | None, config: dict | None) -> dict:
    """Validate view options with the view's config form (memoized per view class and options)."""
    from ..plugins.registry import registry

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
    from ..plugins.contract import config_form
    from ..plugins.registry import registry

    view_class = registry.get_view(view_id)
    form = config_form(view_class)
    if form is None:
        if config:
            raise FormValidationError({k: ["this view has no options"] for k in config}, f'options of view "{view_id}"')
        return {}
    return validate_values(form, config or {}, f'options of view "{view_id}"')


def infer(
    model_id: Any,
    inputs: Iterable[Any] = (),
    *,
    epoch: float | None = None,
    view_id: str | None = None,
    view_config: dict | None = None,
    form_data: dict | None = None,
    jobs_dir: Any = None,
    top_n_classes: int | None = None,
    batch_size: int = 64,
    progress: Callable[[int, int], None] | None = None,
    max_errors: Any = None,
) -> InferenceResult:
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
    batch = None if form_data else ready_batch(model, inputs)
    inputs = list(inputs) if batch is None else []
    instance = None
    errors: list[dict] = []
    sizes: dict = {}
    labels: list | None
    if form_data:
        if inputs:
            raise InferenceError("Give either input files or the data plugin's inference form fields, not both.")
        ids, features, labels, errors, instance, sizes = encode_with_plugin(model, form_data, max_errors)
    elif batch is not None:  # the caller's own batch of ready images: nothing to read or check per image
        ids, features, labels = [f"array-{i}" for i in range(len(batch))], batch, None
        if model.task == "detection":
            sizes = dict.fromkeys(ids, batch.shape[1:3])
    else:
        if not inputs:
            raise InferenceError("No inputs: give image files, folders or list files.")
        items = collect_inputs(inputs)
        budget = Budget(max_errors, len(items))
        ids, features, labels = read_items(model, items, budget)
        errors = budget.errors
        if model.task == "detection":
            from .detection import source_size

            sizes = {item.input_id: source_size(item) for item in items}
    outputs = _run_network(model, features, batch_size, progress)
    classification = model.task == "classification"
    if top_n_classes is None:
        top_n_classes = int(config.get("top_n") or DEFAULT_TOP_N)
    samples = SampleList(
        ids,
        features,
        outputs,
        labels,
        network_input=model.network_input,
        crop_label=model.crop_label,
        top=BatchTopN(outputs, top_n_classes, model.class_labels) if classification else None,
    )
    if model.task == "detection":
        from .detection import DEFAULT_SCORE_THRESHOLD, to_detections

        threshold = float(config.get("score_threshold", DEFAULT_SCORE_THRESHOLD))
        for sample in samples:
            height, width = model.feature_shape[0], model.feature_shape[1]
            sample.detections = to_detections(
                sample.output,
                (height, width),
                sizes.get(sample.input_id),
                model.dataset.resize_mode,
                model.class_labels,
                threshold,
            )
    if model.task == "multilabel":
        from .multilabel import label_thresholds, labels_above  # only multi-label models read their thresholds

        thresholds = label_thresholds(model)
        for sample in samples:
            sample.labels = labels_above(sample.output, thresholds, model.class_labels)
        if "thresholds" in config and not config["thresholds"]:  # the view decides at the model's thresholds
            config["thresholds"] = ",".join(repr(float(t)) for t in thresholds)
    metrics = None
    labelled = [i for i, label in enumerate(labels) if label is not None] if labels is not None else []
    if classification and labelled:
        metrics = classification_metrics(
            outputs[labelled],
            [int(np.asarray(samples[i].ground_truth).reshape(-1)[0]) for i in labelled],
            model.class_labels,
        )
    notes = _finish_inference(instance, model.dataset.plugin_id, list(samples) if instance else [])
    return InferenceResult(model, samples, metrics, view_id, config, errors, notes)
