"""The parity report of an export: its own runtime against ``digits infer`` on the same images.

Inputs: the first ``sample`` (default 64) validation images of the model's
dataset as stored, and each of them again stretched to an odd size
(``H + 5 × W + 3``), so the export's resize mode runs too. The export runs
in a subprocess that imports only its runtime
(:mod:`~digits_core.inference.parity_runtime`); ``digits infer``
(:func:`digits_core.inference.infer`) runs the same raw arrays here.

The report (``parity.json`` in the archive) has ``max_abs_diff`` and
``mean_abs_diff`` of the outputs, and by task ``top1_agreement``
(classification), ``mask_iou`` (segmentation: mean over inputs of the mean
IoU over the classes present), ``label_agreement`` (multi-label: the share of
input × label decisions where the export's ``labels`` output, thresholds
applied, equals ``digits infer``'s labels), ``boxes_matched`` (detection: the share of
``digits infer``'s boxes that the export finds with the same class at IoU
≥ 0.9, with ``max_score_diff`` over those pairs) and ``worst_input``.

It passes when every bound holds, and names the ones that failed in
``failed_checks``:

* the outputs: ``max_abs_diff ≤ tolerance`` for every task (for detection:
  ``max_score_diff``), where ``tolerance = F × (1 + max |digits infer
  output|)`` with ``F`` = ``1e-3`` (savedmodel, onnx, keras: the same
  float64 preparation graph), ``1e-2`` (tflite, whose preparation runs in
  float32) or ``5e-2`` (quantized tflite); the report states ``tolerance``
  and its ``tolerance_rule``. Agreeing on the top class is not enough: an
  export whose probabilities drift by 0.02 is a different model;
* top-1 agreement ≥ 0.99, mask IoU ≥ 0.99, label agreement ≥ 0.99, boxes matched ≥ 0.99 with
  extra boxes ≤ 1 % of them;
* detection compared something: when ``digits infer`` finds no box on the
  parity inputs (``reference_boxes: 0``) the report fails with a
  ``reason``, since nothing was checked (train the detector further, or
  export with ``allow_mismatch``).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InferenceError
from .model import InferenceModel

DEFAULT_SAMPLE = 64
THRESHOLDS = {"top1_agreement": 0.99, "mask_iou": 0.99, "boxes_matched": 0.99, "label_agreement": 0.99}
TOLERANCE_FACTOR = {"savedmodel": 1e-3, "onnx": 1e-3, "keras": 1e-3, "tflite": 1e-2, "quantized": 5e-2}
MATCH_IOU = 0.9


def parity_inputs(loaded: InferenceModel, sample: int) -> list[tuple[str, np.ndarray]]:
    """``(name, raw image)`` pairs: validation images as stored, then each stretched to an odd size.

    Empty when the model's dataset is gone (the report then says it was skipped).
    """
    from ..resize import resize_image

    ds = loaded.dataset.dataset
    if ds is None:
        return []
    stage = "val" if "val" in ds.stages and ds.count("val") else "train"
    features, _ = ds.read_batch(stage, 0, sample)
    features = np.asarray(features)
    h, w = loaded.feature_shape[:2]
    pairs = [(f"{stage}[{i}]", np.asarray(f)) for i, f in enumerate(features)]
    pairs += [
        (f"{stage}[{i}] at {w + 3}x{h + 5}", resize_image(np.asarray(f), h + 5, w + 3, "squash"))
        for i, f in enumerate(features)
    ]
    return pairs


def run_runtime(fmt: str, folder: Path, arrays: list[np.ndarray], timeout: float = 600) -> list[dict]:
    """Run ``arrays`` through the export in a subprocess with only its runtime; one output dict per array."""
    script = Path(__file__).with_name("parity_runtime.py")
    with tempfile.TemporaryDirectory(prefix="digits-parity-") as tmp:
        inputs, outputs = Path(tmp) / "in.npz", Path(tmp) / "out.npz"
        named: dict[str, Any] = {str(i): a for i, a in enumerate(arrays)}
        np.savez(inputs, **named)
        done = subprocess.run(
            [sys.executable, str(script), fmt, str(folder), str(inputs), str(outputs)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            tail = "\n".join(done.stderr.strip().splitlines()[-5:])
            raise InferenceError(f"The {fmt} export does not run in its own runtime: {tail}")
        data = np.load(outputs)
        results: list[dict] = [{} for _ in arrays]
        for key in data.files:
            index, name = key.split("/", 1)
            results[int(index)][name] = data[key]
    return results


def _box_iou(a: np.ndarray, b: np.ndarray) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else float(np.allclose(a, b))


def _matched(reference: list[dict], got: dict) -> tuple[int, int, float]:
    """Matched boxes, reference boxes, and the largest score difference of a matched pair."""
    keep = got["scores"] > 0
    boxes, classes, scores = got["boxes"][keep], got["classes"][keep], got["scores"][keep]
    used: set[int] = set()
    hits = 0
    score_diff = 0.0
    for det in reference:
        for j, (box, cls) in enumerate(zip(boxes, classes)):
            if j not in used and int(cls) == det["class_id"] and _box_iou(np.asarray(det["box"]), box) >= MATCH_IOU:
                used.add(j)
                hits += 1
                score_diff = max(score_diff, abs(float(scores[j]) - float(det["score"])))
                break
    return hits, len(reference), score_diff


def tolerance(fmt: str, quantized: bool, largest: float) -> tuple[float, str]:
    """The bound on ``max_abs_diff`` for outputs whose largest magnitude is ``largest``, and the rule as text."""
    factor = TOLERANCE_FACTOR["quantized"] if quantized else TOLERANCE_FACTOR.get(fmt, 1e-3)
    return factor * (1.0 + largest), f"{factor:g} x (1 + max |digits infer output|)"


def mean_iou(a: np.ndarray, b: np.ndarray) -> float:
    """The mean IoU of two class maps over the classes present in either (1 when both are empty)."""
    values = [np.logical_and(a == c, b == c).sum() / np.logical_or(a == c, b == c).sum() for c in np.union1d(a, b)]
    return float(np.mean(values)) if values else 1.0


def compare(
    loaded: InferenceModel, names: list[str], result: Any, got: list[dict], *, fmt: str = "", quantized: bool = False
) -> dict:
    """The parity figures of export outputs ``got`` against ``digits infer``'s ``result`` (see the module)."""
    report: dict[str, Any] = {"inputs": len(names)}
    failed: list[str] = []
    if loaded.task == "detection":
        hits = total = 0
        per_input, score_diffs = [], [0.0]
        for sample, out in zip(result.samples, got):
            h, t, d = _matched(sample.detections or [], out)
            hits, total = hits + h, total + t
            per_input.append(h / t if t else 1.0)
            score_diffs.append(d)
        extra = sum(int((out["scores"] > 0).sum()) for out in got) - total
        bound, rule = tolerance(fmt, quantized, 1.0)  # scores lie in [0, 1]
        report.update(
            boxes_matched=hits / total if total else 0.0,
            reference_boxes=total,
            extra_boxes=max(0, extra),
            max_score_diff=max(score_diffs),
            tolerance=bound,
            tolerance_rule=rule,
        )
        worst = int(np.argmin(per_input)) if per_input else 0
        report["worst_input"] = names[worst] if names else None
        if total == 0:
            failed.append("reference_boxes")
            report["reason"] = (
                f"digits infer found no box on the {len(names)} parity inputs, so no box of the export was "
                "compared; train the detector further, or export with allow_mismatch"
            )
        if report["boxes_matched"] < THRESHOLDS["boxes_matched"]:
            failed.append("boxes_matched")
        if extra > 0.01 * max(total, 1):
            failed.append("extra_boxes")
        if report["max_score_diff"] > bound:
            failed.append("max_score_diff")
        report.update(passed=not failed, failed_checks=failed)
        return report
    reference = [np.asarray(s.output, np.float64) for s in result.samples]
    diffs = [np.abs(np.asarray(o["outputs"], np.float64) - r) for o, r in zip(got, reference)]
    worst = int(np.argmax([d.max() for d in diffs]))
    bound, rule = tolerance(fmt, quantized, max(float(np.abs(r).max()) for r in reference))
    report.update(
        max_abs_diff=float(max(d.max() for d in diffs)),
        mean_abs_diff=float(np.mean([d.mean() for d in diffs])),
        tolerance=bound,
        tolerance_rule=rule,
    )
    if loaded.task == "classification":
        agree = [int(np.argmax(o["outputs"])) == int(np.argmax(r)) for o, r in zip(got, reference)]
        report["top1_agreement"] = float(np.mean(agree))
        worst = agree.index(False) if not all(agree) else worst
        if report["top1_agreement"] < THRESHOLDS["top1_agreement"]:
            failed.append("top1_agreement")
    elif loaded.task == "multilabel":
        shares = []
        for sample, out in zip(result.samples, got):
            expected = np.zeros(np.asarray(sample.output).size, bool)
            expected[[item["index"] for item in sample.labels or []]] = True
            labels = np.asarray(out.get("labels", np.zeros_like(expected)), bool).reshape(-1)
            shares.append(float(np.mean(labels == expected)) if labels.size == expected.size else 0.0)
        report["label_agreement"] = float(np.mean(shares))
        if report["label_agreement"] < THRESHOLDS["label_agreement"]:
            failed.append("label_agreement")
            worst = int(np.argmin(shares))
    elif loaded.task == "segmentation":
        ious = [mean_iou(np.argmax(o["outputs"], axis=-1), np.argmax(r, axis=-1)) for o, r in zip(got, reference)]
        report["mask_iou"] = float(np.mean(ious))
        if report["mask_iou"] < THRESHOLDS["mask_iou"]:
            failed.append("mask_iou")
            worst = int(np.argmin(ious))
    if report["max_abs_diff"] > bound:
        failed.append("max_abs_diff")
    report.update(passed=not failed, failed_checks=failed, worst_input=names[worst])
    return report


def parity_report(
    loaded: InferenceModel, fmt: str, folder: Path, *, sample: int = DEFAULT_SAMPLE, quantized: bool = False
) -> dict:
    """Run the export in ``folder`` and ``digits infer`` on the same images; return the report."""
    from .runner import infer

    pairs = parity_inputs(loaded, sample)
    if not pairs:
        return {
            "format": fmt,
            "passed": None,
            "sample": 0,
            "skipped": f"the dataset of model {loaded.id} is not available: no validation images to compare on",
        }
    names = [n for n, _ in pairs]
    result = infer(loaded.job.path, pairs, epoch=loaded.epoch, max_errors=0)
    if fmt == "keras":  # the bare network: it gets the images digits infer prepared
        from .imageio import prepare_image

        arrays = [
            prepare_image(a, loaded.feature_shape, loaded.feature_dtype.name, loaded.dataset.resize_mode)
            for _, a in pairs
        ]
    else:
        arrays = [a for _, a in pairs]
    got = run_runtime(fmt, folder, arrays)
    if fmt == "keras" and loaded.task == "detection":  # raw output maps: compare with the network's own
        reference = np.asarray(loaded.model(loaded.preprocessing.apply(np.stack(arrays)), training=False))
        diffs = [np.abs(g["outputs"] - r) for g, r in zip(got, reference)]
        largest = float(max(d.max() for d in diffs))
        report: dict[str, Any] = {
            "inputs": len(names),
            "compared": "raw network output maps",
            "max_abs_diff": largest,
            "tolerance": 1e-4,
            "tolerance_rule": "1e-4 (the same network on the same prepared images)",
            "worst_input": names[int(np.argmax([d.max() for d in diffs]))],
            "passed": largest <= 1e-4,
            "failed_checks": [] if largest <= 1e-4 else ["max_abs_diff"],
        }
    else:
        report = compare(loaded, names, result, got, fmt=fmt, quantized=quantized)
    report.update(
        format=fmt,
        runtime={
            "onnx": "onnxruntime",
            "tflite": "LiteRT / TFLite interpreter",
            "savedmodel": "tf.saved_model.load",
            "keras": "keras",
        }[fmt],
        reference="digits infer",
        sample=sample,
    )
    return report
