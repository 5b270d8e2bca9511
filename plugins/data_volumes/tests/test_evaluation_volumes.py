"""``digits evaluate`` on a 3-D volume model (issue 42): labelled NIfTI volumes through the volume inference path,
Dice, HD95, ASSD and NSD per case in mm equal to a brute-force reference on the same predictions."""

from __future__ import annotations

import json

import numpy as np
import pytest

from digits_core.evaluation import EvaluationError, evaluate

pytestmark = pytest.mark.slow


def _surface(mask: np.ndarray) -> np.ndarray:
    """Voxels of the mask with a 6-neighbour outside it (outside the volume counts as outside)."""
    padded = np.pad(mask, 1)
    inner = np.ones_like(mask)
    for axis in range(3):
        for step in (-1, 1):
            inner &= np.roll(padded, step, axis=axis)[1:-1, 1:-1, 1:-1]
    return mask & ~inner


def _reference(pred, truth, spacing, tolerance):
    from scipy.spatial.distance import cdist

    a = np.argwhere(_surface(pred)) * np.asarray(spacing)
    b = np.argwhere(_surface(truth)) * np.asarray(spacing)
    d = cdist(a, b)
    d_ab, d_ba = d.min(axis=1), d.min(axis=0)
    both = np.r_[d_ab, d_ba]
    tp = np.sum(pred & truth)
    return {
        "Dice": 2 * tp / (pred.sum() + truth.sum()),
        "HD95": max(np.percentile(d_ab, 95), np.percentile(d_ba, 95)),
        "ASSD": both.mean(),
        "NSD": np.mean(both <= tolerance),
    }


def test_volume_model_evaluation_equals_brute_force_distances(trained, synth, tmp_path):
    from digits_core.engine.volume_infer import infer_volume

    jobs, _, model = trained
    names = ["heart_000", "heart_001", "heart_002"]  # heart_001 is stored with a mirrored axis
    lines = [f"imagesTr/{n}.nii.gz labelsTr/{n}.nii.gz" for n in names]
    listing = synth.task / "eval.txt"
    listing.write_text("\n".join(lines) + "\n")
    result = evaluate(model.name, inputs=[listing], jobs_dir=jobs, nsd_tolerance_mm=2.0)
    summary = json.loads((result.folder / "summary.json").read_text())
    assert set(summary["mean"]) == {"1"} and len(summary["metric_per_case"]) == 3
    images = [str(synth.task / "imagesTr" / f"{n}.nii.gz") for n in names]
    labels = {i: str(synth.task / "labelsTr" / f"{n}.nii.gz") for i, n in zip(images, names)}
    for case, check in zip(summary["metric_per_case"], infer_volume(model, images, jobs_dir=jobs, labels=labels)):
        pred, truth = check.canonical_label == 1, check.ground_truth == 1
        want = _reference(pred, truth, check.volume.spacing, 2.0)
        got = case["metrics"]["1"]
        assert case["spacing"] == pytest.approx(list(check.volume.spacing))
        for key, value in want.items():
            assert got[key] == pytest.approx(value, abs=1e-6), (case["case"], key)
    assert result.job.data["evaluation"]["metrics"]["dice"] == pytest.approx(summary["foreground_mean"]["Dice"])


def test_volume_model_needs_labelled_pairs(trained, synth, tmp_path):
    jobs, _, model = trained
    before = sorted(p.name for p in jobs.iterdir())
    with pytest.raises(EvaluationError, match="3-D volume model"):
        evaluate(model.name, jobs_dir=jobs)
    listing = tmp_path / "bad.txt"
    listing.write_text(f"{synth.task / 'imagesTr' / 'heart_000.nii.gz'}\n")
    with pytest.raises(Exception, match=r"bad.txt line 1: give 'image label'"):
        evaluate(model.name, inputs=[listing], jobs_dir=jobs)
    assert sorted(p.name for p in jobs.iterdir()) == before
