"""What the inference pages and ``POST /api/models/ID/infer`` share: the check of a server path, the JSON answer."""

from __future__ import annotations

import os
from pathlib import Path

from flask import jsonify

from ..errors import FormValidationError
from ..paths import check_server_path


def check_inference_path(raw: str, field: str = "server_path") -> str:
    """An absolute, existing, readable path under the data roots (checked first, so nothing leaks about others).

    Used by every web and API route that reads inputs from the server's disk (inference, Top N).

    Raises:
        FormValidationError: Naming ``field``: empty, not absolute, outside the data roots,
            missing or unreadable.
    """
    text = (raw or "").strip()
    if not text:
        raise FormValidationError({field: ["Enter a path on the server."]}, "inference")
    if "\x00" in text:
        raise FormValidationError({field: ["Invalid path."]}, "inference")
    path = Path(text).expanduser()
    if not path.is_absolute():
        raise FormValidationError({field: ["Give an absolute path."]}, "inference")
    # The path as given (made absolute, never resolved): messages and results must not tell where a symlink leads.
    path = Path(os.path.abspath(check_server_path(path, field, form_name="inference")))
    if not path.exists():
        raise FormValidationError({field: [f"{text} does not exist on the server."]}, "inference")
    if not os.access(path, os.R_OK):
        raise FormValidationError({field: [f"{text} is not readable."]}, "inference")
    return str(path)


def results_json(job, result: dict):
    """The JSON answer of an inference request (the web form's twin and ``/api/models/ID/infer``)."""
    return jsonify(
        {
            "model": job.id,
            "results": result.get("json"),
            "info": result.get("info"),
            "html": result.get("fragments"),
            "visualizations": result.get("visualizations"),
            "worker": result.get("worker"),
        }
    )
