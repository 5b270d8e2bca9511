"""``export_model()``: a trained model as a self-describing ``.tar.gz``, with its parity report.

Archive layout (one top folder, ``<model id>-epoch-<N>/``)::

    serving/<id>/<version>/  TensorFlow SavedModel in TF Serving's layout (format "savedmodel", the default)
    saved_model/             the same SavedModel again, hard-linked (stored once)
    model.onnx               ONNX (format "onnx"; run it with onnxruntime)
    model.tflite             TFLite (format "tflite"; float32, or quantize "dynamic" / "float16")
    model.keras              the bare Keras network (format "keras")
    parity.json              the export in its own runtime against ``digits infer`` (see export_parity)
    info.json                model and dataset metadata, preprocessing, signature description
    labels.txt               class names, one per line (when the model has classes)
    mean.npy                 float32 H×W×C mean image (when mean subtraction is used)
    network.py               the custom network file (when the model was trained from one)

Every format but ``keras`` holds one graph (:mod:`~digits_core.inference.export_signature`):
raw images ``images`` ``[N, h, w, C]`` of the dataset's dtype and any size
in; exactly the dataset's resize mode (``digits_core.resize``; fill and
half-crop padded with mid-grey, as ``digits infer`` pads), mean
subtraction, scale, centre crop, the network and the task's
post-processing inside (top-N, argmax, boxes in input pixels above the
score threshold). Load the SavedModel with plain TensorFlow::

    import tensorflow as tf
    serve = tf.saved_model.load("saved_model").signatures["serving_default"]
    out = serve(images=tf.constant(batch_uint8))      # {"outputs", "classes", "scores"} for a classifier

The ``keras`` format holds the bare network instead: apply the
preprocessing described in ``info.json`` (``(x - mean) * scale``, then the
centre crop) yourself, on images prepared as the dataset's were.

Each export's parity report is written into the archive; one below its
threshold fails the export (naming the worst input) unless
``allow_mismatch``. An export is also kept in the model job's ``export/``
folder, where the web UI's download serves it from.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import tempfile
import uuid
from pathlib import Path

import numpy as np

from .. import __version__
from ..engine.jobio import model_folder, read_model_info
from ..engine.volume_infer import is_volume_model
from ..errors import InferenceError
from ..faults import raise_if_disk_full, raise_if_stop_requested
from .export_formats import serving_version, write_onnx, write_savedmodel, write_tflite
from .export_parity import DEFAULT_SAMPLE, parity_report
from .export_volume import build_volume_export, check_volume_format
from .model import InferenceModel, load_inference_model

FORMATS = ("savedmodel", "onnx", "tflite", "keras")
EXPORT_DIR = "export"
PARITY_FILE = "parity.json"


def _epoch_tag(epoch) -> str:
    if isinstance(epoch, float) and epoch.is_integer():
        epoch = int(epoch)
    return f"{epoch:03d}" if isinstance(epoch, int) else f"{epoch:g}"


def export_name(
    model_id: str,
    epoch: int | float,
    format: str = "savedmodel",
    quantize: str | None = None,
    channels_in: int | None = None,
) -> str:
    """The name of one export of a model's epoch: its folder under the job's ``export/`` (also the web UI's archive).

    ``<model id>-epoch-<NNN>-<format>[-<quantize>][-<C>ch]``; the archive's top folder is the part before the format.
    """
    variant = "-".join(str(v) for v in (format, quantize, channels_in and f"{channels_in}ch") if v)
    return f"{model_id}-epoch-{_epoch_tag(epoch)}-{variant}"


def _info(loaded: InferenceModel, fmt: str, channels_in: int | None, quantize: str | None) -> dict:
    from .export_signature import describe_signature

    prep = loaded.preprocessing
    return {
        "format": fmt,
        "quantize": quantize,
        "digits_core_version": __version__,
        "model": loaded.describe(),
        "task": loaded.task,
        "network": loaded.info.get("network"),
        "network_source": loaded.info.get("network_source"),
        "class_labels": loaded.class_labels,
        "color_palette": loaded.info.get("color_palette") or loaded.dataset.color_palette,
        "dataset": {**loaded.dataset.to_dict(), "resize_mode": loaded.dataset.resize_mode},
        "preprocessing": {
            **prep.to_dict(),
            "mean_file": "mean.npy" if prep.mean is not None else None,
            "order": "cast to float32, subtract mean, multiply by scale, centre crop",
        },
        "signature": describe_signature(loaded, channels_in) if fmt != "keras" else None,
        "tf_serving": {"base_path": f"serving/{loaded.id}", "version": serving_version(loaded.epoch)}
        if fmt == "savedmodel"
        else None,
        "options": loaded.info.get("options"),
        "thresholds": _thresholds(loaded),
    }


def _thresholds(loaded: InferenceModel) -> list[float] | None:
    """A multi-label model's per-label thresholds (what its ``labels`` output applies), else ``None``."""
    if loaded.task != "multilabel":
        return None
    from .multilabel import label_thresholds  # only multi-label models read their thresholds

    return label_thresholds(loaded)


def build_export_folder(
    loaded: InferenceModel,
    fmt: str,
    folder: Path,
    *,
    quantize: str | None = None,
    channels_in: int | None = None,
    parity_sample: int | None = DEFAULT_SAMPLE,
) -> Path:
    """Write the export files of ``loaded`` into ``folder`` (created), and ``parity.json`` unless ``parity_sample`` is None."""
    folder.mkdir(parents=True)
    if fmt == "savedmodel":
        write_savedmodel(loaded, folder, channels_in)
    elif fmt == "onnx":
        write_onnx(loaded, folder / "model.onnx", channels_in)
    elif fmt == "tflite":
        write_tflite(loaded, folder / "model.tflite", channels_in, quantize)
    elif (loaded.info.get("options") or {}).get("precision", "float32") != "float32":
        loaded.model.save(folder / "model.keras")  # a bfloat16 run's network as loaded: float32 (engine.precision)
    else:
        shutil.copy2(loaded.snapshot, folder / "model.keras")
    prep = loaded.preprocessing
    if prep.mean is not None:
        np.save(folder / "mean.npy", prep.mean.astype(np.float32))
    if loaded.class_labels:
        (folder / "labels.txt").write_text("\n".join(str(c) for c in loaded.class_labels) + "\n", encoding="utf-8")
    network_file = Path(loaded.job.path) / "network.py"
    if network_file.is_file():
        shutil.copy2(network_file, folder / "network.py")
    (folder / "info.json").write_text(
        json.dumps(_info(loaded, fmt, channels_in, quantize), indent=2, default=str) + "\n", encoding="utf-8"
    )
    if parity_sample and (channels_in in (None, loaded.feature_shape[2])):
        report = parity_report(loaded, fmt, folder, sample=parity_sample, quantized=bool(quantize))
        (folder / PARITY_FILE).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return folder


def read_parity(folder: Path) -> dict | None:
    """The ``parity.json`` of an export folder (``None`` when there is none)."""
    path = folder / PARITY_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _check_parity(report: dict | None, allow_mismatch: bool) -> None:
    if report is None or report.get("passed") is not False or allow_mismatch:
        return
    figures = ", ".join(
        f"{k} {report[k]:.4g}"
        for k in ("top1_agreement", "mask_iou", "boxes_matched", "max_abs_diff", "max_score_diff", "tolerance")
        if isinstance(report.get(k), (int, float))
    )
    failed = ", ".join(report.get("failed_checks") or [])
    reason = f" {report['reason'][0].upper()}{report['reason'][1:]}." if report.get("reason") else ""
    raise InferenceError(
        f"The {report.get('format')} export does not match digits infer ({figures}"
        f"{'; failed: ' + failed if failed else ''}); worst input: {report.get('worst_input')}.{reason} "
        "Export with --allow-mismatch to keep it anyway."
    )


def export_model(
    model_id,
    out: str | os.PathLike,
    *,
    epoch: int | float | None = None,
    format: str = "savedmodel",
    quantize: str | None = None,
    channels_in: int | None = None,
    parity_sample: int | None = DEFAULT_SAMPLE,
    allow_mismatch: bool = False,
    jobs_dir=None,
) -> Path:
    """Export one epoch of a trained model as a ``.tar.gz`` (see the module docstring for its content).

    Args:
        model_id: Model job id, unique prefix or job folder.
        out: The archive to write (``.tar.gz``); its folder must exist.
        epoch: Snapshot epoch (default: the last).
        format: ``"savedmodel"``, ``"onnx"``, ``"tflite"`` (preprocessing and post-processing inside) or ``"keras"``.
        quantize: TFLite only: ``"dynamic"`` (int8 weights) or ``"float16"``; default float32.
        channels_in: Channels of the raw input images when they differ from the dataset's (1 ↔ 3, converted inside;
            no parity report then: the dataset has no such images).
        parity_sample: Validation images in the parity report (``None``: no report).
        allow_mismatch: Keep an export whose parity report fails.
        jobs_dir: The jobs folder.

    Returns:
        The path of the archive.

    Raises:
        InferenceError: Unknown format, a converter that cannot convert an op, a failed parity report, unwritable output.
        DiskFullError: The disk (or quota) under ``out``'s folder is full; nothing half-written is left.
        JobNotFoundError: No such model.
    """
    if format not in FORMATS:
        raise InferenceError(f'Unknown export format "{format}"; choose one of {", ".join(FORMATS)}.')
    if quantize and format != "tflite":
        raise InferenceError(f"--quantize applies to the tflite format, not {format}.")
    out = Path(out).expanduser()
    if not out.parent.is_dir():
        raise InferenceError(f"Cannot write {out}: folder {out.parent} does not exist.")
    try:
        if is_volume_model(model_id, jobs_dir):
            return _export_volume(model_id, out, format, channels_in, parity_sample, allow_mismatch, jobs_dir)
        return _export_epoch(
            model_id, out, epoch, format, quantize, channels_in, parity_sample, allow_mismatch, jobs_dir
        )
    except Exception as exc:
        # TensorFlow's SaveV2 says ResourceExhaustedError, the archive an OSError: both are a full disk, said so
        raise_if_disk_full(exc, out.parent, action="The export could not finish", again="export again")
        raise


def _export_epoch(
    model_id,
    out: Path,
    epoch: int | float | None,
    format: str,
    quantize: str | None,
    channels_in: int | None,
    parity_sample: int | None,
    allow_mismatch: bool,
    jobs_dir,
) -> Path:
    """``export_model`` of a 2-D model's snapshot (half-built folders are removed by :func:`_build_cached`)."""
    loaded = load_inference_model(model_id, epoch=epoch, jobs_dir=jobs_dir)
    name = f"{loaded.id}-epoch-{_epoch_tag(loaded.epoch)}"
    cached = Path(loaded.job.path) / EXPORT_DIR / export_name(loaded.id, loaded.epoch, format, quantize, channels_in)
    fresh = (cached / "info.json").is_file() and cached.stat().st_mtime >= loaded.snapshot.stat().st_mtime
    if fresh and parity_sample and read_parity(cached) is None and channels_in in (None, loaded.feature_shape[2]):
        fresh = False
    if not fresh:
        _build_cached(
            cached,
            name,
            lambda folder: build_export_folder(
                loaded, format, folder, quantize=quantize, channels_in=channels_in, parity_sample=parity_sample
            ),
            allow_mismatch,
        )
    _check_parity(read_parity(cached), allow_mismatch)
    return _write_archive(cached, name, out)


def _export_volume(
    model_id, out: Path, fmt: str, channels_in: int | None, parity_sample: int | None, allow_mismatch: bool, jobs_dir
) -> Path:
    """``export_model`` of a volume model (:mod:`~digits_core.inference.export_volume`)."""
    folder = model_folder(model_id, jobs_dir)
    info = read_model_info(folder)
    check_volume_format(fmt, folder.name, str(info.get("network")), channels_in)
    epochs = info.get("volume", {}).get("epochs", 1)
    name = f"{folder.name}-epoch-{_epoch_tag(epochs)}"
    cached = folder / EXPORT_DIR / export_name(folder.name, epochs, fmt)
    trained = folder / info.get("model_file", "model.keras")
    fresh = (cached / "info.json").is_file() and trained.is_file() and cached.stat().st_mtime >= trained.stat().st_mtime
    if not fresh or (parity_sample and fmt == "savedmodel" and read_parity(cached) is None):
        _build_cached(
            cached,
            name,
            lambda staged: build_volume_export(folder, fmt, staged, parity_sample=parity_sample, jobs_dir=jobs_dir),
            allow_mismatch,
        )
    _check_parity(read_parity(cached), allow_mismatch)
    return _write_archive(cached, name, out)


def _build_cached(cached: Path, name: str, build, allow_mismatch: bool) -> None:
    """Build an export with ``build(folder)`` in a hidden staging folder and move it to ``cached`` (replacing it).

    A failed parity report (unless ``allow_mismatch``) is raised before anything is published.
    """
    cached.parent.mkdir(exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".export-", dir=cached.parent))
    try:
        built = build(staging / name)
        _check_parity(read_parity(built), allow_mismatch)
        raise_if_stop_requested()  # stopped mid-build, the interrupt lost in TensorFlow: publish nothing
        if cached.exists():
            shutil.rmtree(cached, ignore_errors=True)
        try:
            os.replace(staging / name, cached)
        except OSError:
            if not (cached / "info.json").is_file():  # not another export finishing first
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _write_archive(cached: Path, name: str, out: Path) -> Path:
    # A name of its own per call: two downloads of one epoch at once must not write one temporary file.
    tmp = out.with_name(f".{out.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        with tarfile.open(tmp, "w:gz") as tar:
            tar.add(cached, arcname=name)
        raise_if_stop_requested()
        os.replace(tmp, out)
    except OSError as exc:
        raise InferenceError(f"Cannot write {out}: {exc}") from exc
    finally:
        if tmp.exists():
            tmp.unlink()
    return out
