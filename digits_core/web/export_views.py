"""The model page's Export panel: any snapshot in any export format, with its parity report.

``POST /models/<id>/export`` (fields ``format``: savedmodel, keras, onnx or
tflite, for a volume model savedmodel or keras; ``quantize``: dynamic or float16, TFLite only; ``snapshot``: an
epoch, empty for the last; ``allow_mismatch``) runs ``digits export`` in a
one-off worker process (TensorFlow never loads in the web server) and
keeps the archive in the job's ``export/`` folder as
``<export name>.tar.gz``, next to the export's folder and its
``parity.json`` (:func:`digits_core.inference.export.export_name`). The
browser is sent back to the panel, which lists every export made with its
parity verdict and figures and a download link
(``GET /models/<id>/export/<export name>.tar.gz``). A bad field, a converter
that cannot convert the network or a failed parity report come back on the
panel, values kept; JSON clients get ``{"name", "download", "parity"}``
or the error as JSON. A full disk answers 507 ("the disk is full ... under
<the job's export folder>"), nothing half-written left.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from flask import Blueprint, abort, g, jsonify, redirect, request, send_file, url_for
from flask.typing import ResponseReturnValue

from ..errors import DigitsError, DiskFullError, FormValidationError, JobStateError
from ..inference.export import EXPORT_DIR, FORMATS, export_name
from ..inference.export_formats import QUANTIZE
from ..inference.export_volume import VOLUME_FORMATS
from ..jobs import Job, JobStatus
from .context import web_context
from .helpers import invalid_json, wants_json
from .model_page import is_volume, render_model_page, snapshot_for

bp = Blueprint("exports", __name__, url_prefix="/models")
bp.register_error_handler(FormValidationError, invalid_json)

#: The panel's format menu, in its order.
FORMAT_TITLES = (
    ("savedmodel", "SavedModel (TF Serving layout)"),
    ("keras", "Keras (.keras, the bare network)"),
    ("onnx", "ONNX (onnxruntime)"),
    ("tflite", "TFLite (LiteRT interpreter)"),
)
FIELDS = ("format", "quantize", "snapshot", "allow_mismatch")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def parity_figures(report: dict | None) -> str:
    """One line of a parity report's figures (``top-1 agreement 100 % · max |Δ| 3e-07 · 40 inputs``)."""
    if not report:
        return "no parity report"
    if report.get("skipped"):
        return str(report["skipped"])
    parts = []
    for key, title in (
        ("top1_agreement", "top-1 agreement"),
        ("mask_iou", "mask IoU"),
        ("boxes_matched", "boxes matched"),
    ):
        if isinstance(report.get(key), (int, float)):
            parts.append(f"{title} {report[key] * 100:.4g} %" if key != "mask_iou" else f"{title} {report[key]:.4f}")
    if isinstance(report.get("max_abs_diff"), (int, float)):
        parts.append(f"max |Δ| {report['max_abs_diff']:.2g}")
    parts.append(f"{report.get('inputs', 0)} inputs ({report.get('runtime', '?')} vs {report.get('reference', '?')})")
    if report.get("passed") is False:
        parts.append(f"worst input {report.get('worst_input')}")
    return " · ".join(parts)


def _export_epoch(info: dict) -> object:
    """The epoch an export's ``info.json`` names: ``model.epoch`` (2-D), ``volume.epochs`` (a volume model's)."""
    for block, key in (("model", "epoch"), ("volume", "epochs")):
        value = info.get(block)
        if isinstance(value, dict) and value.get(key) is not None:
            return value[key]
    return None


def model_exports(job: Job) -> list[dict]:
    """The exports made from the model page, newest first: name, epoch, format, quantize, parity, size, download."""
    folder = Path(job.path) / EXPORT_DIR
    found = []
    for archive in folder.glob("*.tar.gz") if folder.is_dir() else ():
        name = archive.name[: -len(".tar.gz")]
        info = _read(folder / name / "info.json")
        if info is None or not name.startswith(f"{job.id}-epoch-"):
            continue
        parity = _read(folder / name / "parity.json")
        found.append(
            {
                "name": name,
                "epoch": _export_epoch(info),
                "format": info.get("format"),
                "quantize": info.get("quantize"),
                "parity": parity,
                "passed": None if parity is None else parity.get("passed"),
                "figures": parity_figures(parity),
                "size": archive.stat().st_size,
                "mtime": archive.stat().st_mtime,
                "download": url_for("exports.download", job_id=job.id, name=name),
            }
        )
    return sorted(found, key=lambda e: e["mtime"], reverse=True)


def export_formats_for(job: Job) -> tuple[tuple[str, str], ...]:
    """The panel's format menu for ``job``: a volume model exports as SavedModel or Keras, as ``digits export``."""
    if is_volume(job):
        return tuple((value, title) for value, title in FORMAT_TITLES if value in VOLUME_FORMATS)
    return FORMAT_TITLES


def _form_choice(job: Job) -> tuple[str, str | None]:
    fmt = request.form.get("format", "savedmodel") or "savedmodel"
    quantize = request.form.get("quantize") or None
    errors: dict[str, list[str]] = {}
    offered = [value for value, _ in export_formats_for(job)]
    if fmt not in FORMATS:
        errors["format"] = [f"Choose one of {', '.join(FORMATS)}."]
    elif fmt not in offered:
        errors["format"] = [
            f"A volume model exports as {' or '.join(offered)} (the sliding-window inference in the graph, or "
            f"the bare network), not {fmt}: ONNX and TFLite exports of volume models are not supported."
        ]
    if quantize is not None and quantize not in QUANTIZE:
        errors["quantize"] = [f"Choose none, {' or '.join(QUANTIZE)}."]
    elif quantize is not None and fmt != "tflite":
        errors["quantize"] = ["Quantization applies to the TFLite format only: choose TFLite or no quantization."]
    if errors:
        raise FormValidationError(errors, "export")
    return fmt, quantize


@bp.post("/<job_id>/export")
def export(job_id: str) -> ResponseReturnValue:
    """Export one snapshot in the chosen format; back to the panel with its parity report."""
    from .worker_calls import run_worker

    job = web_context().store.get(job_id, kind="model")
    try:
        if job.status in (JobStatus.WAITING, JobStatus.RUNNING, JobStatus.INITIALIZED):
            raise JobStateError(f"Model {job.id} is still training: export it once it has finished.")
        fmt, quantize = _form_choice(job)
        snap = snapshot_for(job, request.form.get("snapshot") or None)
        if snap is None:
            raise JobStateError(f"Model {job.id} has no snapshot yet; export once an epoch has finished.")
        name = export_name(job.id, snap["epoch"], fmt, quantize)
        folder = Path(job.path) / EXPORT_DIR
        folder.mkdir(exist_ok=True)
        result = run_worker(
            "export",
            {
                "job": str(job.path),
                "out": str(folder / f"{name}.tar.gz"),
                "epoch": snap["epoch"],
                "format": fmt,
                "quantize": quantize,
                "allow_mismatch": bool(request.form.get("allow_mismatch")),
                "folder": str(folder / name),
            },
            timeout=600,
        )
    except DigitsError as exc:
        if wants_json():
            raise  # the app's handlers: 400, or 507 for a full disk (DiskFullError)

        g.export_errors = exc.errors if isinstance(exc, FormValidationError) else {"": [str(exc)]}
        g.export_values = {k: request.form.get(k, "") for k in FIELDS}
        # 200, as the inference form's errors (see inference_views.infer); a full disk is the server's: 507
        return render_model_page(job), (507 if isinstance(exc, DiskFullError) else 200)
    download = url_for("exports.download", job_id=job.id, name=name)
    if wants_json():
        return jsonify(
            {
                "name": name,
                "format": fmt,
                "quantize": quantize,
                "epoch": snap["epoch"],
                "download": download,
                "parity": result.get("parity"),
            }
        )
    return redirect(url_for("models.show", job_id=job.id, export=name) + "#export", code=303)


@bp.get("/<job_id>/export/<name>.tar.gz")
def download(job_id: str, name: str):
    """Download one export the panel lists."""
    job = web_context().store.get(job_id, kind="model")
    archive = Path(job.path) / EXPORT_DIR / f"{name}.tar.gz"
    if not _NAME.fullmatch(name) or not name.startswith(f"{job.id}-epoch-") or not archive.is_file():
        abort(404, description=f"Model {job.id} has no export named {name}.")
    return send_file(archive, as_attachment=True, download_name=f"{job.name or job.id}-{name}.tar.gz".replace("/", "_"))


@bp.app_context_processor
def _panel_helpers() -> dict:
    return {
        "model_exports": model_exports,
        "export_formats": FORMAT_TITLES,
        "export_formats_for": export_formats_for,
        "export_quantize": QUANTIZE,
        "export_errors": lambda: g.get("export_errors") or {},
        "export_values": lambda: g.get("export_values") or {},
        "export_shown": lambda: request.args.get("export", ""),
    }
