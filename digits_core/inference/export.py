"""``export_model()``: a trained model as a self-describing ``.tar.gz``.

Archive layout (one top folder, ``<model id>-epoch-<N>/``)::

    saved_model/     TensorFlow SavedModel (format "savedmodel", the default)
    model.keras      the Keras snapshot (format "keras")
    info.json        model and dataset metadata, preprocessing, signature description
    labels.txt       class names, one per line (when the model has classes)
    mean.npy         float32 H×W×C mean image (when mean subtraction is used)
    network.py       the custom network file (when the model was trained from one)

The SavedModel's ``serving_default`` signature takes the *raw* image
tensor ``images``: ``[N, h, w, C]`` of the dataset's dtype (e.g. uint8),
any ``h × w``. Inside it: a bilinear resize (antialiased, aspect ratio
ignored, i.e. ``squash``) to the dataset's ``H × W`` when the size differs,
the cast to float32, mean subtraction, scaling and centre crop exactly as
the training engine's preprocessing, then the network. It returns
``{"outputs": ...}`` (class probabilities ``[N, K]`` or per-pixel
probabilities ``[N, H', W', K]``). Images already at the dataset size give
exactly what ``digits infer`` gives; other sizes are resized within 1.0
intensity level per pixel of :func:`digits_core.resize.resize_image`'s
``squash`` (tested in ``tests/test_preprocessing_parity.py``). Load it with plain TensorFlow::

    import tensorflow as tf
    serve = tf.saved_model.load("saved_model").signatures["serving_default"]
    probabilities = serve(images=tf.constant(batch_uint8))["outputs"]

Detection models (task ``detection``) export a different
``serving_default``: it takes ``encoded``, a ``[N]`` string tensor of PNG
or JPEG files of any size, decodes and resizes each (bilinear, ``squash``)
to the network size, runs the network and its in-graph top-K decoding, and
returns ``boxes`` ``[N, K, 4]`` (``x1, y1, x2, y2`` in each *input* image's
pixels), ``scores`` ``[N, K]`` and ``classes`` ``[N, K]`` (int32 class ids,
names in ``labels.txt``), best first; K = 100, filter by score::

    serve = tf.saved_model.load("saved_model").signatures["serving_default"]
    out = serve(encoded=tf.constant([open("street.png", "rb").read()]))

The ``keras`` format holds the bare network instead: apply the
preprocessing described in ``info.json`` (``(x - mean) * scale``, then the
centre crop) yourself.

An export is also kept in the model job's ``export/`` folder, where the web
UI's download serves it from.
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
from ..errors import InferenceError
from .model import InferenceModel, load_inference_model

FORMATS = ("savedmodel", "keras")
EXPORT_DIR = "export"


def _epoch_tag(epoch) -> str:
    return f"{epoch:03d}" if isinstance(epoch, int) else f"{epoch:g}"


def _info(loaded: InferenceModel, fmt: str) -> dict:
    prep = loaded.preprocessing
    h, w, c = loaded.feature_shape
    return {
        "format": fmt,
        "digits_core_version": __version__,
        "model": loaded.describe(),
        "task": loaded.task,
        "network": loaded.info.get("network"),
        "network_source": loaded.info.get("network_source"),
        "class_labels": loaded.class_labels,
        "color_palette": loaded.info.get("color_palette") or loaded.dataset.color_palette,
        "dataset": {**loaded.dataset.to_dict(), "resize_mode": loaded.dataset.resize_mode},
        "preprocessing": {**prep.to_dict(), "mean_file": "mean.npy" if prep.mean is not None else None,
                          "order": "cast to float32, subtract mean, multiply by scale, centre crop"},
        "signature": _detection_signature(loaded) if loaded.task == "detection" and fmt == "savedmodel" else {
            "name": "serving_default",
            "input": {"name": "images", "shape": [None, None, None, c], "dtype": loaded.feature_dtype.name,
                      "resized_to": [h, w], "resize": "bilinear, antialiased, aspect ratio ignored (squash)"},
            "output": {"name": "outputs", "shape": [None, *loaded.model.output_shape[1:]]},
        } if fmt == "savedmodel" else None,
        "options": loaded.info.get("options"),
    }


def _detection_signature(loaded: InferenceModel) -> dict:
    h, w, c = loaded.feature_shape
    return {"name": "serving_default",
            "input": {"name": "encoded", "shape": [None], "dtype": "string",
                      "content": "PNG or JPEG file bytes, any size", "resized_to": [h, w], "resize": "bilinear (squash)"},
            "outputs": {"boxes": {"shape": [None, 100, 4], "coordinates": "x1, y1, x2, y2 in input image pixels"},
                        "scores": {"shape": [None, 100]}, "classes": {"shape": [None, 100], "dtype": "int32"}}}


def _detection_endpoint(loaded: InferenceModel):
    """``serve(encoded)`` for a detector: decode, resize, detect, boxes back in each input's pixels."""
    import tensorflow as tf

    h, w, c = loaded.feature_shape
    dtype = tf.as_dtype(loaded.feature_dtype)

    def prepare(data):
        image = tf.io.decode_image(data, channels=c, dtype=dtype, expand_animations=False)
        size = tf.cast(tf.shape(image)[:2], tf.float32)
        image = tf.image.resize(tf.cast(image, tf.float32), (h, w), method="bilinear")
        return image, size

    def serve(encoded):
        images, sizes = tf.map_fn(prepare, encoded, fn_output_signature=(
            tf.TensorSpec([h, w, c], tf.float32), tf.TensorSpec([2], tf.float32)))
        rows = loaded.serve(images)
        scale = tf.stack([sizes[:, 1] / w, sizes[:, 0] / h, sizes[:, 1] / w, sizes[:, 0] / h], axis=-1)
        return {"boxes": rows[..., 2:] * scale[:, None, :], "scores": rows[..., 1],
                "classes": tf.cast(rows[..., 0], tf.int32)}

    return serve, [tf.TensorSpec([None], tf.string, name="encoded")]


def _write_savedmodel(loaded: InferenceModel, folder: Path) -> None:
    import keras
    import tensorflow as tf

    if loaded.task == "detection":
        archive = keras.export.ExportArchive()
        archive.track(loaded.model)
        detect, signature = _detection_endpoint(loaded)
        archive.add_endpoint("serving_default", detect, input_signature=signature)
        archive.write_out(str(folder / "saved_model"), verbose=False)
        return
    h, w, c = loaded.feature_shape
    dtype = tf.as_dtype(loaded.feature_dtype)

    def serve(images):
        size = tf.shape(images)[1:3]
        same = tf.reduce_all(tf.equal(size, tf.constant([h, w], tf.int32)))
        x = tf.cond(same, lambda: tf.cast(images, tf.float32),
                    lambda: tf.image.resize(tf.cast(images, tf.float32), (h, w), method="bilinear", antialias=True))
        x = tf.ensure_shape(x, [None, h, w, c])
        return {"outputs": loaded.serve(x)}

    archive = keras.export.ExportArchive()
    archive.track(loaded.model)
    archive.add_endpoint("serving_default", serve,
                         input_signature=[tf.TensorSpec([None, None, None, c], dtype, name="images")])
    archive.write_out(str(folder / "saved_model"), verbose=False)


def build_export_folder(loaded: InferenceModel, fmt: str, folder: Path) -> Path:
    """Write the export files of ``loaded`` into ``folder`` (created)."""
    folder.mkdir(parents=True)
    if fmt == "savedmodel":
        _write_savedmodel(loaded, folder)
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
    (folder / "info.json").write_text(json.dumps(_info(loaded, fmt), indent=2, default=str) + "\n", encoding="utf-8")
    return folder


def export_model(model_id, out: str | os.PathLike, *, epoch: int | float | None = None, format: str = "savedmodel",
                 jobs_dir=None) -> Path:
    """Export one epoch of a trained model as a ``.tar.gz`` (see the module docstring for its content).

    Args:
        model_id: Model job id, unique prefix or job folder.
        out: The archive to write (``.tar.gz``); its folder must exist.
        epoch: Snapshot epoch (default: the last).
        format: ``"savedmodel"`` (serving signature with preprocessing inside) or ``"keras"``.
        jobs_dir: The jobs folder.

    Returns:
        The path of the archive.

    Raises:
        InferenceError: Unknown format or unwritable output.
        JobNotFoundError: No such model.
    """
    if format not in FORMATS:
        raise InferenceError(f'Unknown export format "{format}"; choose one of {", ".join(FORMATS)}.')
    out = Path(out).expanduser()
    if not out.parent.is_dir():
        raise InferenceError(f"Cannot write {out}: folder {out.parent} does not exist.")
    loaded = load_inference_model(model_id, epoch=epoch, jobs_dir=jobs_dir)
    name = f"{loaded.id}-epoch-{_epoch_tag(loaded.epoch)}"
    cache_root = Path(loaded.job.path) / EXPORT_DIR
    cached = cache_root / f"{name}-{format}"
    if not (cached / "info.json").is_file() or cached.stat().st_mtime < loaded.snapshot.stat().st_mtime:
        cache_root.mkdir(exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".export-", dir=cache_root))
        try:
            build_export_folder(loaded, format, staging / name)
            if cached.exists():
                shutil.rmtree(cached, ignore_errors=True)
            try:
                os.replace(staging / name, cached)
            except OSError:
                if not (cached / "info.json").is_file():  # not another export finishing first
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    # A name of its own per call: two downloads of one epoch at once must not write one temporary file.
    tmp = out.with_name(f".{out.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        with tarfile.open(tmp, "w:gz") as tar:
            tar.add(cached, arcname=name)
        os.replace(tmp, out)
    except OSError as exc:
        raise InferenceError(f"Cannot write {out}: {exc}") from exc
    finally:
        if tmp.exists():
            tmp.unlink()
    return out
