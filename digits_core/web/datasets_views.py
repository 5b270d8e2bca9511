"""Dataset pages: new dataset (per plugin), job page, explore gallery, delete, clone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from flask import Blueprint, current_app, flash, jsonify, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from ..datasets.options import DatasetOptionsError, options_from_web, web_values
from ..errors import DigitsError, DiskFullError, FormValidationError
from ..jobs import Job, JobStatus
from ..jobs.health import DATASET_FILES, dataset_record_problem
from ..jobs.readers import UnreadableRecordError
from ..submit.datasets import queue_dataset_job
from .common_fields import DatasetJobForm
from .context import request_data_roots, web_context
from .forms_render import blank_form, form_from_request, jsonable, render_plugin_form, validated
from .helpers import job_summary, read_json, read_progress, worker_log_tail
from .job_notes import save_notes

if TYPE_CHECKING:
    import numpy as np

    from ..datasets.reader import Dataset
    from ..interfaces import DataIngestion

bp = Blueprint("datasets", __name__, url_prefix="/datasets")

#: Names the errors report may have in a dataset job folder.
ERROR_REPORTS = ("errors.jsonl", "errors.json", "errors.csv", "errors.txt", "errors.log")


def _ingestion(plugin_id: str) -> type[DataIngestion]:
    from ..plugins.registry import registry

    return registry.get_data_ingestion(plugin_id)


def create_dataset_job(
    plugin_id: str,
    form_data: dict,
    name: str | None = None,
    workers: int | str | None = None,
    max_errors: int | float | str | None = None,
    group: str | None = None,
) -> Job:
    """Queue a dataset job in this server (:func:`digits_core.submit.datasets.queue_dataset_job`)."""
    ctx = web_context()
    return queue_dataset_job(
        plugin_id,
        form_data,
        name,
        workers,
        max_errors,
        group,
        queue=ctx.scheduler,
        jobs_dir=ctx.jobs_dir,
        data_roots=request_data_roots(),
    )


@bp.route("/new/<plugin_id>", methods=["GET", "POST"])
def new(plugin_id: str) -> ResponseReturnValue:
    """The plugin's dataset form inside our page; POST creates and queues the job."""
    cls = _ingestion(plugin_id)
    form_class = cls.get_dataset_form()
    common = DatasetJobForm(request.form if request.method == "POST" else None)
    if request.method == "POST":
        form = form_from_request(form_class, request)
        ok_common = common.validate()
        try:
            data = validated(form, f'dataset form of plugin "{plugin_id}"')
            if ok_common:
                job = create_dataset_job(plugin_id, jsonable(data), **options_from_web(common))
                return redirect(url_for("datasets.show", job_id=job.id))
        except DatasetOptionsError as exc:
            for name, messages in exc.errors.items():
                common[f"job_{name}"].errors = list(messages)
        except FormValidationError:
            pass
        except DiskFullError:
            raise  # not the form's fault: the 507 page says the disk is full, and where
        except DigitsError as exc:
            common.job_max_errors.errors = [str(exc)]
        # The form with its errors answers 200, as the New Model form: a 400 document logs a console
        # error on every re-render (the JSON API answers 400).
    else:
        clone_id = request.args.get("clone")
        values = None
        if clone_id:
            source = web_context().store.get(clone_id, kind="dataset")
            values = source.form_data
            for field_name, value in web_values(source.data).items():
                common[field_name].data = value
            common.job_name.data = f"{source.name} (clone)"
        form = blank_form(form_class, values)
    plugin_html = render_plugin_form(form, cls.get_dataset_template)
    errors = {**form.errors, **common.errors} if request.method == "POST" else {}
    return render_template(
        "dataset_new.html",
        plugin_id=plugin_id,
        title=cls.get_title(),
        common=common,
        plugin_html=plugin_html,
        errors=errors,
    )


def _dataset_job(job_id: str) -> Job:
    """The dataset job a page shows; a damaged ``dataset.json`` is raised (the page says which and why)."""
    job = web_context().store.get(job_id, kind="dataset")
    problem = dataset_record_problem(job.path)
    if problem is not None:
        raise problem
    return job


def dataset_details(job: Job) -> dict:
    """Everything the dataset page shows, JSON-friendly."""
    problem = dataset_record_problem(job.path)
    if problem is not None:
        raise problem  # the page that says which file and why (digits_core.web.home)
    info = read_json(job.path / "dataset" / "dataset.json") or read_json(job.path / "dataset.json")
    report = None
    for name in ERROR_REPORTS:
        path = job.path / name
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            report = {"file": name, "text": text[:20000], "truncated": len(text) > 20000, "lines": text.count("\n")}
            break
    histograms, mean_url = None, None
    if info:
        from ..datasets import open_dataset
        from ..datasets.explore import label_histograms

        try:
            with open_dataset(job.path) as ds:
                histograms = label_histograms(ds)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a dataset.json edited by hand
            raise UnreadableRecordError(
                job.path / DATASET_FILES[0], f"it does not describe a dataset ({type(exc).__name__})"
            ) from None
        if (info.get("mean") or {}).get("file"):
            mean_url = url_for("datasets.mean_image", job_id=job.id)
    return {
        "job": job_summary(job),
        "status_history": job.status_history,
        "plugin_id": job.plugin_id,
        "form_data": job.form_data,
        "workers": job.data.get("workers"),
        "progress": read_progress(job),
        "info": info,
        "label_histograms": histograms,
        "mean_image_url": mean_url,
        "errors_report": report,
        "error": job.error,
        "log_tail": worker_log_tail(job) if job.status.value in ("Error", "Aborted") else None,
    }


@bp.get("/<job_id>/mean.png")
def mean_image(job_id: str) -> ResponseReturnValue:
    """The train stage's mean image as a PNG (404 when the dataset has none)."""
    from werkzeug.exceptions import NotFound

    from ..datasets import open_dataset
    from ..datasets.explore import mean_image_uint8
    from ..inference.images import png_bytes

    job = _dataset_job(job_id)
    if job.status is not JobStatus.DONE:
        raise NotFound(f"Dataset {job.id} is {job.status.value}: its mean image exists once Done.")
    with open_dataset(job.path) as ds:
        image = mean_image_uint8(ds)
    if image is None:
        raise NotFound(f"Dataset {job.id} has no mean image.")
    response = current_app.response_class(png_bytes(image), mimetype="image/png")
    response.cache_control.max_age = 3600  # a published dataset never changes
    return response


@bp.get("/<job_id>")
def show(job_id: str) -> ResponseReturnValue:
    """The dataset job page (refreshes its live parts through ``/datasets/ID.json``)."""
    if job_id.endswith(".json"):
        return show_json(job_id[:-5])
    from .job_deletes import dependents

    job = _dataset_job(job_id)
    details = dataset_details(job)
    from ..datasets.explore import MAX_LISTED_CLASSES  # the datasets package: imported on first use

    return render_template(
        "dataset_show.html",
        job=job,
        d=details,
        dependents=dependents(web_context().store, job.id),
        active=job.status in (JobStatus.WAITING, JobStatus.RUNNING, JobStatus.INITIALIZED),
        max_listed_classes=MAX_LISTED_CLASSES,
    )


def show_json(job_id: str) -> ResponseReturnValue:
    """The dataset job page as JSON."""
    job = _dataset_job(job_id)
    return jsonify(dataset_details(job))


def _class_filter(ds: Dataset, stage: str, label: str | None) -> tuple[int | None, np.ndarray | None]:
    """``(class id or None, record indexes or None)`` for Explore's ``?label=``: a class id of a dataset
    with class labels, masks or boxes (records whose label, a pixel or a box has that class)."""
    from ..datasets.explore import FILTERABLE_KINDS, class_indexes

    if label in (None, ""):
        return None, None
    names = list(ds.class_labels or [])
    if ds.label_kind not in FILTERABLE_KINDS:
        raise FormValidationError(
            {
                "label": [
                    f"this dataset has {ds.label_kind} labels: only datasets with "
                    "classes, masks or boxes are filtered by class"
                ]
            },
            "explore",
        )
    try:
        class_id = int(label)
    except ValueError:
        class_id = -1
    if not 0 <= class_id < max(len(names), ds.num_classes or 0):
        raise FormValidationError(
            {
                "label": [
                    f"{label!r} is not a class id of this dataset (0 to {max(len(names), ds.num_classes or 0) - 1})"
                ]
            },
            "explore",
        )
    return class_id, class_indexes(ds, stage, class_id)


def _explore_page(job: Job, stage: str, page: int, per_page: int, label_filter: str | None = None) -> dict:
    from ..datasets import open_dataset
    from ..datasets.explore import label_histograms
    from ..inference.images import png_data_uri

    ds = open_dataset(job.path)
    stages = list(ds.stages)
    if stage not in stages:
        raise FormValidationError({"stage": [f"choose one of {', '.join(stages)}"]}, "explore")
    class_id, selected = _class_filter(ds, stage, label_filter)
    count = ds.count(stage) if selected is None else len(selected)
    pages = max(1, -(-count // per_page))
    page = min(max(page, 0), pages - 1)
    start, stop = page * per_page, min(count, (page + 1) * per_page)
    items = []
    if stop > start:
        if selected is None:
            indexes = list(range(start, stop))
            features, labels = ds.read_batch(stage, start, stop)
        else:
            indexes = [int(i) for i in selected[start:stop]]
            features, labels = ds.read_indexes(stage, indexes)
        class_labels = list(ds.class_labels or [])
        palette = ds.color_palette
        for index, feature, label in zip(indexes, features, labels):
            item = {"index": index, "image": png_data_uri(feature, max_size=128)}
            label_value = label.tolist() if hasattr(label, "tolist") else label
            if ds.label_kind == "mask":
                item["mask"] = png_data_uri(_colorize(label, palette), max_size=128)
                item["label"] = _mask_caption(label, class_labels)
            elif ds.label_kind == "boxes":
                from ..datasets.explore import boxes_caption, image_with_boxes

                item["image"] = png_data_uri(image_with_boxes(feature, label, palette, class_labels), max_size=256)
                item["label"] = boxes_caption(label, class_labels)
            elif ds.label_kind == "image":  # image-to-image target, float in [0, 1]: shown beside its input
                from ..datasets.explore import target_to_uint8

                item["mask"] = png_data_uri(target_to_uint8(label), max_size=128)
                item["label"] = "input, target"
            elif ds.label_kind == "class":
                idx = int(label_value if not isinstance(label_value, list) else label_value[0])
                item["label"] = class_labels[idx] if 0 <= idx < len(class_labels) else str(idx)
            else:
                item["label"] = ", ".join(
                    f"{v:.3g}" for v in (label_value if isinstance(label_value, list) else [label_value])
                )
            items.append(item)
    histograms = label_histograms(ds, keep=class_id) or {}  # the most frequent classes (and the chosen one)
    classes = [
        {"id": c["id"], "name": c["name"], "count": c["counts"].get(stage, 0)} for c in histograms.get("classes", [])
    ]
    return {
        "stage": stage,
        "stages": stages,
        "page": page,
        "pages": pages,
        "per_page": per_page,
        "count": count,
        "items": items,
        "label": class_id,
        "classes": classes,
        "class_count": histograms.get("class_count", len(classes)),
        "class_unit": histograms.get("unit"),
    }


def _mask_caption(mask: np.ndarray, class_labels: Sequence[str]) -> str:
    """``"left ventricle 1.3%"``: the share of pixels of each non-background class."""
    import numpy as np

    mask = np.asarray(mask)
    values, counts = np.unique(mask, return_counts=True)
    parts = []
    for value, count in zip(values.tolist(), counts.tolist()):
        if value == 0:
            continue
        name = class_labels[value] if 0 <= value < len(class_labels) else f"class {value}"
        parts.append(f"{name} {100.0 * count / mask.size:.1f}%")
    return ", ".join(parts) or "background only"


def _colorize(mask: np.ndarray, palette: Sequence[Sequence[int]] | None) -> np.ndarray:
    import numpy as np

    mask = np.asarray(mask)
    if mask.ndim == 3:
        mask = mask[:, :, 0]
    mask = mask.astype(np.int64)
    if palette:
        table = np.array(palette, dtype=np.uint8).reshape(-1, 3)
    else:
        table = np.array([[0, 0, 0], [255, 64, 64], [64, 200, 64], [64, 96, 255], [255, 200, 0]], dtype=np.uint8)
    return table[np.clip(mask, 0, len(table) - 1)]


@bp.get("/<job_id>/explore")
def explore(job_id: str) -> ResponseReturnValue:
    """A paged gallery of a stage's samples with their labels.

    Query: ``stage``, ``page``, ``per_page``, ``label`` (a class id: only that
    class's records, classification datasets), ``format=json``.
    """
    job = _dataset_job(job_id)
    if job.status is not JobStatus.DONE:
        raise DigitsError(f"Dataset {job.id} is {job.status.value}; it can be explored once Done.")
    stage = request.args.get("stage", "train")
    page = request.args.get("page", 0, type=int)
    from .volume_explore import is_volume_job, volume_explore  # volume datasets only (issue 29)

    if is_volume_job(job):  # cases scrolled slice by slice with the volume view (issue 29)
        return volume_explore(job, stage, page)
    per_page = min(max(request.args.get("per_page", 24, type=int), 1), 200)
    data = _explore_page(job, stage, page, per_page, request.args.get("label"))
    if request.args.get("format") == "json":
        return jsonify(data)
    return render_template("dataset_explore.html", job=job, e=data)


@bp.post("/<job_id>/notes")
def notes(job_id: str) -> ResponseReturnValue:
    """Save the job's notes (the field on its page)."""
    return save_notes(job_id, "dataset")


@bp.post("/<job_id>/delete")
def delete(job_id: str) -> ResponseReturnValue:
    """Delete a dataset job (aborting it first if it runs); with ``cascade=1`` the models trained on it too."""
    from .job_deletes import DatasetInUseError, delete_job

    try:
        deleted = delete_job(job_id, "dataset", cascade=request.form.get("cascade") == "1")
    except DatasetInUseError as exc:
        flash(str(exc), "bad")
        return redirect(url_for("datasets.show", job_id=exc.dataset.id))
    models = len(deleted) - 1
    flash(
        "Dataset deleted" + (f", and the {models} model{'s' if models != 1 else ''} trained on it." if models else "."),
        "ok",
    )
    return redirect(url_for("home.index"))


@bp.post("/<job_id>/abort")
def abort_job(job_id: str) -> ResponseReturnValue:
    """Abort a waiting or running dataset job."""
    job = web_context().store.get(job_id, kind="dataset")
    web_context().scheduler.abort(job.id)
    return redirect(url_for("datasets.show", job_id=job.id))
