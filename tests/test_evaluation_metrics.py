"""The evaluation figures equal the reference libraries' on the same predictions (to 1e-6).

Classification against scikit-learn, detection against pycocotools' COCOeval, segmentation against a
brute-force reference (every surface point to every other, surfaces found by looking at neighbours),
regression and image-to-image against scikit-learn and scikit-image.
"""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np
import pytest

from digits_core.evaluation import classification, detection, regression, segmentation
from digits_core.volumes import metrics as volume_metrics

TOL = 1e-6


def _probabilities(rng, n, k, truth):
    logits = rng.normal(size=(n, k))
    logits[np.arange(n), truth] += 1.5
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True)


@pytest.fixture
def classified():
    rng = np.random.default_rng(7)
    n, k = 300, 5
    truth = rng.integers(0, k, size=n)
    truth[:3] = 4  # every class has samples; class 3 is rare below
    truth[truth == 3] = rng.integers(0, 3, size=int((truth == 3).sum()))
    truth[10:14] = 3
    p = _probabilities(rng, n, k, truth)
    p[20:40] = np.round(p[20:40], 1)  # tied scores
    return p, truth


def test_classification_equals_scikit_learn(classified):
    from sklearn import metrics

    p, y = classified
    k = p.shape[1]
    report = classification.classification_report(p, y, [f"c{i}" for i in range(k)], top_k=3, bootstrap=0)
    predicted = p.argmax(axis=1)
    assert report["accuracy"] == pytest.approx(metrics.accuracy_score(y, predicted), abs=TOL)
    assert report["top_k_accuracy"] == pytest.approx(metrics.top_k_accuracy_score(y, p, k=3, labels=range(k)), abs=TOL)
    assert report["confusion_matrix"] == metrics.confusion_matrix(y, predicted, labels=range(k)).tolist()
    prec, rec, f1, support = metrics.precision_recall_fscore_support(y, predicted, labels=range(k), zero_division=0)
    for c, row in enumerate(report["per_class"]):
        assert row["precision"] == pytest.approx(prec[c], abs=TOL)
        assert row["recall"] == pytest.approx(rec[c], abs=TOL)
        assert row["f1"] == pytest.approx(f1[c], abs=TOL)
        assert row["support"] == support[c]
        positive = y == c
        assert row["roc_auc"] == pytest.approx(metrics.roc_auc_score(positive, p[:, c]), abs=TOL)
        assert row["average_precision"] == pytest.approx(metrics.average_precision_score(positive, p[:, c]), abs=TOL)
    for average in ("macro", "micro", "weighted"):
        ref = metrics.precision_recall_fscore_support(y, predicted, labels=range(k), average=average, zero_division=0)
        got = report[average]
        assert (got["precision"], got["recall"], got["f1"]) == pytest.approx(ref[:3], abs=TOL)
    assert report["macro"]["roc_auc"] == pytest.approx(
        metrics.roc_auc_score(np.eye(k)[y], p, average="macro"),
        abs=TOL,  # one-vs-rest; rounded scores
    )
    fpr, tpr, _ = metrics.roc_curve(y == 0, p[:, 0])
    assert np.trapezoid(report["curves"][0]["tpr"], report["curves"][0]["fpr"]) == pytest.approx(
        metrics.auc(fpr, tpr), abs=TOL
    )


def test_roc_auc_and_ap_need_both_kinds_of_sample():
    assert classification.roc_auc(np.array([1, 1]), np.array([0.2, 0.3])) is None
    assert classification.average_precision(np.array([0, 0]), np.array([0.2, 0.3])) is None


def test_calibration_error_and_reliability_bins(classified):
    p, y = classified
    bins = 10
    got = classification.calibration(p, y, bins)
    confidence, correct = p.max(axis=1), p.argmax(axis=1) == y
    ece = 0.0
    for b in range(bins):  # written out: a sample belongs to (b/bins, (b+1)/bins]
        member = [(b / bins < c <= (b + 1) / bins) or (b == 0 and c == 0) for c in confidence]
        member = np.array(member)
        assert got["bins"][b]["count"] == member.sum()
        if member.any():
            ece += abs(correct[member].mean() - confidence[member].mean()) * member.mean()
    assert got["ece"] == pytest.approx(ece, abs=TOL)
    from sklearn.calibration import calibration_curve

    # scikit-learn's curve of "top-1 is right" against the confidence: the same non-empty bins
    prob_true, prob_pred = calibration_curve(correct, confidence, n_bins=bins)
    filled = [b for b in got["bins"] if b["count"]]
    assert [b["accuracy"] for b in filled] == pytest.approx(prob_true, abs=TOL)
    assert [b["confidence"] for b in filled] == pytest.approx(prob_pred, abs=TOL)


def test_bootstrap_intervals_are_seeded_and_hold_the_estimate(classified):
    p, y = classified
    a = classification.classification_report(p, y, bootstrap=200, seed=3)
    b = classification.classification_report(p, y, bootstrap=200, seed=3)
    c = classification.classification_report(p, y, bootstrap=200, seed=4)
    assert a["intervals"] == b["intervals"] != c["intervals"]
    low, high = a["intervals"]["accuracy"]
    assert low < a["accuracy"] < high and high - low < 0.2
    # the percentile interval of resampled accuracies, recomputed from the same draws
    rng = np.random.default_rng(3)
    draws = [np.mean(p.argmax(axis=1)[i] == y[i]) for i in rng.integers(0, len(y), size=(200, len(y)))]
    assert [low, high] == pytest.approx(np.percentile(draws, [2.5, 97.5]), abs=TOL)


def _random_detection_set(rng, images=12, classes=3):
    truth, dets = [], []
    for i in range(images):
        m = int(rng.integers(0, 5))
        xy = rng.uniform(0, 80, size=(m, 2))
        wh = rng.uniform(5, 40, size=(m, 2))
        g = np.c_[rng.integers(0, classes, size=m), xy, xy + wh]
        rows = []
        for box in g:  # a jittered hit for most truth boxes, and some false alarms
            if rng.random() < 0.8:
                jitter = rng.normal(0, 3, size=4)
                rows.append([box[0], *(box[1:] + jitter), rng.uniform(0.3, 1)])
        for _ in range(int(rng.integers(0, 3))):
            x, y0 = rng.uniform(0, 80, size=2)
            rows.append(
                [rng.integers(0, classes), x, y0, x + rng.uniform(5, 30), y0 + rng.uniform(5, 30), rng.random()]
            )
        d = np.array(rows, dtype=np.float64).reshape(-1, 6)
        if i == 0 and len(d) > 1:
            d[:, 5] = 0.5  # tied scores
        truth.append(g.astype(np.float64).reshape(-1, 5))
        dets.append(d)
    return truth, dets


def _pycocotools(truth, dets, classes):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    images = [{"id": i + 1} for i in range(len(truth))]
    anns, results = [], []
    for i, (g, d) in enumerate(zip(truth, dets)):
        for row in g:
            w, h = row[3] - row[1], row[4] - row[2]
            anns.append(
                {
                    "id": len(anns) + 1,
                    "image_id": i + 1,
                    "category_id": int(row[0]) + 1,
                    "bbox": [row[1], row[2], w, h],
                    "area": w * h,
                    "iscrowd": 0,
                }
            )
        for row in d:
            results.append(
                {
                    "image_id": i + 1,
                    "category_id": int(row[0]) + 1,
                    "bbox": [row[1], row[2], row[3] - row[1], row[4] - row[2]],
                    "score": row[5],
                }
            )
    gt = COCO()
    gt.dataset = {"images": images, "annotations": anns, "categories": [{"id": c + 1} for c in range(classes)]}
    with contextlib.redirect_stdout(io.StringIO()):
        gt.createIndex()
        ev = COCOeval(gt, gt.loadRes(results), "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_detection_equals_pycocotools(seed):
    classes = 3
    truth, dets = _random_detection_set(np.random.default_rng(seed), classes=classes)
    ev = _pycocotools(truth, dets, classes)
    report = detection.detection_report(truth, dets, num_classes=classes)
    assert report["ap"] == pytest.approx(ev.stats[0], abs=TOL)
    assert report["ap50"] == pytest.approx(ev.stats[1], abs=TOL)
    assert report["ap75"] == pytest.approx(ev.stats[2], abs=TOL)
    assert report["ar"] == pytest.approx(ev.stats[8], abs=TOL)  # AR maxDets=100, all areas
    precision = ev.eval["precision"][:, :, :, 0, 2]  # [T, R, K] area all, maxDets 100
    for c, row in enumerate(report["per_class"]):
        valid = precision[:, :, c][precision[:, :, c] > -1]
        assert row["ap"] == pytest.approx(valid.mean() if valid.size else None, abs=TOL)


def test_detection_keeps_100_per_image_and_breaks_iou_ties_as_pycocotools():
    rng = np.random.default_rng(5)
    # a detection at IoU 0.5 with both truth boxes of image 0 takes the later one, so the next finds the first
    truth = [np.array([[0, 0, 0, 20, 10], [0, 10, 0, 30, 10]]), np.array([[0, 0, 0, 20, 20]])]
    # image 1: 150 false alarms scored above its one hit, which the 100-per-image cut leaves out
    far = np.c_[
        np.zeros(150), rng.uniform(50, 60, size=(150, 2)), rng.uniform(70, 80, size=(150, 2)), 0.5 + rng.random(150) / 2
    ]
    dets = [np.array([[0, 10, 0, 20, 10, 0.9], [0, 0, 0, 20, 10, 0.8]]), np.r_[far, [[0, 0, 0, 20, 20, 0.1]]]]
    ev = _pycocotools(truth, dets, 1)
    report = detection.detection_report(truth, dets, num_classes=1)
    assert (report["ap"], report["ap50"], report["ap75"], report["ar"]) == pytest.approx(
        (ev.stats[0], ev.stats[1], ev.stats[2], ev.stats[8]), abs=TOL
    )


def test_f1_confidence_curve_counts_matches_at_iou_half():
    truth = [np.array([[0, 0, 0, 10, 10], [0, 20, 20, 30, 30]], dtype=float)]
    dets = [np.array([[0, 0, 0, 10, 10, 0.9], [0, 50, 50, 60, 60, 0.6], [0, 21, 21, 31, 31, 0.3]], dtype=float)]
    curve = detection.f1_confidence(truth, dets, 1, grid=np.array([0.0, 0.5, 0.95]))
    # at 0: 2 hits of 3 detections, 2 of 2 boxes; at 0.5: 1 of 2, 1 of 2; at 0.95: nothing
    assert curve["precision"] == pytest.approx([2 / 3, 1 / 2, 0.0])
    assert curve["recall"] == pytest.approx([1.0, 1 / 2, 0.0])
    assert curve["f1"] == pytest.approx([0.8, 0.5, 0.0])
    assert curve["best_threshold"] == 0.0 and curve["best_f1"] == pytest.approx(0.8)


def _brute_surface(mask):
    """Foreground voxels with a 6-neighbour outside the mask (the image border counts as outside)."""
    padded = np.pad(mask, 1)
    out = np.zeros_like(mask)
    for index in np.argwhere(mask):
        p = tuple(index + 1)
        for axis in range(mask.ndim):
            for step in (-1, 1):
                q = list(p)
                q[axis] += step
                if not padded[tuple(q)]:
                    out[tuple(index)] = True
    return out


def _brute_reference(pred, ref, spacing, tolerance):
    from scipy.spatial.distance import cdist

    a = np.argwhere(_brute_surface(pred)) * np.asarray(spacing)
    b = np.argwhere(_brute_surface(ref)) * np.asarray(spacing)
    d = cdist(a, b)
    d_ab, d_ba = d.min(axis=1), d.min(axis=0)
    both = np.r_[d_ab, d_ba]
    return {
        "HD95": max(np.percentile(d_ab, 95), np.percentile(d_ba, 95)),
        "ASSD": both.mean(),
        "NSD": np.mean(both <= tolerance),
    }


def _blobs(rng, shape, classes=3):
    grid = np.indices(shape).astype(float)
    label = np.zeros(shape, dtype=np.int64)
    for c in range(1, classes):
        centre = rng.uniform(0.3, 0.7, size=len(shape)) * np.array(shape)
        radius = rng.uniform(0.15, 0.3) * min(shape)
        dist = np.sqrt(sum((g - x) ** 2 for g, x in zip(grid, centre)))
        label[dist < radius] = c
    return label


@pytest.mark.parametrize(
    ("shape", "spacing"), [((24, 20), (0.7, 1.3)), ((10, 14, 12), (3.0, 0.8, 1.1)), ((9, 9, 9), (1.0, 1.0, 1.0))]
)
def test_segmentation_equals_brute_force_surface_distances(shape, spacing):
    rng = np.random.default_rng(len(shape))
    ref = _blobs(rng, shape)
    pred = ref.copy()
    noise = rng.random(shape) < 0.08
    pred[noise] = rng.integers(0, 3, size=int(noise.sum()))
    pred = np.roll(pred, 1, axis=0)
    tolerance = 1.0  # distances of exactly 1 mm occur on unit spacing: within the tolerance
    got = segmentation.case_metrics(pred, ref, [1, 2], spacing, tolerance)
    for c in (1, 2):
        p, r = pred == c, ref == c
        want = _brute_reference(p, r, spacing, tolerance)
        for name in ("HD95", "ASSD", "NSD"):
            assert got[str(c)][name] == pytest.approx(want[name], abs=TOL), name
        assert got[str(c)]["HD95"] == pytest.approx(volume_metrics.hd95(p, r, spacing), abs=TOL)
        tp, fp, fn = (p & r).sum(), (p & ~r).sum(), (~p & r).sum()
        assert got[str(c)]["Dice"] == pytest.approx(2 * tp / (2 * tp + fp + fn), abs=TOL)
        assert got[str(c)]["IoU"] == pytest.approx(tp / (tp + fp + fn), abs=TOL)
        assert got[str(c)]["volume_difference"] == pytest.approx((p.sum() - r.sum()) * np.prod(spacing), abs=TOL)
        assert got[str(c)]["relative_volume_difference"] == pytest.approx((p.sum() - r.sum()) / r.sum(), abs=TOL)


def test_segmentation_empty_masks_follow_nnunet():
    ref = np.zeros((6, 6), dtype=np.int64)
    pred = ref.copy()
    pred[1:3, 1:3] = 1
    both_empty = segmentation.case_metrics(ref, ref, [1])["1"]
    assert all(math.isnan(both_empty[m]) for m in ("Dice", "IoU", "HD95", "ASSD", "NSD"))
    one_empty = segmentation.case_metrics(pred, ref, [1])["1"]
    assert one_empty["Dice"] == 0 and one_empty["HD95"] == math.inf and one_empty["NSD"] == 0


def test_summary_has_nnunet_layout_and_means_over_finite_cases():
    a = {
        "case": "a",
        "metrics": {"1": {m: 1.0 for m in segmentation.MEAN_METRICS}, "2": {m: 0.5 for m in segmentation.MEAN_METRICS}},
    }
    b = {
        "case": "b",
        "metrics": {
            "1": {m: 0.0 for m in segmentation.MEAN_METRICS},
            "2": {m: float("nan") for m in segmentation.MEAN_METRICS},
        },
    }
    summary = segmentation.summarize([a, b])
    assert set(summary) == {"metric_per_case", "mean", "foreground_mean"}
    assert summary["mean"]["1"]["Dice"] == 0.5 and summary["mean"]["2"]["Dice"] == 0.5
    assert summary["foreground_mean"]["Dice"] == 0.5
    assert segmentation.json_ready({"x": [float("nan"), float("inf"), 1.0]}) == {"x": [None, None, 1.0]}


def test_regression_equals_scikit_learn():
    from sklearn import metrics

    rng = np.random.default_rng(1)
    y = rng.normal(size=(50, 3))
    y[:, 2] = 4.0  # a constant target
    p = y + rng.normal(0, 0.3, size=y.shape)
    report = regression.regression_report(p, y)
    mae = metrics.mean_absolute_error(y, p, multioutput="raw_values")
    rmse = np.sqrt(metrics.mean_squared_error(y, p, multioutput="raw_values"))
    r2 = metrics.r2_score(y, p, multioutput="raw_values")
    for i, row in enumerate(report["per_target"]):
        assert (row["mae"], row["rmse"], row["r2"]) == pytest.approx((mae[i], rmse[i], r2[i]), abs=TOL)
    exact = regression.regression_report(y[:, 2:], y[:, 2:])
    assert exact["r2"] == metrics.r2_score(y[:, 2], y[:, 2]) == 1.0


@pytest.mark.parametrize("shape", [(32, 28), (20, 24, 3)])
def test_psnr_and_ssim_equal_scikit_image(shape):
    from skimage.metrics import peak_signal_noise_ratio, structural_similarity

    rng = np.random.default_rng(2)
    truth = rng.uniform(0, 255, size=shape)
    truth[: shape[0] // 2] *= 0.3  # structure, not only noise
    pred = np.clip(truth + rng.normal(0, 12, size=shape), 0, 255)
    assert regression.psnr(truth, pred, 255.0) == pytest.approx(
        peak_signal_noise_ratio(truth, pred, data_range=255.0), abs=TOL
    )
    channel = -1 if len(shape) == 3 else None
    assert regression.ssim(truth, pred, 255.0) == pytest.approx(
        structural_similarity(truth, pred, data_range=255.0, channel_axis=channel), abs=TOL
    )


def test_surface_distances_of_masks_on_the_border_and_far_apart():
    ref = np.zeros((12, 10, 9), dtype=bool)
    ref[:4, :5, :3] = True  # touches three faces of the volume: those faces are surface
    pred = np.zeros_like(ref)
    pred[7:12, 6:10, 5:9] = True  # the opposite corner: the bounding box of both is the whole volume
    spacing = (2.0, 0.5, 1.5)
    got = segmentation.binary_metrics(pred, ref, spacing, tolerance=9.0)
    want = _brute_reference(pred, ref, spacing, 9.0)
    for name in ("HD95", "ASSD", "NSD"):
        assert got[name] == pytest.approx(want[name], abs=TOL), name
    small = np.zeros_like(ref)
    small[5:7, 4:6, 4:6] = True
    got = segmentation.binary_metrics(small, ref, spacing)
    assert got["HD95"] == pytest.approx(_brute_reference(small, ref, spacing, 1.0)["HD95"], abs=TOL)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_detection_ap_of_weighted_resamples_equals_the_report_of_the_resampled_images(seed):
    """The leaderboard's bootstrap of COCO AP (issue 42): an image drawn k times weighs k, which must give the
    figure detection_report (equal to pycocotools above) gives for the resampled list of images itself."""
    classes = 3
    truth, dets = _random_detection_set(np.random.default_rng(seed), images=20, classes=classes)
    dets[0][:, 5] += np.arange(len(dets[0])) * 1e-6  # no tied scores: the copies of a tie are ranked differently
    index = np.random.default_rng(seed + 10).integers(0, len(truth), size=(8, len(truth)))
    fast = detection.ap_resamples(truth, dets, classes, index)
    for row, value in zip(index, fast):
        want = detection.detection_report([truth[i] for i in row], [dets[i] for i in row], num_classes=classes)["ap"]
        assert value == pytest.approx(want, abs=TOL)
    whole = detection.ap_resamples(truth, dets, classes, np.arange(len(truth))[None])[0]
    assert whole == pytest.approx(detection.detection_report(truth, dets, num_classes=classes)["ap"], abs=TOL)
