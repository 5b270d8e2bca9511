"""The worst cases of an evaluation, with their pictures, for the report's "Worst cases" table.

* classification: the wrong predictions with the highest confidence (the model was surest and wrong);
* segmentation: the cases with the lowest mean foreground Dice, each with its image and an overlay of
  prediction against truth (green: both, red: predicted only, blue: missed).

Pictures are PNG data URIs (at most :data:`THUMBNAIL` pixels on the longer side), so the report stays
one self-contained file; they are written to ``worst_cases.json`` beside ``metrics.json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: Cases listed.
WORST = 8
#: Longer side of a picture, pixels.
THUMBNAIL = 160


def _uri(image: np.ndarray) -> str:
    # the display helpers of the inference results pages, so a case looks as it does there
    from ..inference.images import png_data_uri

    return png_data_uri(image, THUMBNAIL)


def overlay(image: np.ndarray, pred: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """The image in gray with prediction against truth: green both, red predicted only, blue missed."""
    # the display helpers of the inference results pages
    from ..inference.images import to_display_rgb

    shown = to_display_rgb(np.asarray(image)).astype(np.float64) * 0.5
    p, t = np.asarray(pred) > 0, np.asarray(truth) > 0
    for mask, color in ((p & t, (0, 200, 0)), (p & ~t, (230, 0, 0)), (~p & t, (0, 80, 255))):
        shown[mask] = shown[mask] * 0.3 + np.asarray(color) * 0.7
    return shown.clip(0, 255).astype(np.uint8)


def worst_cases(task: str, samples: Sequence[Any], report: dict, limit: int = WORST) -> list[dict]:
    """``[{"input", "note", "image", "overlay"?}]`` of the worst ``limit`` cases (see the module docstring)."""
    if task == "classification":
        names = report["class_labels"]
        wrong = []
        for s in samples:
            p = np.asarray(s.output, dtype=np.float64).reshape(-1)
            t = int(np.asarray(s.ground_truth).reshape(-1)[0])
            if int(p.argmax()) != t:
                wrong.append((float(p.max()), s, t, int(p.argmax())))
        wrong.sort(key=lambda w: -w[0])
        return [
            {
                "input": s.input_id,
                "note": f"true {names[t]}, predicted {names[k]} ({confidence:.3f})",
                "image": _uri(s.input_data),
            }
            for confidence, s, t, k in wrong[:limit]
        ]
    if task == "segmentation":
        dice = {}
        for case in report["summary"]["metric_per_case"]:
            values = [m["Dice"] for m in case["metrics"].values() if m.get("Dice") is not None]
            dice[case["case"]] = float(np.mean(values)) if values else None
        ranked = sorted(
            (s for s in samples if dice.get(s.input_id) is not None), key=lambda s: dice[s.input_id] or 0.0
        )[:limit]
        out = []
        for s in ranked:
            pred = np.asarray(s.output).argmax(axis=-1)
            out.append(
                {
                    "input": s.input_id,
                    "note": f"Dice {dice[s.input_id]:.3f}",
                    "image": _uri(s.input_data),
                    "overlay": _uri(overlay(s.input_data, pred, np.asarray(s.ground_truth).reshape(pred.shape))),
                }
            )
        return out
    return []
