"""Inference on the model page: inputs, the view picker and the results page.

Inputs: uploaded images (saved under the model job's ``inference/`` folder,
size-limited by the app's upload limit), a path on the server (an image, a
folder or a list file; checked to exist and be readable), or the data
plugin's own inference form. The model runs in a worker process
(:mod:`digits_core.web.worker_calls`); the results are the view's header,
per-sample and summary templates rendered by
:func:`digits_core.inference.report.render_fragments`.
"""

from __future__ import annotations

import os
import secrets
import shutil
from typing import TYPE_CHECKING, Any

from flask import Blueprint, request
from flask.typing import ResponseReturnValue
from markupsafe import Markup
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.utils import secure_filename

from ..errors import DigitsError, FormValidationError
from ..forms import validate_form
from ..limits import InputTooLargeError, PixelBudget, check_image_size, image_header
from .context import request_data_roots, web_context
from .forms_render import (
    blank_form,
    form_from_request,
    jsonable,
    render_plugin_form,
    validated,
)
from .helpers import read_json, wants_json
from .inference_inputs import check_inference_path, results_json
from .model_page import render_model_page
from .results_store import store_and_redirect

if TYPE_CHECKING:
    from werkzeug.datastructures import FileStorage

    from ..interfaces import View
    from ..jobs import Job

bp = Blueprint("inference", __name__, url_prefix="/models")

#: Uploaded inference inputs older than this many runs are removed.
KEEP_UPLOAD_RUNS = 5


def _view_class(view_id: str) -> type[View]:
    from ..plugins.registry import registry

    return registry.get_view(view_id)


@bp.get("/<job_id>/view-config")
def view_config(job_id: str) -> ResponseReturnValue:
    """The chosen view's config form, as an HTML fragment (``?view_id=``)."""
    web_context().store.get(job_id, kind="model")
    from ..plugins.contract import config_form

    cls = _view_class(request.args.get("view_id", ""))
    form_class = config_form(cls)
    if form_class is None:
        return Markup('<p class="muted small">This view has no options.</p>')
    return render_plugin_form(blank_form(form_class), cls.get_config_template)


def _save_uploads(job: Job, files: list[FileStorage]) -> list[list[str]]:
    """Save uploaded images under the job's ``inference/`` folder.

    Returns:
        ``[[shown name, saved path], ...]``: the name is the file's name on the
        user's machine (made unique), so results are captioned with it rather
        than with the server's temporary path.
    """
    root = job.path / "inference"
    root.mkdir(exist_ok=True)
    # Only the uploads' folders, oldest first (``results/`` holds the stored result pages).
    runs = sorted(
        (p for p in root.iterdir() if p.is_dir() and p.name.startswith(("upload-", "form-upload-"))),
        key=lambda p: p.stat().st_mtime,
    )
    for old in runs[:-KEEP_UPLOAD_RUNS]:
        shutil.rmtree(old, ignore_errors=True)
    folder = root / f"upload-{secrets.token_hex(4)}"
    folder.mkdir()
    saved: list[list[str]] = []
    shown: set[str] = set()
    for storage in files:
        if not storage or not storage.filename:
            continue
        count = len(saved)
        name = secure_filename(storage.filename) or f"image-{count}"
        target = folder / f"{count:04d}-{name}"
        storage.save(target)
        original = os.path.basename(storage.filename.replace("\\", "/")) or name
        label, n = original, 1
        while label in shown:
            n += 1
            label = f"{original} ({n})"
        shown.add(label)
        saved.append([label, str(target)])
    if not saved:
        shutil.rmtree(folder, ignore_errors=True)
        raise FormValidationError({"images": ["Choose at least one image to upload."]}, "inference")
    try:
        check_upload_sizes(saved)
    except InputTooLargeError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise RequestEntityTooLarge(str(exc)) from None
    return saved


def check_upload_sizes(saved: list[list[str]]) -> None:
    """Refuse uploads whose headers declare too many pixels, each or together, before the worker sees them.

    Reads only each image's header (:func:`digits_core.limits.image_header`): the per-image limit and
    one pixel budget over all the request's images (``DIGITS_MAX_IMAGE_PIXELS``,
    ``DIGITS_MAX_REQUEST_PIXELS``). A file that is not an image is left to the worker, which reports it.

    Args:
        saved: ``[[shown name, saved path], ...]`` as :func:`_save_uploads` returns.

    Raises:
        InputTooLargeError: Naming the upload (as the user named it) and the limit.
    """
    budget = PixelBudget()
    for shown, path in saved:
        try:
            _format, width, height = image_header(path)
        except (OSError, ValueError):
            continue
        check_image_size(width, height, f"Upload {shown}", budget)


def _is_upload(value: object) -> bool:
    return hasattr(value, "filename") and hasattr(value, "stream")


def _save_form_uploads(job: Job, values: dict) -> dict:
    """Save files uploaded through a plugin's inference form; their values become the saved paths.

    The worker process that runs inference cannot receive the upload
    itself, so each uploaded file is stored under the model job's
    ``inference/`` folder and the plugin gets its path (an empty string when
    no file was chosen).
    """
    uploads = {name: value for name, value in values.items() if _is_upload(value)}
    if not uploads:
        return values
    saved = dict(values)
    folder = None
    for name, storage in uploads.items():
        if not storage.filename:
            saved[name] = ""
            continue
        if folder is None:
            folder = job.path / "inference" / f"form-upload-{secrets.token_hex(4)}"
            folder.mkdir(parents=True)
        target = folder / (secure_filename(storage.filename) or name)
        storage.save(target)
        saved[name] = str(target)
    return saved


@bp.post("/<job_id>/infer")
def infer(job_id: str) -> ResponseReturnValue:
    """Run the model on the given inputs, store the results and redirect to their page.

    The results are stored in the job's folder (:mod:`digits_core.web.inference_results`) and the
    answer is ``303`` to their GET URL, so a reload does not run the model again. A form error or a
    failed run re-renders the model page (200, as the New Model form: a 400 document logs a console
    error) with the message on the inference form and the choices kept; JSON clients get the results
    object, or the usual error object with 400.
    """
    job = web_context().store.get(job_id, kind="model")
    try:
        return _infer(job)
    except DigitsError as exc:
        if wants_json():
            raise

        errors = exc.errors if isinstance(exc, FormValidationError) else {"": [str(exc)]}
        values = {
            k: request.form.get(k, "")
            for k in ("view_id", "input_mode", "server_path", "snapshot", "visualize", "label_path")
        }
        return render_model_page(job, infer_errors=errors, infer_values=values)


def _infer(job: Job) -> ResponseReturnValue:
    from .inference_worker import run_in_worker

    volume = (read_json(job.path / "model.json") or {}).get("kind") == "volume"
    view_id = "volume" if volume else request.form.get("view_id", "")
    view_cls = _view_class(view_id)
    view_config = {}
    from ..plugins.contract import config_form

    form_class = config_form(view_cls)
    if form_class is not None:
        from ..forms import bind_form, user_fields

        names = {f.name for f in user_fields(form_class(meta={"csrf": False}))}
        if names & set(request.form):
            bound = form_from_request(form_class, request)
        else:  # the config form was not shown (e.g. a script posting only inputs): the view's defaults
            bound = bind_form(form_class, {}, meta={"csrf": False})
        view_config = jsonable(validate_form(bound, f'config of view "{view_id}"'))
    mode = request.form.get("input_mode", "upload")
    request_body: dict[str, Any] = {
        "model": str(job.path),
        "jobs_dir": str(web_context().jobs_dir),
        "view": view_id,
        "view_config": view_config,
        "epoch": request.form.get("snapshot") or None,
        "data_roots": request_data_roots(),
        "max_errors": request.form.get("max_errors") or None,
    }
    if volume:  # unet3d / unet2.5d: a whole volume in, its label volume out
        from .volume_inference import infer_volume_from_form  # volume models only

        return infer_volume_from_form(
            job,
            view_cls.get_title(),
            view_config,
            _plugin_form_values(job) if mode == "plugin" else None,
            check_path=check_inference_path,
            save_uploads=_save_form_uploads,
        )
    if mode == "plugin":
        request_body["inference_form"] = _plugin_form_values(job)
    elif mode == "path":
        request_body["inputs"] = [check_inference_path(request.form.get("server_path", ""))]
    else:
        request_body["inputs"] = _save_uploads(job, request.files.getlist("images"))
    visualize = bool(request.form.get("visualize"))
    if visualize and len(request_body.get("inputs") or ()) > 1:
        raise FormValidationError(
            {
                "visualize": [
                    f"Layer visualizations are for one image (DIGITS's Classify One); {len(request_body['inputs'])} "
                    "were chosen. Choose one image, or untick this box."
                ]
            },
            "inference",
        )
    request_body["visualize"] = visualize
    request_body["pixel_budget"] = mode == "upload"  # the worker counts the uploads' pixels again, together
    try:
        result = run_in_worker("infer", request_body)
    except InputTooLargeError as exc:
        raise RequestEntityTooLarge(str(exc)) from None
    if wants_json():  # the results page's JSON twin: what /api/models/ID/infer answers
        return results_json(job, result)
    return store_and_redirect(job, view_id, view_cls.get_title(), result, _described_inputs(mode, request_body))


def _plugin_form_values(job: Job) -> dict:
    """The posted values of the dataset plugin's inference form, validated, uploads saved (their paths)."""
    from ..plugins.contract import inference_form  # as the view's config_form: contract helpers load on use
    from ..plugins.registry import registry
    from .forms_render import dataset_userdata

    dataset_id: Any = job.data.get("dataset_id")  # a model job always names its dataset
    ds_job = web_context().store.get(dataset_id, kind="dataset")
    cls = registry.get_data_ingestion(ds_job.plugin_id or "")
    inf_class = inference_form(cls, dataset_userdata(ds_job))
    if inf_class is None:
        raise FormValidationError({"input_mode": ["This data plugin has no inference form."]}, "inference")
    values = validated(form_from_request(inf_class, request), f'inference form of plugin "{cls.get_id()}"')
    return jsonable(_save_form_uploads(job, values))


def _described_inputs(mode: str, request_body: dict) -> str:
    """One line naming a run's inputs for the model page's list of results."""
    if mode == "plugin":
        return "the data plugin's inference form"
    if mode == "path":
        return request_body["inputs"][0]
    names = [shown for shown, _ in request_body["inputs"]]
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return ", ".join(names[:3]) + more
