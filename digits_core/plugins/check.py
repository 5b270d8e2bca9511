"""The plugin contract checked on a class, in process: what ``digits plugin check`` and
:func:`digits_core.plugins.testing.check_plugin` report.

For a data plugin: the load-time check (forms constructible, no reserved
field names, templates resolvable), the form defaults (or given values)
validated, every template rendered, ``itemize_entries`` on each stage and a
few ``encode_entry`` calls checked for dtype, shape (channels-first features
are named with the fix) and label. For a view: ``process_data`` and its
templates on synthetic output. No TensorFlow.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DigitsError, PluginCodeError
from ..forms import bind_form, validate_form
from ..interfaces import STAGES, DataIngestion, View, ViewContext
from ..interfaces.images import RecordError
from ..interfaces.labels import DeclaredLabel, declared, undeclared_kind
from ..interfaces.records import channels_first_problem, pack_record
from ..interfaces.volume import check_volume_pair
from ..paths import confined_to
from ..templating import render_plugin_template
from .contract import (
    _plugin_id,
    check_at_load,
    config_form,
    create_view,
    dataset_form,
    inference_form,
    plugin_code,
    reserved_names,
    template_method,
)
from .path_audit import gate_warning, recording_reads

#: How many entries of each stage :func:`check_plugin` encodes by default.
DEFAULT_ENTRIES = 3
OK, FAILED, SKIPPED, WARNING = "ok", "failed", "skipped", "warning"


@dataclass
class Check:
    """The outcome of one contract check.

    Attributes:
        name: What was checked (e.g. ``"encode_entry(train)"``).
        status: ``"ok"``, ``"failed"``, ``"skipped"`` or ``"warning"`` (passes, but says what to look at).
        message: Why it failed or was skipped (empty when ok).
        detail: A traceback of plugin code, when one raised.
    """

    name: str
    status: str
    message: str = ""
    detail: str = ""

    def to_dict(self) -> dict:
        """JSON-friendly form."""
        return {"name": self.name, "status": self.status, "message": self.message}


@dataclass
class CheckReport:
    """What :func:`check_plugin` found.

    Attributes:
        plugin_id: The plugin's id.
        kind: ``"data"`` or ``"view"``.
        checks: Every check, in the order run.
    """

    plugin_id: str
    kind: str
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no check failed (skipped ones do not count)."""
        return not self.failures

    @property
    def failures(self) -> list[Check]:
        """The failed checks."""
        return [c for c in self.checks if c.status == FAILED]

    def add(self, name: str, status: str, message: str = "", detail: str = "") -> Check:
        check = Check(name, status, message, detail)
        self.checks.append(check)
        return check

    def __str__(self) -> str:
        lines = [
            f'{self.kind} plugin "{self.plugin_id}": '
            f"{'all checks passed' if self.ok else f'{len(self.failures)} check(s) failed'}"
        ]
        for check in self.checks:
            lines.append(f"  {check.status:<7} {check.name}" + (f": {check.message}" if check.message else ""))
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """JSON-friendly form."""
        return {
            "plugin_id": self.plugin_id,
            "kind": self.kind,
            "ok": self.ok,
            "checks": [c.to_dict() for c in self.checks],
        }


def _cause(exc: BaseException) -> str:

    if isinstance(exc, PluginCodeError):
        return exc.cause
    text = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _trace(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc.__cause__ or exc))


def _render(report: CheckReport, name: str, pair: Any, **extra: Any) -> None:

    if not pair or pair[0] is None:
        report.add(name, SKIPPED, "no template")
        return
    try:
        source, context = pair
        render_plugin_template(source, {**(context or {}), **extra})
    except Exception as exc:  # noqa: BLE001
        report.add(name, FAILED, f"rendering raised {_cause(exc)}", _trace(exc))
    else:
        report.add(name, OK)


def _volume_problem(pair: tuple) -> str | None:
    """What is wrong with a volume plugin's ``(Volume, label)`` pair (see :mod:`digits_core.interfaces.volume`)."""
    try:
        check_volume_pair(*pair)
    except RecordError as exc:
        return str(exc)
    return None


def check_feature(feature: Any, label: Any, plugin_id: str, kind: str | None = None) -> str | None:
    """Return why one encoded ``(feature, label)`` breaks the data contract, or ``None``.

    Args:
        feature: The feature ``encode_entry`` returned.
        label: Its label.
        plugin_id: The plugin's id, named in the answer.
        kind: The label kind the plugin declares (``DataIngestion.label_kind``).
    """
    label, kind = declared(label, kind)
    array = np.asarray(feature) if not hasattr(feature, "fmt") else None
    if array is not None:
        if array.ndim not in (2, 3):
            return f"feature has shape {array.shape}; it must be H×W or H×W×C"
        problem = channels_first_problem(array.shape, plugin_id)
        if problem:
            return problem
    if kind is None and isinstance(label, np.ndarray) and label.ndim == 3 and label.shape[:2] == (1, 1):
        return (
            f"label has shape {label.shape} (the DIGITS 6 1×1×N habit); return a 1-D float array "
            f"of {label.shape[2]} values instead (label.reshape(-1))"
        )
    try:
        pack_record(feature, label, kind)
    except RecordError as exc:
        if kind is not None:
            return f'data plugin "{plugin_id}" declares label_kind "{kind}": {exc}'
        return str(exc)
    return None


def _check_inference_form(cls: type, report: CheckReport, userdata: Mapping[str, Any]) -> None:
    """The inference form and template, with the plugin created from ``userdata`` as at inference."""

    try:
        inf_cls = inference_form(cls, userdata)
    except Exception as exc:  # noqa: BLE001
        report.add("inference form", FAILED, _cause(exc), _trace(exc))
        return
    if inf_cls is None:
        return
    inf = bind_form(inf_cls, {}, meta={"csrf": False})
    report.add("inference form", OK)
    render = template_method(cls, "get_inference_template", userdata)
    _render(report, "inference template", _call(report, "get_inference_template", lambda: render(inf)), form=inf)


def _check_data(
    cls: type[DataIngestion],
    report: CheckReport,
    form_values: Mapping[str, Any] | None,
    entries: int,
    data_roots: Sequence[str | os.PathLike] | None = None,
) -> None:

    plugin_id = report.plugin_id
    try:
        form_cls = dataset_form(cls)
        form = bind_form(form_cls, form_values or {}, meta={"csrf": False})
    except Exception as exc:  # noqa: BLE001
        report.add("dataset form", FAILED, _cause(exc), _trace(exc))
        return
    report.add("dataset form", OK)
    _render(
        report,
        "dataset template",
        _call(report, "get_dataset_template", lambda: cls.get_dataset_template(form)),
        form=form,
    )
    try:
        values = validate_form(form, f'dataset form of plugin "{plugin_id}"')
    except DigitsError as exc:
        _check_inference_form(cls, report, {})
        report.add(
            "itemize/encode",
            SKIPPED,
            f"the form values do not validate ({str(exc).splitlines()[-1].strip()}); "
            "give form_values (--form FIELD=VALUE) to run them",
        )
        return
    _check_inference_form(cls, report, values)
    try:
        with plugin_code(plugin_id, "__init__"):
            plugin = cls(**values)
    except DigitsError as exc:
        report.add("__init__", FAILED, str(exc), _trace(exc))
        return
    report.add("__init__", OK)

    encoded_any = tried_any = False
    layouts: dict[tuple, str] = {}  # (shape, dtype) of each encoded array feature -> the first entry with it
    raw_labels: list[str] = []  # labels stored raw for want of a declared kind (the first one is named)
    # With data roots, the plugin runs confined to them and every file it reads is noted (plugin_path_audit).
    with recording_reads() as opened, confined_to(data_roots or None):
        for stage in STAGES:
            try:
                with plugin_code(plugin_id, f"itemize_entries({stage!r})"):
                    stage_entries = list(plugin.itemize_entries(stage) or [])
            except DigitsError as exc:
                report.add(f"itemize_entries({stage})", FAILED, str(exc), _trace(exc))
                continue
            report.add(f"itemize_entries({stage})", OK, f"{len(stage_entries)} entries")
            # the first entries, each reported; then as many spread over the rest, reported only when they fail
            for index, entry in enumerate(stage_entries[:entries] + spread(stage_entries[entries:], entries)):
                tried_any = True
                encoded_any = (
                    _encode_one(plugin, report, stage, entry, layouts, raw_labels, quiet=index >= entries)
                    or encoded_any
                )
    ungated = gate_warning(plugin_id, opened, [Path(r) for r in data_roots], cls) if data_roots else None
    if ungated:
        report.add("path gate", WARNING, ungated)

    taken = sorted(set(plugin.userdata) & reserved_names("data"))
    report.add(
        "userdata",
        FAILED if taken else OK,
        f"itemize_entries stored userdata key(s) {', '.join(taken)}, name(s) the framework owns: they are "
        "dropped when the plugin is re-created for inference; use another key"
        if taken
        else "",
    )
    if raw_labels:
        report.add(
            "label kind",
            WARNING,
            f"{raw_labels[0]} declares no kind, so it is stored as a raw array with its "
            "shape, and only a network of your own trains on it (the raw task); if it is a class, a "
            "regression vector, a mask, boxes or an image, declare label_kind on the plugin class",
        )
    if len(layouts) > 1:
        seen = "; ".join(f"{'×'.join(map(str, shape))} {dtype} ({where})" for (shape, dtype), where in layouts.items())
        report.add(
            "feature shapes",
            FAILED,
            f"the sampled entries encode to different shapes or dtypes: {seen}. "
            "A dataset holds one feature shape and dtype: resize (or crop/pad) every entry to one size and "
            "cast to one dtype in encode_entry, or offer a resize in the form",
        )
    if not encoded_any:
        if tried_any:
            report.add("encode_entry", FAILED, "every encode_entry call failed (see above): no entry was encoded")
        else:
            report.add(
                "encode_entry",
                SKIPPED if not report.failures else FAILED,
                "no entry was encoded: itemize_entries returned no entries for these form values",
            )


def _encode_one(
    plugin: Any, report: CheckReport, stage: str, entry: Any, layouts: dict, raw_labels: list, *, quiet: bool
) -> bool:
    """Encode one entry and check each pair; record its array layout (and a raw-label fallback); True when clean."""
    plugin_id = report.plugin_id
    name = f"encode_entry({stage}: {entry})"
    try:
        with plugin_code(plugin_id, "encode_entry"):
            encoded = plugin.encode_entry(entry)
    except DigitsError as exc:
        report.add(name, FAILED, str(exc), _trace(exc))
        return False
    pairs = encoded if isinstance(encoded, list) else [encoded]
    problems = []
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2):
            problems.append(f"returned {type(pair).__name__}; expected (feature, label) or a list of pairs")
            continue
        problem = (
            _volume_problem(pair)
            if getattr(plugin, "data_layout", None) == "DHWC"
            else check_feature(*pair, plugin_id, getattr(plugin, "label_kind", None))
        )
        if problem:
            problems.append(problem)
            continue
        if not raw_labels and _falls_back_to_raw(plugin, pair[1]):
            raw = np.asarray(getattr(pair[1], "label", pair[1]))
            raw_labels.append(
                f"the label of encode_entry({stage}: {entry}) ({'×'.join(map(str, raw.shape))} {raw.dtype})"
            )
        if not hasattr(pair[0], "fmt") and getattr(plugin, "data_layout", None) != "DHWC":
            array = np.asarray(pair[0])
            layouts.setdefault((array.shape, str(array.dtype)), f"{stage}: {entry}")
    if problems or not quiet:
        report.add(name, FAILED if problems else OK, "; ".join(dict.fromkeys(problems)))
    return not problems


def _falls_back_to_raw(plugin: Any, label: Any) -> bool:
    """True when ``label`` is stored raw only because nothing declared its kind (the plugin, or its adapter)."""
    if isinstance(label, DeclaredLabel):
        return label.kind == "raw" and label.fallback
    if getattr(plugin, "label_kind", None) is not None or getattr(plugin, "data_layout", None) == "DHWC":
        # a DHWC (volume) plugin's label is a D×H×W class volume by its layout: stored with kind "volume"
        return False
    return isinstance(label, np.ndarray) and undeclared_kind(label) == "raw"


def spread(items: list, count: int) -> list:
    """Up to ``count`` items spread evenly from the first to the last (a sample of the whole input, not its start)."""
    if len(items) <= count:
        return list(items)
    if count <= 1:
        return list(items[:count])
    return [items[round(i * (len(items) - 1) / (count - 1))] for i in range(count)]


def _call(report: CheckReport, method: str, function: Callable[[], Any]) -> Any:
    try:
        return function()
    except Exception as exc:  # noqa: BLE001
        report.add(method, FAILED, f"raised {_cause(exc)}", _trace(exc))
        return None


def synthetic_output(view_cls: type) -> list[tuple[str, np.ndarray, np.ndarray, Any]]:
    """Samples ``(input_id, input, output, ground_truth)`` to try a view on: class scores, an H×W×N map
    and detections (``K×6`` rows ``class, score, x1, y1, x2, y2`` with ``N×5`` ground-truth boxes)."""
    rng = np.random.default_rng(0)
    image = rng.integers(0, 255, (8, 8, 1), dtype=np.uint8)
    scores = np.array([0.1, 0.7, 0.2], np.float32)
    heat = rng.random((8, 8, 2)).astype(np.float32)
    boxes = np.array([[1, 0.9, 1, 1, 5, 6], [2, 0.4, 2, 3, 7, 7]], np.float32)
    truth = np.array([[1, 1, 1, 5, 5]], np.float32)
    return [
        ("sample-1.png", image, scores, 1),
        ("sample-2.png", image, heat, None),
        ("sample-3.png", image, boxes, truth),
    ]


class _SyntheticDataset:
    """What a view gets as ``dataset``: class labels, palette and userdata of a tiny classification set."""

    id = "synthetic"
    class_labels = ["zero", "one", "two"]
    color_palette = [[0, 0, 0], [255, 0, 0], [0, 255, 0]]
    userdata = {"class_labels": class_labels, "color_palette": color_palette}
    plugin_id = None
    feature_shape = (8, 8, 1)  # the shape of the synthetic inputs


def _check_view(cls: type[View], report: CheckReport, config: Mapping[str, Any] | None, dataset: Any) -> None:

    values: dict = {}
    try:
        form_cls = config_form(cls)
    except Exception as exc:  # noqa: BLE001
        report.add("config form", FAILED, _cause(exc), _trace(exc))
        return
    if form_cls is not None:
        try:
            form = bind_form(form_cls, config or {}, meta={"csrf": False})
            values = validate_form(form, f'config of view "{report.plugin_id}"')
        except Exception as exc:  # noqa: BLE001
            report.add("config form", FAILED, _cause(exc) if not isinstance(exc, DigitsError) else str(exc))
            return
        report.add("config form", OK)
        _render(
            report,
            "config template",
            _call(report, "get_config_template", lambda: cls.get_config_template(form)),
            form=form,
        )
    current: list[np.ndarray] = []  # the sample being processed: model_context.run answers its output
    run = lambda batch: np.repeat(current[-1][None], len(batch) if np.ndim(batch) == 4 else 1, axis=0)  # noqa: E731
    context = ViewContext("synthetic", 1.0, "classification", ["zero", "one", "two"], (8, 8, 1), run)
    try:
        view = create_view(cls, dataset or _SyntheticDataset(), values, context)
    except DigitsError as exc:
        report.add("View.__init__", FAILED, str(exc), _trace(exc))
        return
    report.add("View.__init__", OK)
    worked = 0
    for input_id, image, output, truth in synthetic_output(cls):
        shape = "x".join(map(str, output.shape))
        current.append(output)  # what the view's model_context.run answers for this sample
        try:
            data = view.process_data(input_id, image, output, truth)
        except Exception as exc:  # noqa: BLE001 - a view may not handle every kind of output
            report.add(f"process_data(output {shape})", SKIPPED, f"raised {_cause(exc)}", _trace(exc))
            continue
        _render(
            report,
            f"view template (output {shape})",
            _call(report, "get_view_template", lambda: view.get_view_template(data)),
        )
        worked += 1
    if not worked:
        report.add(
            "process_data",
            FAILED,
            "the view handled none of the synthetic outputs "
            "(class scores, an H×W×N map, detections); see the skipped checks above",
        )
    _render(report, "header template", _call(report, "get_header_template", view.get_header_template))
    _render(report, "summary template", _call(report, "get_summary_template", view.get_summary_template))


def check_plugin(
    cls: type,
    *,
    form_values: Mapping[str, Any] | None = None,
    entries: int = DEFAULT_ENTRIES,
    view_dataset: Any = None,
    data_roots: Sequence[str | os.PathLike] | None = None,
) -> CheckReport:
    """Run the whole plugin contract on a data or view plugin class, in process.

    Args:
        cls: A :class:`~digits_core.DataIngestion` or :class:`~digits_core.View` subclass.
        form_values: Dataset form values (data plugins) or config values
            (views); the form's defaults fill the rest.
        entries: How many entries of each stage to encode, spread from the first to the last.
        view_dataset: What a view gets as ``dataset`` (default: a tiny
            synthetic classification dataset).
        data_roots: Data plugins: run ``itemize_entries``/``encode_entry`` confined to these folders, as on
            the web server, and warn ("path gate") about files read outside them without the path gate.

    Returns:
        A :class:`CheckReport`; ``report.ok`` is False when any check failed.
    """

    kind = "data" if isinstance(cls, type) and issubclass(cls, DataIngestion) else "view"
    report = CheckReport(_plugin_id(cls), kind)
    if not (isinstance(cls, type) and issubclass(cls, (DataIngestion, View))):
        report.add("interface", FAILED, f"{cls!r} is not a DataIngestion or View subclass")
        return report
    missing = sorted(getattr(cls, "__abstractmethods__", ()) or ())
    if missing:
        report.add("interface", FAILED, f"does not implement required methods: {', '.join(missing)}")
        return report
    problem = check_at_load(kind, cls)
    report.add("load-time contract", FAILED if problem else OK, problem or "")
    if issubclass(cls, DataIngestion):
        _check_data(cls, report, form_values, entries, data_roots)
    else:
        _check_view(cls, report, form_values, view_dataset)
    return report
