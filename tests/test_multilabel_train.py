"""Multi-label training end to end: a generated set of 20×20 images holding 1–3 of 5 shapes, built by
``image-multilabel`` from a ``path,labels`` CSV, trains with the default network (sigmoid LeNet, binary
cross-entropy); its validation mAP and the other figures equal scikit-learn's on the model's own scores."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytestmark = pytest.mark.slow

SHAPES = ("square", "disk", "hbar", "vbar", "cross")


def _draw(shape: str, image: np.ndarray, x: int, y: int) -> None:
    yy, xx = np.mgrid[0:6, 0:6]
    stamp = {
        "square": np.ones((6, 6), bool),
        "disk": (yy - 2.5) ** 2 + (xx - 2.5) ** 2 <= 7,
        "hbar": (yy >= 2) & (yy <= 3),
        "vbar": (xx >= 2) & (xx <= 3),
        "cross": (xx == yy) | (xx == 5 - yy),
    }[shape]
    image[y : y + 6, x : x + 6][stamp] = 255


def write_shapes(folder, count: int, seed: int) -> str:
    """``count`` images with 1–3 distinct shapes in distinct cells of a 3×3 grid; returns the CSV path."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    rows = ["path,labels"]
    for i in range(count):
        image = np.zeros((20, 20), np.uint8)
        chosen = rng.choice(len(SHAPES), int(rng.integers(1, 4)), replace=False)
        cells = rng.choice(9, len(chosen), replace=False)
        for shape, cell in zip(chosen, cells):
            _draw(SHAPES[shape], image, 1 + 6 * (cell % 3) + int(rng.integers(0, 2)), 1 + 6 * (cell // 3))
        Image.fromarray(image).save(folder / f"{i:04d}.png")
        rows.append(f"{i:04d}.png,{';'.join(SHAPES[s] for s in sorted(chosen))}")
    (folder / "labels.csv").write_text("\n".join(rows) + "\n")
    return str(folder / "labels.csv")


def test_multilabel_training_reaches_map_and_its_metrics_equal_scikit_learn(tmp_path, capsys):
    from sklearn import metrics as sk

    from digits_core.cli import main
    from digits_core.datasets import create_dataset, open_dataset
    from digits_core.engine import Preprocessing, load_snapshot, read_metrics, train
    from digits_core.inference import export_model, infer
    from digits_core.inference.predict_api import predict

    jobs = tmp_path / "jobs"
    form = {"labels_csv": write_shapes(tmp_path / "shapes", 400, seed=0), "image_type": "grayscale"}
    dataset = create_dataset(
        "image-multilabel", {**form, "width": 20, "height": 20, "val_percent": 20}, workers=1, jobs_dir=jobs
    )
    job = train(dataset.id, None, jobs_dir=jobs, epochs=15, seed=0, lr_policy="fixed")
    info = json.loads((job.path / "model.json").read_text())
    assert info["network"] == "lenet_multilabel"
    points = read_metrics(job)
    last = {p["name"]: p["value"] for p in points if p["epoch"] == max(q["epoch"] for q in points)}
    assert last["val_map"] >= 0.9, last

    ds = open_dataset(dataset.id, jobs_dir=jobs)
    features, labels = ds.read_all("val")
    model = load_snapshot(job)
    scores = np.asarray(model(Preprocessing.load(job).apply(features), training=False))
    assert last["val_map"] == pytest.approx(sk.average_precision_score(labels, scores, average="macro"), abs=1e-5)
    assert last["val_hamming_loss"] == pytest.approx(sk.hamming_loss(labels, scores >= 0.5), abs=1e-6)
    for k, name in enumerate(ds.class_labels):
        assert last[f"val_ap_{name}"] == pytest.approx(sk.average_precision_score(labels[:, k], scores[:, k]), abs=1e-5)

    # inference applies the thresholds tuned on validation, logged with the epoch
    thresholds = np.array([last[f"val_threshold_{name}"] for name in ds.class_labels])
    assert sorted(ds.class_labels) == sorted(SHAPES) and not np.all(thresholds == 0.5)
    result = infer(job.id, [(f"val{i}", feature) for i, feature in enumerate(features)], jobs_dir=jobs)
    for sample in result.samples:  # (a threshold is a validation score: compare with inference's own scores)
        expected = {ds.class_labels[k] for k in np.flatnonzero(np.asarray(sample.output) >= thresholds)}
        assert {item["label"] for item in sample.labels} == expected
        assert all(item["threshold"] == thresholds[item["index"]] for item in sample.labels)
        assert sample.to_dict()["labels"] == sample.labels

    # an ONNX export applies the same thresholds: its parity report compares its labels with digits infer's
    import tarfile

    archive = export_model(job.id, tmp_path / "model.tar.gz", format="onnx", jobs_dir=jobs)
    with tarfile.open(archive) as tar:
        members = {m.name.split("/", 1)[1]: m for m in tar.getmembers() if "/" in m.name}
        parity = json.load(tar.extractfile(members["parity.json"]))  # type: ignore[arg-type]
        info = json.load(tar.extractfile(members["info.json"]))  # type: ignore[arg-type]
    assert parity["passed"] and parity["label_agreement"] == 1.0, parity
    assert info["thresholds"] == pytest.approx(thresholds.tolist()) and "labels" in info["signature"]["outputs"]

    # the multilabel view shows each label against the model's thresholds; its summary equals scikit-learn's
    labelled = infer(job.id, [(f"val{i}", f, y) for i, (f, y) in enumerate(zip(features, labels))], jobs_dir=jobs)
    view, _ = labelled.run_view()
    assert labelled.view_id == "multilabel" and view.thresholds == pytest.approx(thresholds.tolist())
    decided = np.stack([np.asarray(s.output) >= thresholds for s in labelled.samples])
    summary = view.summary()
    assert summary["exact_match"] == pytest.approx(sk.accuracy_score(labels, decided))
    assert summary["hamming_loss"] == pytest.approx(sk.hamming_loss(labels, decided))
    html = labelled.to_html()
    assert "Exact match" in html and f"{thresholds[0]:.3f}" in html

    # the TF Serving API answers with the same labels
    answer = predict(job.id, {"instances": [features[0].tolist()]}, jobs_dir=jobs)
    (prediction,) = answer["predictions"]
    served = {ds.class_labels[k] for k, v in enumerate(prediction["labels"]) if v}
    assert served == {item["label"] for item in result.samples[0].labels}

    # the command line prints them
    image = tmp_path / "shapes" / "0000.png"
    (sample,) = infer(job.id, [str(image)], jobs_dir=jobs).samples
    assert main(["--jobs-dir", str(jobs), "infer", "--model", job.id, str(image)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(str(image)))
    assert ", ".join(item["label"] for item in sample.labels) in row and sample.labels
