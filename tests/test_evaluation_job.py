"""The evaluation job end to end: tiny models trained here by the engine, evaluated on held-out test stages.

Two throwaway data plugins give a 3-class toy classification set (a bright square in one of three places)
and a toy segmentation set (a bright rectangle and its mask), each with a test stage; a third adds a
class the model never saw. The figures of the job equal scikit-learn's (classification) and the
written-out Dice (segmentation) on the same model's predictions.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from PIL import Image
from wtforms import Form, IntegerField

from digits_core import DataIngestion, registry
from digits_core.evaluation import EvaluationError, evaluate, load_evaluation
from digits_core.jobs import JobStatus, JobStore

# The module fixtures train real Keras models with the engine.
pytestmark = pytest.mark.slow

LABELS = ["top-left", "centre", "bottom-right", "nowhere"]
SPOTS = {0: (0, 0), 1: (3, 3), 2: (5, 5)}


def toy_image(cls: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 40, (8, 8, 1)).astype(np.uint8)
    if cls in SPOTS:
        r, c = SPOTS[cls]
        image[r : r + 3, c : c + 3] = 220
    return image


class _CountForm(Form):
    count = IntegerField("Count", default=12)


class ToyClasses(DataIngestion):
    plugin_id = "toy-eval-classes"
    title = "Toy classes (evaluation tests)"
    classes = 3

    @staticmethod
    def get_dataset_form():
        return _CountForm

    @staticmethod
    def get_dataset_template(form):
        return "{{ form.count }}", {}

    def itemize_entries(self, stage):
        self.userdata["class_labels"] = LABELS[: self.classes]
        first = {"train": 0, "val": 1000, "test": 2000}[stage]
        n = self.count if stage == "train" else 4
        return [(c, first + i) for i in range(n) for c in range(self.classes)]

    def encode_entry(self, entry):
        cls, seed = entry
        return toy_image(cls, seed), cls


class ToyClassesPlusOne(ToyClasses):
    """The same images and a fourth class, "nowhere" (no square), that a 3-class model never saw."""

    plugin_id = "toy-eval-classes-plus"
    classes = 4


class ToyMasks(DataIngestion):
    plugin_id = "toy-eval-masks"
    title = "Toy masks (evaluation tests)"

    @staticmethod
    def get_dataset_form():
        return _CountForm

    @staticmethod
    def get_dataset_template(form):
        return "{{ form.count }}", {}

    def itemize_entries(self, stage):
        self.userdata["class_labels"] = ["background", "rectangle"]
        self.userdata["color_palette"] = [[0, 0, 0], [0, 255, 0]]
        return {"train": list(range(self.count)), "val": list(range(500, 504)), "test": list(range(900, 906))}[stage]

    def encode_entry(self, entry):
        rng = np.random.default_rng(entry)
        image = rng.integers(0, 60, (16, 16, 1)).astype(np.uint8)
        mask = np.zeros((16, 16), np.int64)
        top, left = rng.integers(2, 8, 2)
        h, w = rng.integers(4, 7, 2)
        image[top : top + h, left : left + w] = 200
        mask[top : top + h, left : left + w] = 1
        return image, mask


class ToyBrightness(DataIngestion):
    """Regression: two targets per image, its mean brightness and the bright square's row, both in [0, 1]."""

    plugin_id = "toy-eval-brightness"
    title = "Toy brightness (evaluation tests)"

    @staticmethod
    def get_dataset_form():
        return _CountForm

    @staticmethod
    def get_dataset_template(form):
        return "{{ form.count }}", {}

    def itemize_entries(self, stage):
        return {"train": list(range(self.count)), "val": list(range(500, 508)), "test": list(range(900, 912))}[stage]

    def encode_entry(self, entry):
        rng = np.random.default_rng(entry)
        level, row = rng.uniform(0.1, 0.9), int(rng.integers(0, 6))
        image = np.full((8, 8, 1), level * 255, np.uint8)
        image[row : row + 2, 2:5] = 255
        return image, np.array([level, row / 5], np.float32)


PLUGINS = (ToyClasses, ToyClassesPlusOne, ToyMasks, ToyBrightness)


def classifier(input_shape, num_outputs, **params):
    import keras

    inputs = keras.Input(input_shape)
    x = keras.layers.Conv2D(6, 3, padding="same", activation="relu")(inputs)
    x = keras.layers.Flatten()(x)
    return keras.Model(inputs, keras.layers.Dense(num_outputs, activation="softmax")(x))


def segmenter(input_shape, num_outputs, **params):
    import keras

    inputs = keras.Input(input_shape)
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
    return keras.Model(inputs, keras.layers.Conv2D(num_outputs, 1, activation="softmax")(x))


def regressor(input_shape, num_outputs, **params):
    import keras

    inputs = keras.Input(input_shape)
    x = keras.layers.Flatten()(inputs)
    return keras.Model(inputs, keras.layers.Dense(num_outputs)(x))


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    return tmp_path_factory.mktemp("eval-jobs")


@pytest.fixture(scope="module")
def made(jobs):
    from digits_core.datasets import create_dataset
    from digits_core.engine import train

    for plugin in PLUGINS:
        registry.register(plugin)
    try:
        cls_ds = create_dataset("toy-eval-classes", {"count": 12}, name="classes", workers=1, jobs_dir=jobs)
        plus_ds = create_dataset("toy-eval-classes-plus", {"count": 2}, name="plus", workers=1, jobs_dir=jobs)
        seg_ds = create_dataset("toy-eval-masks", {"count": 24}, name="masks", workers=1, jobs_dir=jobs)
        reg_ds = create_dataset("toy-eval-brightness", {"count": 48}, name="brightness", workers=1, jobs_dir=jobs)
        common = {"jobs_dir": jobs, "epochs": 3, "batch_size": 12, "seed": 1, "solver": "adam", "learning_rate": 0.01}
        cls_model = train(cls_ds.id, classifier, name="toy-classifier", **common)
        seg_model = train(seg_ds.id, segmenter, name="toy-segmenter", **common)
        reg_model = train(reg_ds.id, regressor, name="toy-regressor", **common)
        # two more classifiers for the leaderboard: a shorter run and another seed
        others = [
            train(cls_ds.id, classifier, name="short", **{**common, "epochs": 1, "learning_rate": 0.001}),
            train(cls_ds.id, classifier, name="seed-2", **{**common, "seed": 2}),
        ]
        yield {
            "cls_ds": cls_ds,
            "plus_ds": plus_ds,
            "seg_ds": seg_ds,
            "cls": cls_model,
            "seg": seg_model,
            "reg_ds": reg_ds,
            "reg": reg_model,
            "others": others,
        }
    finally:
        for plugin in PLUGINS:
            registry.unregister(plugin)


def _folders(jobs):
    return sorted(p.name for p in jobs.iterdir() if p.is_dir())


def _predictions(model_job, stage_features, jobs):
    """The model's outputs on features, through the plain inference API (the independent path)."""
    from digits_core.inference import infer

    return np.stack(
        [
            s.output
            for s in infer(model_job.id, [(f"x{i}", f) for i, f in enumerate(stage_features)], jobs_dir=jobs).samples
        ]
    )


def test_classification_evaluation_equals_scikit_learn(made, jobs):
    from sklearn import metrics

    from digits_core.datasets import open_dataset

    model = made["cls"]
    assert model.status is JobStatus.DONE
    result = evaluate(model.id, jobs_dir=jobs, bootstrap=200)
    job = result.job
    assert job.kind == "evaluation" and job.status is JobStatus.DONE
    assert job.data["model_id"] == model.id and job.data["dataset_id"] == made["cls_ds"].id
    assert [j.id for j in JobStore(jobs).list("evaluation")] == [job.id]
    with open_dataset(made["cls_ds"].id, jobs) as ds:
        features, truth = ds.read_all("test")
    p = _predictions(model, features, jobs)
    got = load_evaluation(job.id, jobs).metrics
    assert got["count"] == len(truth) == 12 and got["stage"] == "test"
    predicted = p.argmax(axis=1)
    assert got["accuracy"] == pytest.approx(metrics.accuracy_score(truth, predicted), abs=1e-6)
    assert got["macro"]["f1"] == pytest.approx(
        metrics.f1_score(truth, predicted, average="macro", zero_division=0), abs=1e-6
    )
    assert got["confusion_matrix"] == metrics.confusion_matrix(truth, predicted, labels=range(3)).tolist()
    for c, row in enumerate(got["per_class"]):
        assert row["roc_auc"] == pytest.approx(metrics.roc_auc_score(truth == c, p[:, c]), abs=1e-6)
    low, high = got["intervals"]["accuracy"]
    assert low <= got["accuracy"] <= high
    folder = result.folder
    files = ["metrics.json", "per_class.csv", "predictions.csv", "report.html"]
    if got["accuracy"] < 1:  # the confidently wrong inputs, with their pictures
        files.append("worst_cases.json")
    assert sorted(f.name for f in folder.iterdir()) == sorted(files)
    rows = list(csv.DictReader(open(folder / "predictions.csv")))
    assert len(rows) == 12 and sum(int(r["correct"]) for r in rows) == round(got["accuracy"] * 12)
    html = (folder / "report.html").read_text()
    assert "Confusion matrix" in html and "Reliability diagram" in html and "<svg" in html
    assert job.data["evaluation"]["metrics"]["accuracy"] == got["accuracy"]


def test_labelled_list_gives_the_same_figures_and_a_missing_label_is_refused(made, jobs, tmp_path):
    from digits_core.datasets import open_dataset

    with open_dataset(made["cls_ds"].id, jobs) as ds:
        features, truth = ds.read_all("test")
    lines = []
    for i, (f, t) in enumerate(zip(features, truth)):
        Image.fromarray(f[:, :, 0]).save(tmp_path / f"t{i}.png")
        lines.append(f"t{i}.png {LABELS[t]}")
    (tmp_path / "list.txt").write_text("\n".join(lines) + "\n")
    from_list = evaluate(made["cls"].id, inputs=[tmp_path / "list.txt"], jobs_dir=jobs, bootstrap=0).metrics
    from_stage = evaluate(made["cls"].id, jobs_dir=jobs, bootstrap=0).metrics
    assert from_list["confusion_matrix"] == from_stage["confusion_matrix"]
    assert from_list["macro"] == pytest.approx(from_stage["macro"], abs=1e-6)
    before = _folders(jobs)
    (tmp_path / "list.txt").write_text("\n".join([*lines, "t0.png"]) + "\n")
    with pytest.raises(EvaluationError, match=r"no label, e.g. .*t0\.png"):
        evaluate(made["cls"].id, inputs=[tmp_path / "list.txt"], jobs_dir=jobs)
    assert _folders(jobs) == before


def test_a_class_the_model_never_saw_and_another_task_are_refused(made, jobs):
    before = _folders(jobs)
    with pytest.raises(EvaluationError, match=r'Class "nowhere" \(id 3\).*not one model'):
        evaluate(made["cls"].id, dataset_id=made["plus_ds"].id, jobs_dir=jobs)
    with pytest.raises(EvaluationError, match=r"holds mask labels .* is a classification model"):
        evaluate(made["cls"].id, dataset_id=made["seg_ds"].id, jobs_dir=jobs)
    assert _folders(jobs) == before


def test_labelled_inputs_with_a_class_or_mask_value_the_model_never_saw_are_refused_naming_it(made, jobs, tmp_path):
    """The labelled-file door (a list of ``path label`` lines) names the unknown class of a classifier's list and
    the mask value beyond a segmenter's classes, with the input it is in; nothing is stored."""
    from digits_core.datasets import open_dataset
    from digits_core.errors import DigitsError

    with open_dataset(made["cls_ds"].id, jobs) as ds:
        features, _ = ds.read_all("test")
    Image.fromarray(features[0][:, :, 0]).save(tmp_path / "a.png")
    (tmp_path / "classes.txt").write_text("a.png nowhere\n")
    with open_dataset(made["seg_ds"].id, jobs) as ds:
        images, masks = ds.read_all("test")
    image = np.asarray(images[0])
    Image.fromarray(image[..., 0] if image.shape[-1] == 1 else image).save(tmp_path / "s.png")
    mask = np.asarray(masks[0]).reshape(image.shape[:2]).astype(np.uint8)
    mask[0, 0] = 7  # one voxel of a class the 2-class segmenter has no output for
    Image.fromarray(mask).save(tmp_path / "s_mask.png")
    (tmp_path / "masks.txt").write_text("s.png s_mask.png\n")
    before = _folders(jobs)
    with pytest.raises(DigitsError, match=r"'nowhere' of .*a\.png: not a class index or one of the classes"):
        evaluate(made["cls"].id, inputs=[tmp_path / "classes.txt"], jobs_dir=jobs)
    with pytest.raises(EvaluationError, match=r"s\.png holds class id 7 but the model has 2 classes: it never saw it"):
        evaluate(made["seg"].id, inputs=[tmp_path / "masks.txt"], jobs_dir=jobs)
    assert _folders(jobs) == before


def test_segmentation_evaluation_writes_nnunet_summary(made, jobs):
    from digits_core.datasets import open_dataset

    model = made["seg"]
    result = evaluate(model.id, jobs_dir=jobs)
    summary = json.loads((result.folder / "summary.json").read_text())
    assert set(summary) == {"metric_per_case", "mean", "foreground_mean"}
    assert set(summary["mean"]) == {"1"}  # the background is not a class that is scored
    with open_dataset(made["seg_ds"].id, jobs) as ds:
        features, masks = ds.read_all("test")
    pred = _predictions(model, features, jobs).argmax(axis=-1)
    dice = []
    for p, t in zip(pred, masks):
        tp, fp, fn = np.sum((p == 1) & (t == 1)), np.sum((p == 1) & (t != 1)), np.sum((p != 1) & (t == 1))
        dice.append(2 * tp / (2 * tp + fp + fn))
    cases = summary["metric_per_case"]
    assert [c["metrics"]["1"]["Dice"] for c in cases] == pytest.approx(dice, abs=1e-6)
    assert summary["foreground_mean"]["Dice"] == pytest.approx(np.mean(dice), abs=1e-6)
    assert result.metrics["dice"] == pytest.approx(np.mean(dice), abs=1e-6)
    html = (result.folder / "report.html").read_text()
    assert "Per case" in html and "Worst cases" in html and 'src="data:image/png;base64,' in html
    worst = json.loads((result.folder / "worst_cases.json").read_text())
    assert [w["note"] for w in worst] == [f"Dice {d:.3f}" for d in sorted(dice)[: len(worst)]]
    assert len(worst) == min(8, len(dice)) and all(w["overlay"].startswith("data:image/png") for w in worst)


def test_regression_evaluation_equals_scikit_learn(made, jobs):
    from sklearn import metrics

    from digits_core.datasets import open_dataset

    result = evaluate(made["reg"].id, jobs_dir=jobs)
    with open_dataset(made["reg_ds"].id, jobs) as ds:
        features, truth = ds.read_all("test")
    predicted = _predictions(made["reg"], features, jobs).reshape(len(truth), -1)
    got = result.metrics
    assert got["task"] == "regression" and got["count"] == 12 and len(got["per_target"]) == 2
    r2 = metrics.r2_score(truth, predicted, multioutput="raw_values")
    mae = metrics.mean_absolute_error(truth, predicted, multioutput="raw_values")
    for i, row in enumerate(got["per_target"]):
        assert (row["r2"], row["mae"]) == pytest.approx((r2[i], mae[i]), abs=1e-6)
    assert got["rmse"] == pytest.approx(
        np.sqrt(metrics.mean_squared_error(truth, predicted, multioutput="raw_values")).mean(), abs=1e-6
    )
    rows = list(csv.DictReader(open(result.folder / "predictions.csv")))
    assert len(rows) == 12 and float(rows[0]["truth_1"]) == pytest.approx(truth[0][1], abs=1e-6)


def test_a_failure_while_writing_leaves_no_job(made, jobs, monkeypatch):
    from digits_core.evaluation import report

    def broken(*args, **kwargs):
        raise OSError("disk went away")

    monkeypatch.setattr(report, "render_report", broken)
    before = _folders(jobs)
    with pytest.raises(OSError, match="disk went away"):
        evaluate(made["cls"].id, jobs_dir=jobs, bootstrap=0)
    assert _folders(jobs) == before


def test_cli_prints_the_summary_and_writes_the_report(made, jobs, tmp_path):
    from conftest import run_digits

    out = tmp_path / "report.html"
    args = ["--jobs-dir", str(jobs), "evaluate", "--model", made["cls"].id, "--bootstrap", "50"]
    done = run_digits(*args, "--json", "--report", str(out), timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["task"] == "classification" and summary["stage"] == "test"
    assert summary["metrics"]["accuracy"] == load_evaluation(summary["job_id"], jobs).metrics["accuracy"]
    assert out.read_text().startswith("<!DOCTYPE html>")
    bad = run_digits(*args, "--stage", "val", "--dataset", made["seg_ds"].id, timeout=300)
    assert bad.returncode != 0 and "holds mask labels" in bad.stderr and "Traceback" not in bad.stderr


def test_leaderboard_ranks_three_models_with_paired_intervals(made, jobs):
    from digits_core.evaluation import leaderboard
    from digits_core.evaluation.leaderboard import paired_interval

    models = [made["cls"], *made["others"]]
    results = {m.id: evaluate(m.id, jobs_dir=jobs, bootstrap=0) for m in models}
    board = leaderboard(made["cls_ds"].id, "test", jobs_dir=jobs)
    assert board["task"] == "classification" and board["primary"] == "accuracy"
    rows = board["rows"]
    assert sorted(r["model_id"] for r in rows) == sorted(m.id for m in models)  # latest evaluation per model
    accuracies = [r["metrics"]["accuracy"] for r in rows]
    assert accuracies == sorted(accuracies, reverse=True)
    assert "accuracy" in rows[0]["best"] and rows[0]["difference"] is None
    assert {r["evaluation_id"] for r in rows} == {r.job.id for r in results.values()}

    def correct(evaluation_id):
        path = JobStore(jobs).get(evaluation_id).path / "evaluation" / "predictions.csv"
        return np.array([float(r["correct"]) for r in csv.DictReader(open(path))])

    leader = correct(rows[0]["evaluation_id"])
    for row in rows[1:]:
        mine = correct(row["evaluation_id"])
        assert row["difference"]["value"] == pytest.approx(mine.mean() - leader.mean(), abs=1e-9)
        low, high = row["difference"]["interval"]
        assert low <= row["difference"]["value"] <= high
        rng = np.random.default_rng(0)  # the paired resamples, written out
        index = rng.integers(0, len(mine), size=(1000, len(mine)))
        want = np.percentile(mine[index].mean(axis=1) - leader[index].mean(axis=1), [2.5, 97.5])
        assert [low, high] == pytest.approx(want, abs=1e-9)
    assert paired_interval(np.ones(5), np.ones(5)) == [0.0, 0.0]


def test_leaderboard_of_regression_snapshots_compares_rmse_with_a_paired_interval(made, jobs):
    """Two epochs of a regressor on one test set: the lower RMSE leads; the difference is the headline RMSEs'
    and its interval the paired bootstrap of RMSE (per target, averaged), written out here from predictions.csv."""
    from digits_core.evaluation import leaderboard

    first = evaluate(made["reg"].id, epoch=1, jobs_dir=jobs)
    last = evaluate(made["reg"].id, jobs_dir=jobs)
    board = leaderboard(made["reg_ds"].id, "test", jobs_dir=jobs)
    assert board["task"] == "regression" and board["primary"] == "rmse"
    rows = board["rows"]
    assert {r["evaluation_id"] for r in rows} == {first.job.id, last.job.id}
    assert rows[0]["metrics"]["rmse"] < rows[1]["metrics"]["rmse"] and "rmse" in rows[0]["best"]

    def squared_errors(evaluation_id):
        path = JobStore(jobs).get(evaluation_id).path / "evaluation" / "predictions.csv"
        found = list(csv.DictReader(open(path)))
        return np.array([[(float(r[f"predicted_{t}"]) - float(r[f"truth_{t}"])) ** 2 for t in (0, 1)] for r in found])

    leader, other = (squared_errors(r["evaluation_id"]) for r in rows)
    difference = rows[1]["difference"]
    assert difference["figure"] == "rmse"
    assert difference["value"] == pytest.approx(rows[1]["metrics"]["rmse"] - rows[0]["metrics"]["rmse"], abs=1e-9)
    index = np.random.default_rng(0).integers(0, len(other), size=(1000, len(other)))
    want = np.percentile(
        np.sqrt(other[index].mean(axis=1)).mean(axis=1) - np.sqrt(leader[index].mean(axis=1)).mean(axis=1), [2.5, 97.5]
    )
    assert difference["interval"] == pytest.approx(want, abs=1e-9)
    assert difference["interval"][0] <= difference["value"] <= difference["interval"][1]


def test_web_api_panel_report_and_leaderboard(made, jobs, live_server):
    server = live_server(jobs_dir=jobs, auth_token="eval-token")
    before = _folders(jobs)
    bad = server.request(
        "/api/evaluations", method="POST", data={"model": made["cls"].id, "dataset": made["seg_ds"].id}
    )
    assert bad.status == 400 and "holds mask labels" in bad.text
    assert server.request("/api/evaluations", method="POST", data={"model": made["cls"].id, "stage": "x"}).status == 400
    assert _folders(jobs) == before
    made_ = server.request(
        "/api/evaluations", method="POST", data={"model": made["cls"].id, "bootstrap": 20}, timeout=300
    )
    assert made_.status == 201, made_.text
    created = made_.json()
    assert created["summary"]["metrics"]["accuracy"] == load_evaluation(created["id"], jobs).metrics["accuracy"]
    page = server.get(created["url"])
    assert page.status == 200 and "Confusion matrix" in page.text and '<script nonce="' in page.text
    assert server.get_json(created["json"])["task"] == "classification"
    csv_file = server.get(f"/evaluations/{created['id']}/files/predictions.csv")
    assert csv_file.status == 200 and csv_file.text.startswith("input,truth,predicted")
    assert server.get(f"/evaluations/{created['id']}/files/job.json").status == 404
    model_page = server.get(f"/models/{made['cls'].id}")
    assert 'id="evaluate-form"' in model_page.text and created["url"] in model_page.text
    board = server.get_json(f"/api/leaderboard?dataset={made['cls_ds'].id}")
    assert created["id"] in [r["evaluation_id"] for r in board["rows"]]
    assert server.get("/").status == 200 and server.get_json("/api/jobs")  # evaluation jobs beside the others
    html = server.get(f"/leaderboard?dataset={made['cls_ds'].id}&stage=test")
    assert html.status == 200 and 'id="leaderboard"' in html.text
    # a dataset with evaluations is protected like one with models; an evaluation itself is deleted as any job
    unused = server.request(f"/api/jobs/{made['plus_ds'].id}", method="DELETE")
    assert unused.status == 200  # no model and no evaluation depends on it
    used = server.request(f"/api/jobs/{made['cls_ds'].id}", method="DELETE")
    assert used.status == 409 and "evaluation" in used.json()["error"]["message"]
    assert created["id"] in [d["id"] for d in used.json()["error"]["dependents"]]
    assert server.request(f"/api/jobs/{created['id']}", method="DELETE").status == 200
    assert not (jobs / created["id"]).exists()


def test_web_evaluation_of_labelled_files_goes_through_the_gate(made, jobs, live_server):
    """``POST /api/evaluations`` with a list file under the server's data roots gives the figures of the same
    records as a stored stage; a path outside the roots, a dataset beside labelled files and an MLflow server the
    operator did not allow are 400s naming their field, and nothing is created."""
    from digits_core.datasets import open_dataset

    inputs = jobs.parent / "web-labelled"  # the server's folder: one of its default data roots
    inputs.mkdir(exist_ok=True)
    with open_dataset(made["cls_ds"].id, jobs) as ds:
        features, truth = ds.read_all("test")
    lines = []
    for i, (f, t) in enumerate(zip(features, truth)):
        Image.fromarray(f[:, :, 0]).save(inputs / f"t{i}.png")
        lines.append(f"t{i}.png {LABELS[t]}")
    (inputs / "list.txt").write_text("\n".join(lines) + "\n")
    server = live_server(jobs_dir=jobs, auth_token="eval-files", cwd=jobs.parent)
    before = _folders(jobs)
    model = made["cls"].id
    for body, field in (
        ({"model": model, "folder": "/etc"}, "folder"),
        ({"model": model, "list": str(inputs / "list.txt"), "dataset": made["cls_ds"].id}, "dataset"),
        ({"model": model, "mlflow": "http://127.0.0.1:9"}, "mlflow"),
        ({"model": model, "mlflow": "sqlite:///mlflow.db"}, "mlflow"),
    ):
        answer = server.request("/api/evaluations", method="POST", data=body)
        assert answer.status == 400 and f"\n  {field}: " in answer.json()["error"]["message"], (body, answer.text)
    assert _folders(jobs) == before
    answer = server.request(
        "/api/evaluations",
        method="POST",
        data={"model": model, "list": str(inputs / "list.txt"), "bootstrap": 0},
        timeout=300,
    )
    assert answer.status == 201, answer.text
    summary = answer.json()["summary"]
    assert summary["inputs"] == [str((inputs / "list.txt").resolve())]
    stage = evaluate(model, jobs_dir=jobs, bootstrap=0).metrics
    assert summary["metrics"]["accuracy"] == pytest.approx(stage["accuracy"], abs=1e-12)


@pytest.mark.browser
def test_report_renders_in_a_browser_without_console_errors(made, jobs, live_server, chromium):
    result = evaluate(made["cls"].id, jobs_dir=jobs, bootstrap=20)
    server = live_server(jobs_dir=jobs, auth_token="eval-browser")
    pages = {
        "file": (result.folder / "report.html").as_uri(),
        "web": f"{server.url}/evaluations/{result.job.id}",
    }
    context = chromium.new_context(extra_http_headers={"Authorization": "Bearer eval-browser"})
    for where, url in pages.items():
        page = context.new_page()
        problems: list[str] = []
        page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: problems.append(str(exc)))
        page.goto(url)
        assert page.locator("table.confusion tbody tr").count() == 3, where
        assert page.locator("svg polyline").count() >= 3, where  # ROC and PR per class, the reliability diagram
        # the per-class table sorts on a click (the inline script ran, under the web page's CSP too)
        table = page.locator("table.sortable").first
        column = table.locator("tbody tr td:first-child")
        assert column.all_inner_texts() == LABELS[:3]  # class order
        table.locator("th").first.click()
        assert column.all_inner_texts() == sorted(LABELS[:3]), where
        table.locator("th").first.click()
        assert column.all_inner_texts() == sorted(LABELS[:3], reverse=True), where
        assert not problems, f"{where}: {problems}"
        page.close()
    context.close()
