"""The model zoo on the web: ``/zoo`` lists the entries ``weights=zoo:NAME`` can name, ``/zoo.json`` the same rows.

Each row is an entry of the zoo's ``manifest.json`` (:mod:`digits_core.engine.zoo`): its name, the network
it fits, the task and input it was trained for (entries published from a model job; a file added by hand
says what its adder gave), its SHA-256, the file's size and its source with the provenance (job, dataset,
metric). The page reads files only (no TensorFlow); a manifest that cannot be read is named, not fatal.
"""

from __future__ import annotations

from flask import Blueprint, jsonify, render_template, request
from flask.typing import ResponseReturnValue

from ..engine.weights import MANIFEST, read_manifest, zoo_dir
from ..errors import DigitsError

bp = Blueprint("zoo", __name__)


def _input(entry: dict) -> str:
    shape = entry.get("input_shape")
    if isinstance(shape, list) and shape and all(isinstance(v, int) for v in shape):
        return "×".join(str(v) for v in shape)
    channels = entry.get("input_channels")
    return f"{channels} channel{'s' if channels != 1 else ''}" if isinstance(channels, int) else ""


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def zoo_rows() -> tuple[list[dict], str | None]:
    """The zoo's entries as rows (name, network, task, input, sha256, size, source, provenance), and the
    reason the manifest could not be read (else ``None``)."""
    folder = zoo_dir()
    try:
        entries = read_manifest(folder)
    except DigitsError as exc:
        return [], str(exc)
    rows = []
    for name, entry in sorted(entries.items()):
        path = folder / str(entry.get("file") or "")
        try:
            size = path.stat().st_size if path.is_file() else None
        except OSError:
            size = None
        metric = entry.get("metric") if isinstance(entry.get("metric"), dict) else None
        rows.append(
            {
                "name": name,
                "weights": f"zoo:{name}",
                "network": str(entry.get("network") or ""),
                "task": str(entry.get("task") or ""),
                "input": _input(entry),
                "input_channels": entry.get("input_channels"),
                "sha256": str(entry.get("sha256") or ""),
                "size": size,
                "file_present": size is not None,
                "source": str(entry.get("source") or ""),
                "license": str(entry.get("license") or ""),
                "job": _text(entry.get("job")),
                "dataset": _text(entry.get("dataset")),
                "metric": metric,
                "added": _text(entry.get("added")),
            }
        )
    return rows, None


@bp.get("/zoo.json")
@bp.get("/zoo")  # registered first: url_for("zoo.index") is the page
def index() -> ResponseReturnValue:
    """The zoo's entries (``/zoo.json``: ``{"folder", "entries", "error"}``)."""
    rows, error = zoo_rows()
    if request.path.endswith(".json"):
        return jsonify({"folder": str(zoo_dir()), "entries": rows, "error": error})
    return render_template("zoo.html", rows=rows, error=error, folder=zoo_dir(), manifest=MANIFEST, title="Model zoo")
