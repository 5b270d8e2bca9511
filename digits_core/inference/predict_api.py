"""TF Serving's REST predict request → ``digits infer`` → TF Serving's answer.

Request bodies (TF Serving's REST API): the row format
``{"instances": [IMAGE, ...]}`` or the columnar ``{"inputs": [IMAGE, ...]}``
(also ``{"inputs": {"images": [...]}}`` and instances of the form
``{"images": IMAGE}``), where an ``IMAGE`` is ``{"b64": "<base64 PNG/JPEG
file>"}`` or a nested list ``H × W × C`` (or ``H × W``) of numbers. Other
formats (GIF, BMP, TIFF, WebP, ...) are refused, naming the two it takes;
every image's declared size is checked against the per-image and per-request
pixel limits (:mod:`digits_core.limits`) before any is decoded.

Each image goes through ``digits infer`` (the dataset's preparation, the
warm model cache); the answer has what the exported models return
(:mod:`~digits_core.inference.export_signature`): ``{"predictions": [...]}``
(row format; one object per instance) or ``{"outputs": {...}}`` (columnar;
one list per output name). By task: classification ``outputs``
(probabilities), ``classes`` and ``scores`` (top 5); segmentation
``outputs`` and ``classes`` (argmax map); regression and image-to-image
``outputs``; detection ``boxes`` (input pixels), ``scores`` and ``classes``
above the score threshold.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import numpy as np

from ..errors import InferenceError
from ..limits import PixelBudget, check_image_size, current_pixel_budget, image_header

#: Instances one request may carry.
MAX_INSTANCES = 256
#: Formats a ``"b64"`` image may be in (Pillow's names): what the docs promise, nothing more.
PREDICT_FORMATS = ("PNG", "JPEG")


def _unwrap(value: Any) -> Any:
    return value["images"] if isinstance(value, dict) and set(value) == {"images"} else value


def _b64_file(value: Any, index: int, budget: PixelBudget) -> bytes:
    """The image file of a ``{"b64": ...}`` instance, its format and declared size checked (nothing decoded)."""
    try:
        data = base64.b64decode(str(value["b64"]), validate=True)
        image_format, width, height = image_header(data)
    except (binascii.Error, ValueError) as exc:
        raise InferenceError(f'instances[{index}]: "b64" is not a base64 PNG or JPEG file ({exc}).') from None
    if image_format not in PREDICT_FORMATS:
        raise InferenceError(
            f'instances[{index}]: "b64" holds a {image_format or "unknown"} image; predict takes '
            f"{' or '.join(PREDICT_FORMATS)} files only. Convert it, or send the pixels as a nested list."
        )
    check_image_size(width, height, f"instances[{index}]", budget)
    return data


def _nested_size(value: Any) -> tuple[int, int]:
    """Declared ``(width, height)`` of a nested-list image from its first rows (the list is checked when read)."""
    height = len(value) if isinstance(value, list) else 0
    first = value[0] if height else None
    return (len(first) if isinstance(first, list) else 1), height


def _values(body: Any) -> tuple[list, bool]:
    if not isinstance(body, dict) or ("instances" in body) == ("inputs" in body):
        raise InferenceError('A predict request is a JSON object with "instances" (a list) or "inputs".')
    columnar = "inputs" in body
    values = body["inputs"] if columnar else body["instances"]
    if isinstance(values, dict):
        if set(values) != {"images"}:
            raise InferenceError('"inputs" as an object has one key, "images" (the export\'s input name).')
        values = values["images"]
    if not isinstance(values, list) or not values:
        raise InferenceError("The request has no images: give a non-empty list.")
    if len(values) > MAX_INSTANCES:
        raise InferenceError(f"A request carries at most {MAX_INSTANCES} images, not {len(values)}.")
    return [_unwrap(v) for v in values], columnar


def check_predict_body(body: Any, budget: PixelBudget | None = None) -> list[bytes | None]:
    """Check a predict body before any image in it is decoded: its shape, formats, and declared sizes.

    Every ``"b64"`` image's header is read (PNG or JPEG only) and its width × height counted against the
    per-image limit and the request's pixel budget (:mod:`digits_core.limits`); a nested list counts its
    rows × columns. The web server calls this before it queues the request, so an oversized request is
    answered at once (HTTP 413) and never waits for, or occupies, the inference worker.

    Args:
        body: The request's JSON.
        budget: The request's pixel budget (default: a fresh one of ``DIGITS_MAX_REQUEST_PIXELS``).

    Returns:
        Per instance, its image file's bytes (``"b64"``) or ``None`` (a nested list).

    Raises:
        InputTooLargeError: An image, or all of them together, declare more pixels than a limit allows.
        InferenceError: Not a predict body, or an image that is not a base64 PNG or JPEG file.
    """
    values, _ = _values(body)
    budget = budget if budget is not None else current_pixel_budget() or PixelBudget()
    files: list[bytes | None] = []
    for index, value in enumerate(values):
        if isinstance(value, dict) and "b64" in value:
            files.append(_b64_file(value, index, budget))
        else:
            check_image_size(*_nested_size(value), f"instances[{index}]", budget)
            files.append(None)
    return files


def _image(value: Any, data: bytes | None, index: int) -> np.ndarray:
    if data is not None:
        from ..resize import image_to_array, open_image

        try:
            return image_to_array(open_image(data), None)
        except ValueError as exc:
            raise InferenceError(f'instances[{index}]: "b64" is not a base64 PNG or JPEG file ({exc}).') from None
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InferenceError(
            f'instances[{index}]: expected {{"b64": ...}} or a nested list H x W x C of numbers.'
        ) from None
    if array.ndim == 2:
        array = array[:, :, None]
    if array.ndim != 3 or min(array.shape) < 1:
        raise InferenceError(f"instances[{index}]: an image is H x W or H x W x C, not shape {list(array.shape)}.")
    return array


def parse_instances(body: Any) -> tuple[list[np.ndarray], bool]:
    """The request's images and whether it used the columnar (``inputs``) format.

    :func:`check_predict_body` runs first: no image is decoded unless every one of them fits.

    Raises:
        InputTooLargeError: See :func:`check_predict_body`.
        InferenceError: Not a TF Serving predict body; the message says what is wrong.
    """
    files = check_predict_body(body)
    values, columnar = _values(body)
    return [_image(v, data, i) for i, (v, data) in enumerate(zip(values, files))], columnar


def _prediction(sample: Any, task: str) -> dict:
    output = np.asarray(sample.output)
    if task == "detection":
        dets = sample.detections or []
        return {
            "boxes": [d["box"] for d in dets],
            "scores": [d["score"] for d in dets],
            "classes": [d["class_id"] for d in dets],
        }
    if task == "classification":
        top = np.argsort(-output, kind="stable")[:5]
        return {"outputs": output.tolist(), "classes": top.tolist(), "scores": output[top].tolist()}
    if task == "segmentation":
        return {"outputs": output.tolist(), "classes": np.argmax(output, axis=-1).tolist()}
    if task == "multilabel":  # 1 where a label reaches its tuned threshold, as the exports' "labels" output
        chosen = np.zeros(output.size, np.int32)
        chosen[[item["index"] for item in sample.labels or []]] = 1
        return {"outputs": output.tolist(), "labels": chosen.tolist()}
    return {"outputs": output.tolist()}


def predict(model_id: str, body: Any, *, epoch: float | None = None, jobs_dir: Any = None) -> dict:
    """Answer one TF Serving predict request with ``digits infer`` (see the module docstring).

    Raises:
        InferenceError: A malformed body or an image the model cannot take.
    """
    from ..resize import cast_to
    from .model import load_inference_model
    from .runner import infer

    images, columnar = parse_instances(body)
    dtype = load_inference_model(model_id, epoch=epoch, jobs_dir=jobs_dir).feature_dtype
    # Nested lists hold the dataset dtype's values (as an image file would): prepared like one, not as float data.
    images = [cast_to(a, dtype) if a.dtype == np.float64 else a for a in images]
    result = infer(model_id, [(str(i), a) for i, a in enumerate(images)], epoch=epoch, jobs_dir=jobs_dir, max_errors=0)
    rows = [_prediction(s, result.model.task) for s in result.samples]
    if columnar:
        return {"outputs": {name: [row[name] for row in rows] for name in rows[0]}}
    return {"predictions": rows}
