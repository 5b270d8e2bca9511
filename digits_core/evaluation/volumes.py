"""Evaluating a 3-D volume model: labelled volumes through ``digits volume-infer``'s path, figures per case.

The test set is a list of ``image label`` pairs (NIfTI files or DICOM series folders and their label
files), a list file with one pair per line (relative paths from the list file's folder) or, in Python,
``(image, label)`` tuples. Each image goes through :func:`digits_core.engine.volume_infer.infer_volume`
with its label as ground truth (the data plugin reads and preprocesses both as the dataset was built);
the figures of :mod:`~digits_core.evaluation.segmentation` are taken on the preprocessed canonical
voxels with their spacing in mm.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import DigitsError
from . import segmentation


def volume_pairs(inputs: Sequence[Any]) -> list[tuple[str, str]]:
    """``(image, label)`` pairs from list files and tuples; a line without its label is refused by name."""
    pairs: list[tuple[str, str]] = []
    for given in inputs:
        if isinstance(given, (tuple, list)) and len(given) == 2:
            pairs.append((str(given[0]), str(given[1])))
            continue
        path = Path(str(given)).expanduser()
        if not path.is_file():
            raise DigitsError(
                f"{given}: a volume test set is a list file of 'image label' lines (or (image, label) pairs)."
            )
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            if len(words) != 2:
                raise DigitsError(f"{path} line {number}: give 'image label' (the label file of the volume).")
            image, label = ((path.parent / w) if not Path(w).is_absolute() else Path(w) for w in words)
            pairs.append((str(image), str(label)))
    if not pairs:
        raise DigitsError("The volume test set is empty: give 'image label' pairs.")
    return pairs


def evaluate_volumes(
    folder: Path, info: dict, inputs: Sequence[Any], jobs_dir: Any, tolerance: float
) -> tuple[dict, list[dict], list[dict], list]:
    """Run the volume model over labelled volumes; ``(report, per-case rows, per-class rows, results)``."""
    # the volume model's own inference path (engine layer: TensorFlow loads with it)
    from ..engine.volume_infer import infer_volume

    pairs = volume_pairs(inputs)
    results = infer_volume(folder, [p[0] for p in pairs], jobs_dir=jobs_dir, labels=dict(pairs))
    names = [str(c) for c in (info.get("class_labels") or [])]
    num = len(names) or int(max(int(r.canonical_label.max()) for r in results)) + 1
    classes = list(range(1, num))
    cases: list[dict[str, Any]] = []
    for result in results:
        if result.ground_truth is None:
            raise DigitsError(f"{result.source}: its label was not read; give 'image label' pairs.")
        truth = result.ground_truth
        if int(truth.max(initial=0)) >= num:
            raise DigitsError(
                f"{result.source}: its label holds class id {int(truth.max())} but the model has {num} classes."
            )
        metrics = segmentation.case_metrics(result.canonical_label, truth, classes, result.volume.spacing, tolerance)
        spacing = [float(s) for s in result.volume.spacing]
        cases.append({"case": result.source, "spacing": spacing, "metrics": metrics})
    summary = segmentation.summarize(cases)
    label = {str(c): (names[c] if c < len(names) else str(c)) for c in classes}
    rows = [{"input": c["case"], "class": label[k], **m} for c in cases for k, m in c["metrics"].items()]
    per_class = [{"class": label[k], **m} for k, m in summary["mean"].items()]
    report = {
        "count": len(cases),
        "dice": summary["foreground_mean"].get("Dice"),
        "nsd_tolerance_mm": tolerance,
        "class_labels": names or [str(c) for c in range(num)],
        "summary": summary,
        "volumes": True,
    }
    return report, rows, per_class, results
