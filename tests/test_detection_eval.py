"""mAP against hand-computed cases and against pycocotools (no TensorFlow)."""

import math

import numpy as np
import pytest

from digits_core.boxes.evaluate import box_iou, coco_ap, evaluate, match_image, voc_ap

GT = np.array([[1, 0, 0, 10, 10]], np.float32)


def pred(*rows):
    return np.array(rows, np.float64).reshape(-1, 6)


def test_iou_of_known_boxes():
    assert box_iou([[0, 0, 10, 10]], [[5, 0, 15, 10]])[0, 0] == pytest.approx(50 / 150)
    assert box_iou([[0, 0, 10, 10]], [[20, 20, 30, 30]])[0, 0] == 0.0


def test_perfect_detection_scores_one_everywhere():
    result = evaluate([pred([1, 0.9, 0, 0, 10, 10])], [GT], num_classes=2, class_names=["dontcare", "car"])
    assert result["map50"] == 1.0 and result["map"] == 1.0
    assert result["ap50"] == {"car": 1.0} and result["num_gt"] == {"car": 1}


def test_shifted_box_counts_only_at_thresholds_it_reaches():
    # IoU 0.62: a hit at 0.50, 0.55, 0.60 and a miss at 0.65 ... 0.95 -> COCO AP 3/10
    result = evaluate([pred([1, 0.9, 0, 0, 10, 6.2])], [GT], num_classes=2)
    assert result["map50"] == 1.0
    assert result["map"] == pytest.approx(0.3)


def test_duplicate_is_a_false_positive():
    # image A: a hit (0.9) and its duplicate (0.8); image B: a hit (0.7)
    # PR points: (r .5, p 1), (r .5, p .5), (r 1, p 2/3) -> AP = .5 * 1 + .5 * 2/3
    preds = [pred([1, 0.9, 0, 0, 10, 10], [1, 0.8, 0, 0, 10, 10]), pred([1, 0.7, 0, 0, 10, 10])]
    ap, precision, recall = voc_ap(preds, [GT, GT], 1)
    assert ap == pytest.approx(0.5 + 0.5 * 2 / 3)
    assert list(recall) == [0.5, 0.5, 1.0]


def test_missed_object_halves_recall():
    gt = np.array([[1, 0, 0, 10, 10], [1, 50, 50, 60, 60]], np.float32)
    result = evaluate([pred([1, 0.9, 0, 0, 10, 10])], [gt], num_classes=2)
    assert result["map50"] == pytest.approx(0.5)
    assert result["map"] == pytest.approx(0.5, abs=0.01)  # 101-point sampling: 51/101 of the points


def test_wrong_class_is_not_a_hit_and_classes_without_gt_are_left_out():
    result = evaluate([pred([2, 0.9, 0, 0, 10, 10])], [GT], num_classes=3)
    assert result["ap50"] == {"1": 0.0}
    assert result["map50"] == 0.0


def test_dontcare_region_ignores_detections_inside_it():
    gt = np.array([[1, 0, 0, 10, 10], [0, 40, 40, 80, 80]], np.float32)
    preds = [pred([1, 0.95, 50, 50, 60, 60], [1, 0.9, 0, 0, 10, 10])]
    assert evaluate(preds, [gt], num_classes=2)["map50"] == 1.0
    without = gt[:1]
    assert evaluate(preds, [without], num_classes=2)["map50"] == pytest.approx(0.5)
    # dontcare is never ground truth: a detection on it does not count as a hit either
    status = match_image(preds[0], gt)
    assert status["pred_status"] == ["ignored", "tp"] and status["fn"] == 0


def test_match_image_counts():
    gt = np.array([[1, 0, 0, 10, 10], [1, 50, 50, 60, 60]], np.float32)
    status = match_image(pred([1, 0.9, 0, 0, 10, 10], [1, 0.8, 1, 1, 10, 10], [1, 0.7, 90, 90, 99, 99]), gt)
    assert (status["tp"], status["fp"], status["fn"]) == (1, 2, 1)
    assert status["gt_matched"] == [True, False]


def test_no_ground_truth_at_all_gives_nan():
    result = evaluate([pred([1, 0.9, 0, 0, 10, 10])], [np.zeros((0, 5))], num_classes=2)
    assert math.isnan(result["map50"]) and result["ap50"] == {}


def _random_case(rng, images=30, classes=3):
    gts, preds = [], []
    for _ in range(images):
        n = rng.integers(0, 5)
        xy = rng.uniform(0, 80, (n, 2))
        wh = rng.uniform(5, 40, (n, 2))
        g = np.column_stack([rng.integers(1, classes + 1, n), xy, xy + wh])
        rows = []
        for box in g:
            if rng.uniform() < 0.8:  # found, a little off
                jitter = rng.normal(0, 3, 4)
                cls = box[0] if rng.uniform() < 0.9 else rng.integers(1, classes + 1)
                rows.append([cls, rng.uniform(), *(box[1:] + jitter)])
        for _ in range(rng.integers(0, 3)):  # clutter
            xy2 = rng.uniform(0, 80, 2)
            rows.append([rng.integers(1, classes + 1), rng.uniform() * 0.6, *xy2, *(xy2 + rng.uniform(5, 30, 2))])
        p = np.array(rows, np.float64).reshape(-1, 6)
        p[:, 4] = np.maximum(p[:, 4], p[:, 2] + 1)
        p[:, 5] = np.maximum(p[:, 5], p[:, 3] + 1)
        gts.append(g)
        preds.append(p)
    return preds, gts


def test_coco_ap_matches_pycocotools():
    pytest.importorskip("pycocotools", reason="pycocotools is a test extra")
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    preds, gts = _random_case(np.random.default_rng(3))
    images, annotations, results = [], [], []
    for i, (p, g) in enumerate(zip(preds, gts)):
        images.append({"id": i + 1, "width": 200, "height": 200})
        for box in g:
            w, h = box[3] - box[1], box[4] - box[2]
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": i + 1,
                    "category_id": int(box[0]),
                    "bbox": [box[1], box[2], w, h],
                    "area": w * h,
                    "iscrowd": 0,
                }
            )
        for row in p:
            results.append(
                {
                    "image_id": i + 1,
                    "category_id": int(row[0]),
                    "score": float(row[1]),
                    "bbox": [row[2], row[3], row[4] - row[2], row[5] - row[3]],
                }
            )
    coco = COCO()
    coco.dataset = {
        "images": images,
        "annotations": annotations,
        "categories": [{"id": c, "name": str(c)} for c in (1, 2, 3)],
    }
    coco.createIndex()
    evaluator = COCOeval(coco, coco.loadRes(results), "bbox")
    evaluator.evaluate()
    evaluator.accumulate()
    # precision[T, R, K, A, M]: area "all", maxDets 100; pycocotools also counts a box's area as w*h
    ours = evaluate(preds, gts, num_classes=4)
    for k, cls in enumerate((1, 2, 3)):
        theirs = evaluator.eval["precision"][:, :, k, 0, 2]
        theirs = np.where(theirs < 0, np.nan, theirs).mean()
        assert ours["ap"][str(cls)] == pytest.approx(theirs, abs=1e-9)
        assert coco_ap(preds, gts, cls)[1][0] == pytest.approx(
            evaluator.eval["precision"][0, :, k, 0, 2].mean(), abs=1e-9
        )
