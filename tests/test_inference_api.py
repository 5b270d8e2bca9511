"""Inference end to end: real datasets, real (tiny) Keras models trained here, real views.

Two throwaway data plugins are registered in process: a 3-class toy
classification set (a bright square in one of three places) and a toy
segmentation set (a bright rectangle; its mask) whose plugin also has an
inference form. Models are trained for a few epochs on the engine's
preprocessing and saved as model jobs the way the engine lays them out.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from wtforms import Form, IntegerField
from wtforms.validators import NumberRange

from digits_core import DataIngestion, Job, View, registry
from digits_core.errors import FormValidationError, InferenceError, JobNotFoundError

# The module fixtures train and save real Keras models.
pytestmark = pytest.mark.slow

LABELS = ["top-left", "centre", "bottom-right"]
SPOTS = {0: (0, 0), 1: (3, 3), 2: (5, 5)}


def toy_image(cls: int, seed: int) -> np.ndarray:
    """An 8×8 gray image with a 3×3 bright square at the class's place."""
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 40, (8, 8, 1)).astype(np.uint8)
    r, c = SPOTS[cls]
    image[r : r + 3, c : c + 3] = 220
    return image


def toy_rectangle(seed: int, size: int = 16):
    rng = np.random.default_rng(1000 + seed)
    image = rng.integers(0, 60, (size, size, 1)).astype(np.uint8)
    mask = np.zeros((size, size), np.int64)
    top, left = rng.integers(2, 8, 2)
    h, w = rng.integers(4, 7, 2)
    image[top : top + h, left : left + w] = rng.integers(180, 255)
    mask[top : top + h, left : left + w] = 1
    return image, mask


class ToyClassification(DataIngestion):
    plugin_id = "toy-infer-classes"
    title = "Toy classes (inference tests)"

    class _Form(Form):
        per_class = IntegerField("Images per class", default=20, validators=[NumberRange(min=1)])

    @staticmethod
    def get_dataset_form():
        return ToyClassification._Form

    @staticmethod
    def get_dataset_template(form):
        return "{{ form.per_class }}", {}

    def itemize_entries(self, stage):
        self.userdata["class_labels"] = LABELS
        if stage == "train":
            return [(c, i) for i in range(self.per_class) for c in range(3)]
        if stage == "val":
            return [(c, 100 + i) for i in range(3) for c in range(3)]
        return []

    def encode_entry(self, entry):
        cls, seed = entry
        return toy_image(cls, seed), cls


class IndexForm(Form):
    index = IntegerField("Record index", validators=[NumberRange(min=0)], description="toy record to segment")
    broken = IntegerField("Broken records", default=0, description="unreadable records to add (error handling)")


class ToySegmentation(DataIngestion):
    plugin_id = "toy-infer-masks"
    title = "Toy masks (inference tests)"

    class _Form(Form):
        count = IntegerField("Images", default=40, validators=[NumberRange(min=1)])

    @staticmethod
    def get_dataset_form():
        return ToySegmentation._Form

    @staticmethod
    def get_dataset_template(form):
        return "{{ form.count }}", {}

    @staticmethod
    def get_inference_form():
        return IndexForm

    def itemize_entries(self, stage):
        self.userdata["class_labels"] = ["background", "rectangle"]
        self.userdata["color_palette"] = [[0, 0, 0], [0, 255, 0]]
        if self.is_inference_db:
            return [self.index, *(f"broken-{k}" for k in range(self.broken or 0))] if stage == "test" else []
        if stage == "train":
            return list(range(self.count))
        if stage == "val":
            return list(range(500, 506))
        return []

    def encode_entry(self, entry):
        if isinstance(entry, str):
            raise OSError(f"record {entry} is truncated")
        return toy_rectangle(entry)


@pytest.fixture(scope="module")
def jobs_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("infer-jobs")


@pytest.fixture(scope="module", autouse=True)
def toy_plugins():
    registry.register(ToyClassification)
    registry.register(ToySegmentation)
    yield
    registry.unregister(ToyClassification)
    registry.unregister(ToySegmentation)


def _model_job(jobs_dir, dataset_id, name, task, build, mean_subtraction, crop_size, epochs, class_labels):
    """Train a Keras model on the dataset with the engine's preprocessing; save it as a model job."""
    import keras

    from digits_core.datasets import open_dataset
    from digits_core.engine.preprocessing import Preprocessing, compute_scale

    ds = open_dataset(dataset_id, jobs_dir)
    features, labels = ds.read_all("train")
    mean = ds.mean()
    prep = Preprocessing(
        mean_subtraction, mean, compute_scale(ds.feature_dtype(), features, mean), crop_size, ds.feature_shape()
    )
    x = prep.apply(features)
    y = prep.crop_label(labels) if task == "segmentation" else labels
    keras.utils.set_random_seed(0)
    model = build(prep.input_shape)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy")
    job = Job.create("model", name, jobs_dir=jobs_dir, dataset_id=ds.id)
    (job.path / "snapshots").mkdir()
    for epoch in range(1, epochs + 1):
        model.fit(x, y, epochs=8, batch_size=16, verbose=0)
        model.save(job.path / "snapshots" / f"epoch-{epoch:03d}.keras")
    info = {
        "network": "toy",
        "dataset_id": ds.id,
        "task": task,
        "class_labels": class_labels,
        "input_shape": list(prep.input_shape),
        "preprocessing": prep.save(job.path),
        "last_epoch": epochs,
        "dataset_plugin": ds.plugin_id,
        "feature_dtype": ds.feature_dtype(),
        "snapshots": [{"epoch": e, "file": f"epoch-{e:03d}.keras"} for e in range(1, epochs + 1)],
    }
    from keras_reference import check_model_json_layout

    # Exactly the layout tests/test_inference_engine.py checks the engine writes, so the two cannot drift apart.
    check_model_json_layout(info, exact=True)
    (job.path / "model.json").write_text(json.dumps(info))
    job.set_status("Done")
    return job


@pytest.fixture(scope="module")
def cls_model(jobs_dir):
    import keras

    from digits_core.datasets import create_dataset

    ds_job = create_dataset("toy-infer-classes", {"per_class": 12}, name="toy", workers=1, jobs_dir=jobs_dir)

    def build(shape):
        inputs = keras.Input(shape)
        x = keras.layers.Conv2D(6, 3, padding="same", activation="relu")(inputs)
        x = keras.layers.Flatten()(x)
        return keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(x))

    return _model_job(jobs_dir, ds_job.id, "toy-classifier", "classification", build, "image", None, 2, LABELS)


@pytest.fixture(scope="module")
def seg_model(jobs_dir):
    import keras

    from digits_core.datasets import create_dataset

    ds_job = create_dataset("toy-infer-masks", {"count": 24}, name="masks", workers=1, jobs_dir=jobs_dir)

    def build(shape):
        inputs = keras.Input(shape)
        x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
        return keras.Model(inputs, keras.layers.Conv2D(2, 1, activation="softmax")(x))

    return _model_job(
        jobs_dir, ds_job.id, "toy-segmenter", "segmentation", build, "pixel", 12, 1, ["background", "rectangle"]
    )


@pytest.fixture(scope="module")
def labelled_list(tmp_path_factory):
    """PNG files of known classes and a list file naming them with labels (names and indices)."""
    folder = tmp_path_factory.mktemp("inputs")
    lines = []
    for i in range(9):
        cls = i % 3
        name = f"img{i}.png"
        Image.fromarray(toy_image(cls, 200 + i)[:, :, 0]).save(folder / name)
        lines.append(f"{name} {LABELS[cls] if i % 2 else cls}")
    (folder / "list.txt").write_text("# toy list\n" + "\n".join(lines) + "\n")
    return folder


def _tf_reference(job, epoch, features):
    """The snapshot run by plain Keras on preprocessed features: the independent answer."""
    import keras

    from digits_core.engine.preprocessing import Preprocessing

    prep = Preprocessing.from_dict(json.loads((job.path / "model.json").read_text())["preprocessing"], job.path)
    model = keras.saving.load_model(job.path / "snapshots" / f"epoch-{epoch:03d}.keras")
    return np.asarray(model.predict_on_batch(prep.apply(features)))


# -- classification -------------------------------------------------------------


def test_top_n_matches_the_network_and_is_ordered(cls_model, labelled_list, jobs_dir):
    from digits_core.inference import infer

    result = infer(
        cls_model.id, [labelled_list / "img0.png", labelled_list / "img1.png"], jobs_dir=jobs_dir, top_n_classes=3
    )
    assert result.model.epoch == 2
    features = np.stack([toy_image(0, 200), toy_image(1, 201)])
    expected = _tf_reference(cls_model, 2, features)
    assert np.allclose(result.outputs, expected, atol=1e-5)
    for sample, probs in zip(result.samples, expected):
        assert [t["index"] for t in sample.top] == list(np.argsort(-probs))
        assert sum(t["probability"] for t in sample.top) == pytest.approx(1.0, abs=1e-5)
        assert sample.top[0]["label"] == LABELS[int(np.argmax(probs))]
    assert result.metrics is None


def test_labelled_list_accuracy_confusion_matrix_and_report(cls_model, labelled_list, jobs_dir, tmp_path):
    from digits_core.inference import infer

    result = infer(cls_model.id, [labelled_list / "list.txt"], jobs_dir=jobs_dir, epoch=1)
    assert result.model.epoch == 1 and len(result.samples) == 9
    truth = [i % 3 for i in range(9)]
    assert [s.ground_truth for s in result.samples] == truth
    predicted = np.argmax(result.outputs, axis=1)
    expected = np.zeros((3, 3), int)
    for t, p in zip(truth, predicted):
        expected[t, p] += 1
    metrics = result.metrics
    assert metrics["confusion_matrix"] == expected.tolist()
    assert metrics["top1_accuracy"] == pytest.approx(np.mean(predicted == np.array(truth)))
    assert metrics["top_k"] == 3 and metrics["top_k_accuracy"] == 1.0
    assert [c["total"] for c in metrics["per_class"]] == [3, 3, 3]

    path = result.save_html(tmp_path / "report.html")
    page = path.read_text()
    ids = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if dict(attrs).get("data-input-id"):
                ids.append(dict(attrs)["data-input-id"])

    Parser().feed(page)
    assert ids == [f"img{i}.png" for i in range(9)]
    assert "Confusion matrix" in page and "Per-class accuracy" in page
    data = result.to_json()
    json.dumps(data)
    assert data["metrics"]["confusion_matrix"] == expected.tolist()
    assert data["view_summary"]["summary"]["top1_accuracy"] == pytest.approx(metrics["top1_accuracy"])
    assert data["samples"][0]["view"]["ground_truth_label"] == "top-left"


def test_view_options_and_bad_inputs(cls_model, labelled_list, jobs_dir, tmp_path):
    from digits_core.inference import infer

    result = infer(cls_model.id, [labelled_list / "img0.png"], jobs_dir=jobs_dir, view_config={"top_n": "1"})
    assert len(result.to_json()["samples"][0]["view"]["predictions"]) == 1
    with pytest.raises(FormValidationError, match="top_n"):
        infer(cls_model.id, [labelled_list / "img0.png"], jobs_dir=jobs_dir, view_config={"top_n": "zero"})
    with pytest.raises(InferenceError, match="missing.png does not exist"):
        infer(cls_model.id, [tmp_path / "missing.png"], jobs_dir=jobs_dir)
    (tmp_path / "bad.txt").write_text("img0.png giraffe\n")
    (tmp_path / "img0.png").write_bytes((labelled_list / "img0.png").read_bytes())
    with pytest.raises(InferenceError, match="giraffe"):
        infer(cls_model.id, [tmp_path / "bad.txt"], jobs_dir=jobs_dir)
    with pytest.raises(InferenceError, match="no snapshot for epoch 7"):
        infer(cls_model.id, [labelled_list / "img0.png"], jobs_dir=jobs_dir, epoch=7)
    with pytest.raises(JobNotFoundError):
        infer("nope", [labelled_list / "img0.png"], jobs_dir=jobs_dir)


def test_resized_rgb_and_array_inputs_go_through_dataset_preparation(cls_model, jobs_dir, tmp_path):
    from digits_core.inference import infer

    big = np.repeat(np.repeat(toy_image(2, 7), 4, axis=0), 4, axis=1)[:, :, 0]
    Image.fromarray(np.stack([big] * 3, axis=2)).save(tmp_path / "big.png")  # 32×32 RGB
    result = infer(cls_model.id, [tmp_path / "big.png", ("raw", toy_image(2, 7))], jobs_dir=jobs_dir)
    assert result.samples[0].input_data.shape == (8, 8, 1)
    assert [s.input_id for s in result.samples] == [str(tmp_path / "big.png"), "raw"]


def test_a_ready_batch_takes_the_fast_path_with_the_same_results(cls_model, jobs_dir):
    """A ``[N, H, W, C]`` array (or a list of such images) of the dataset's shape and dtype goes to the network as
    it is; the results match the per-image path and plain Keras, and samples are built only when read."""
    from digits_core.inference import SampleList, infer
    from digits_core.inference.model import load_inference_model
    from digits_core.inference.reading import ready_batch

    images = np.stack([toy_image(i % 3, 300 + i) for i in range(6)])
    model = load_inference_model(cls_model.id, jobs_dir=jobs_dir)
    assert ready_batch(model, images) is images and np.array_equal(ready_batch(model, list(images)), images)
    assert ready_batch(model, [images[0], images[1, :4]]) is None  # another size: read and prepared one by one
    # Sizes that differ although their rows add up to two images: still read one by one, never regrouped.
    assert ready_batch(model, [images[0, :-1], np.concatenate([images[1], images[1, :1]])]) is None
    assert ready_batch(model, images.astype(np.float32)) is None and ready_batch(model, [("a", images[0])]) is None

    expected = _tf_reference(cls_model, 2, images)
    slow = infer(cls_model.id, [("x", image) for image in images], jobs_dir=jobs_dir, top_n_classes=3)
    for given in (images, list(images)):
        result = infer(cls_model.id, given, jobs_dir=jobs_dir, top_n_classes=3)
        assert isinstance(result.samples, SampleList) and len(result.samples) == 6
        assert result.samples._built == [None] * 6  # nothing built until read
        assert np.allclose(result.outputs, expected, atol=1e-5) and np.array_equal(result.outputs, slow.outputs)
        assert [s.input_id for s in result.samples] == [f"array-{i}" for i in range(6)]
        assert [s.top for s in result.samples] == [s.top for s in slow.samples]
        assert [t["index"] for t in result.samples[-1].top] == list(np.argsort(-expected[-1]))[:3]
        assert result.samples[2] is result.samples[2] and result.samples[1:3] == [result.samples[1], result.samples[2]]
        assert np.array_equal(result.samples[0].input_data, images[0]) and result.samples[0].ground_truth is None
        assert result.to_json(include_view=False)["samples"][4]["top"] == slow.samples[4].top
    with pytest.raises(IndexError):
        result.samples[6]


def test_model_is_cached_and_compiled_once(cls_model, jobs_dir):
    from digits_core.inference import infer
    from digits_core.inference.model import load_inference_model

    first = load_inference_model(cls_model.id, jobs_dir=jobs_dir)
    for _ in range(3):
        infer(cls_model.id, [toy_image(0, 1)], jobs_dir=jobs_dir)
    infer(cls_model.id, [toy_image(0, 1)] * 5, jobs_dir=jobs_dir)
    assert load_inference_model(cls_model.id, jobs_dir=jobs_dir) is first
    assert first._function.experimental_get_tracing_count() == 1


def test_third_party_view_replaces_the_builtin_without_core_changes(cls_model, jobs_dir):
    from digits_core.inference import infer

    class PlainView(View):
        plugin_id = "image-classification"
        title = "Plain"

        def process_data(self, input_id, input_data, output_data, ground_truth=None):
            return {"id": input_id, "best": int(np.argmax(output_data)), "truth": ground_truth}

        def get_view_template(self, data):
            return '<p class="plain">{{ id }}: {{ best }} (truth {{ truth }})</p>', data

    registry.register(PlainView, replace=True)
    try:
        result = infer(cls_model.id, [("x", toy_image(1, 3), 1)], jobs_dir=jobs_dir)
        page = result.to_html()
        assert '<p class="plain">x: ' in page and "(truth 1)" in page
        assert "dcv-sample" not in page
    finally:
        registry.unregister(PlainView)
    assert "dcv-sample" in infer(cls_model.id, [toy_image(1, 3)], jobs_dir=jobs_dir).to_html()


# -- segmentation -----------------------------------------------------------------


def test_segmentation_with_masks_from_list_file_and_crop(seg_model, jobs_dir, tmp_path):
    from digits_core.inference import infer

    lines = []
    for i in range(3):
        image, mask = toy_rectangle(700 + i)
        Image.fromarray(image[:, :, 0]).save(tmp_path / f"s{i}.png")
        Image.fromarray(mask.astype(np.uint8)).save(tmp_path / f"s{i}-mask.png")
        lines.append(f"s{i}.png s{i}-mask.png")
    (tmp_path / "list.txt").write_text("\n".join(lines))
    result = infer(seg_model.id, [tmp_path / "list.txt"], jobs_dir=jobs_dir)
    sample = result.samples[0]
    assert sample.input_data.shape == (12, 12, 1) and sample.output.shape == (12, 12, 2)
    truth = toy_rectangle(700)[1][2:14, 2:14]
    assert np.array_equal(sample.ground_truth, truth)
    data = result.to_json()
    predicted = np.argmax(sample.output, axis=-1)
    inter = np.sum((predicted == 1) & (truth == 1))
    dice = 2 * inter / (np.sum(predicted == 1) + np.sum(truth == 1))
    assert data["samples"][0]["view"]["mean_dice"] == pytest.approx(dice)
    assert data["view_header"]["legend"][-1]["label"] == "rectangle"
    page = result.to_html()
    assert page.count('class="dsv-sample"') == 3 and "Mean Dice" in page


def test_segmentation_through_the_plugin_inference_form(seg_model, jobs_dir):
    from digits_core.inference import infer

    result = infer(seg_model.id, form_data={"index": "3"}, jobs_dir=jobs_dir)
    assert [s.input_id for s in result.samples] == ["3"]
    assert np.array_equal(result.samples[0].ground_truth, toy_rectangle(3)[1][2:14, 2:14])
    # The view's Dice is the real one (recomputed here) and beats any constant prediction by far.
    from keras_reference import constant_predictor_dice, dice

    truth = result.samples[0].ground_truth
    ours = dice(truth, np.argmax(result.samples[0].output, axis=-1), 2)
    reported = result.to_json()["samples"][0]["view"]["mean_dice"]
    assert reported == pytest.approx(ours, abs=1e-6)
    assert reported >= constant_predictor_dice(truth, 2) + 0.5, (reported, constant_predictor_dice(truth, 2))
    with pytest.raises(FormValidationError, match="index"):
        infer(seg_model.id, form_data={"index": "-1"}, jobs_dir=jobs_dir)


def test_bad_inputs_are_skipped_and_reported_within_max_errors(
    cls_model, seg_model, labelled_list, jobs_dir, tmp_path, capsys
):
    from digits_core.cli import main
    from digits_core.inference import infer

    (tmp_path / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    inputs = [labelled_list / f"img{i}.png" for i in range(3)] + [tmp_path / "broken.png"]
    result = infer(cls_model.id, inputs, jobs_dir=jobs_dir, max_errors=1)
    assert [Path(s.input_id).name for s in result.samples] == ["img0.png", "img1.png", "img2.png"]
    assert [e["input"] for e in result.errors] == [str(tmp_path / "broken.png")]
    assert "is not a readable image" in result.errors[0]["error"]
    assert result.to_json()["errors"] == result.errors
    assert result.page_info()["Skipped inputs"].startswith(f"1 (first: {tmp_path / 'broken.png'}: ")
    with pytest.raises(InferenceError, match=r"1 of 4 inputs failed, more than max-errors allows \(0\): /.*broken.png"):
        infer(cls_model.id, inputs, jobs_dir=jobs_dir, max_errors=0)
    # The plugin's inference form: one broken record among the entries is skipped, named by its str().
    result = infer(seg_model.id, form_data={"index": "3", "broken": "1"}, jobs_dir=jobs_dir, max_errors="50%")
    assert [s.input_id for s in result.samples] == ["3"]
    assert result.errors == [{"input": "broken-0", "error": "OSError: record broken-0 is truncated"}]
    with pytest.raises(InferenceError, match="broken-0: OSError: record broken-0 is truncated"):
        infer(seg_model.id, form_data={"index": "3", "broken": "1"}, jobs_dir=jobs_dir)
    # The command line: the same rule, skipped inputs listed on stderr.
    capsys.readouterr()
    args = ["--jobs-dir", str(jobs_dir), "infer", "--model", cls_model.id, *map(str, inputs)]
    assert main(args + ["--max-errors", "1"]) == 0
    captured = capsys.readouterr()
    assert "img2.png" in captured.out and f"skipped: {tmp_path / 'broken.png'}: " in captured.err
    assert main(args + ["--max-errors", "0"]) == 1
    assert "error: 1 of 4 inputs failed" in capsys.readouterr().err


def test_a_view_whose_init_raises_is_one_error_line(cls_model, labelled_list, jobs_dir, capsys):
    from digits_core.cli import main

    class BrokenInitView(View):
        plugin_id = "broken-init"

        def __init__(self, dataset, **config):
            raise KeyError("color_palette")

        def process_data(self, input_id, input_data, output_data, ground_truth=None):
            return None

        def get_view_template(self, data):
            return "", {}

    registry.register(BrokenInitView)
    try:
        capsys.readouterr()
        args = [
            "--jobs-dir",
            str(jobs_dir),
            "infer",
            "--model",
            cls_model.id,
            "--view",
            "broken-init",
            str(labelled_list / "img0.png"),
            "--out",
            str(jobs_dir / "r.html"),
        ]
        assert main(args) == 1
        err = capsys.readouterr().err
        assert err.strip() == "error: plugin \"broken-init\" failed in View.__init__: KeyError: 'color_palette'"
        assert main(["-v", *args]) == 1
        assert "Traceback" in capsys.readouterr().err
    finally:
        registry.unregister(BrokenInitView)


# -- command line -------------------------------------------------------------------


def test_cli_html_json_and_plugin_form_options(cls_model, seg_model, labelled_list, jobs_dir, tmp_path, capsys):
    from digits_core.cli import main

    out = tmp_path / "r.html"
    assert (
        main(
            [
                "--jobs-dir",
                str(jobs_dir),
                "infer",
                "--model",
                cls_model.id,
                "--view-option",
                "top_n=2",
                str(labelled_list / "list.txt"),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert out.read_text().count('class="dcv-sample') == 9
    capsys.readouterr()
    assert (
        main(
            [
                "--jobs-dir",
                str(jobs_dir),
                "infer",
                "--model",
                cls_model.id,
                "--epoch",
                "1",
                "--json",
                str(labelled_list / "img3.png"),
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["model"]["epoch"] == 1 and len(data["samples"][0]["top"]) == 3
    assert main(["--jobs-dir", str(jobs_dir), "infer", "--model", seg_model.id, "--index", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["samples"][0]["input_id"] == "2"
    assert (
        main(
            [
                "--jobs-dir",
                str(jobs_dir),
                "infer",
                "--model",
                cls_model.id,
                "--view-option",
                "bad",
                str(labelled_list / "img3.png"),
            ]
        )
        == 2
    )
    assert "k=v" in capsys.readouterr().err
    assert main(["--jobs-dir", str(jobs_dir), "infer", "--model", cls_model.id, str(labelled_list / "list.txt")]) == 0
    text = capsys.readouterr().out
    assert "img8.png" in text and "top-1 accuracy" in text
    assert main(["--jobs-dir", str(jobs_dir), "infer", "--model", seg_model.id, "--index", "4"]) == 0
    assert "classes 0" in capsys.readouterr().out


# -- export -----------------------------------------------------------------------

PLAIN_TF_SCRIPT = r"""
import json, sys
import numpy as np
import tensorflow as tf
root = sys.argv[1]
results = {}
for name in json.loads(sys.argv[2]):
    serve = tf.saved_model.load(f"{root}/{name}/saved_model").signatures["serving_default"]
    images = np.load(f"{root}/{name}-images.npy")
    np.save(f"{root}/{name}-outputs.npy", serve(images=tf.constant(images))["outputs"].numpy())
    big = np.repeat(np.repeat(images[:1], 2, axis=1), 2, axis=2)
    results[name] = list(serve(images=tf.constant(big))["outputs"].shape)
results["digits_core_imported"] = any(m.startswith("digits") for m in sys.modules)
print(json.dumps(results))
"""


def test_export_round_trip_with_plain_tensorflow(cls_model, seg_model, jobs_dir, tmp_path):
    import subprocess
    import sys
    import tarfile

    from digits_core.cli import main
    from digits_core.inference import export_model, infer

    cls_archive = tmp_path / "cls.tar.gz"
    assert main(["--jobs-dir", str(jobs_dir), "export", "--model", cls_model.id, "--out", str(cls_archive)]) == 0
    seg_archive = export_model(seg_model.id, tmp_path / "seg.tar.gz", jobs_dir=jobs_dir)
    names = []
    expected = {}
    inputs = {
        cls_archive: np.stack([toy_image(c, 300 + c) for c in range(3)]),
        seg_archive: np.stack([toy_rectangle(900 + i)[0] for i in range(2)]),
    }
    for archive, (job, images) in zip(inputs, [(cls_model, inputs[cls_archive]), (seg_model, inputs[seg_archive])]):
        with tarfile.open(archive) as tar:
            members = tar.getnames()
            tar.extractall(tmp_path, filter="data")
        name = members[0].split("/")[0]
        assert name == f"{job.id}-epoch-{2 if job is cls_model else 1:03d}"
        assert {f"{name}/info.json", f"{name}/mean.npy", f"{name}/labels.txt"} <= set(members)
        info = json.loads((tmp_path / name / "info.json").read_text())
        assert info["signature"]["input"]["dtype"] == "uint8"
        assert info["task"] == ("classification" if job is cls_model else "segmentation")
        np.save(tmp_path / f"{name}-images.npy", images)
        expected[name] = infer(job.id, list(images), jobs_dir=jobs_dir).outputs
        names.append(name)
    labels = (tmp_path / names[0] / "labels.txt").read_text().split()
    assert labels == LABELS
    env = {"PATH": "/usr/bin:/bin", "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run(
        [sys.executable, "-c", PLAIN_TF_SCRIPT, str(tmp_path), json.dumps(names)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["digits_core_imported"] is False
    for name in names:
        assert np.allclose(np.load(tmp_path / f"{name}-outputs.npy"), expected[name], atol=1e-5)
    assert report[names[0]] == [1, 3] and report[names[1]] == [1, 12, 12, 2]


def test_keras_format_export(cls_model, jobs_dir, tmp_path):
    import tarfile

    from digits_core.inference import export_model

    archive = export_model(cls_model.id, tmp_path / "k.tar.gz", epoch=1, format="keras", jobs_dir=jobs_dir)
    with tarfile.open(archive) as tar:
        members = set(tar.getnames())
    name = f"{cls_model.id}-epoch-001"
    assert {f"{name}/model.keras", f"{name}/info.json", f"{name}/labels.txt", f"{name}/mean.npy"} <= members

    # Two downloads of one epoch to one file at once (the web's per-epoch Download): both finish, the
    # archive is whole, and no temporary file is left behind.
    from concurrent.futures import ThreadPoolExecutor

    same = tmp_path / "same.tar.gz"
    with ThreadPoolExecutor(2) as pool:
        done = list(
            pool.map(lambda _: export_model(cls_model.id, same, epoch=1, format="keras", jobs_dir=jobs_dir), range(4))
        )
    assert done == [same] * 4
    with tarfile.open(same) as tar:
        assert members == set(tar.getnames())
    assert not list(tmp_path.glob(".same.tar.gz.*"))
    with pytest.raises(InferenceError, match="Unknown export format"):
        export_model(cls_model.id, tmp_path / "x.tar.gz", format="pmml", jobs_dir=jobs_dir)


# -- the bundled image data plugin -------------------------------------------------------


def test_image_files_prepared_like_the_image_plugin_does(jobs_dir, tmp_path):
    """Positional inputs (core image preparation) and the plugin's inference form give the same result."""
    import keras

    from digits_core.datasets import create_dataset
    from digits_core.inference import infer

    rng = np.random.default_rng(5)
    for cls, name in enumerate(["dark", "bright"]):
        (tmp_path / "train" / name).mkdir(parents=True)
        for i in range(6):
            pixels = rng.integers(0, 120, (12, 20, 3)) + 120 * cls
            Image.fromarray(pixels.astype(np.uint8)).save(tmp_path / "train" / name / f"{i}.png")
    rgba = np.concatenate([rng.integers(0, 255, (12, 20, 3)), rng.integers(0, 255, (12, 20, 1))], axis=2)
    Image.fromarray(rgba.astype(np.uint8), "RGBA").save(tmp_path / "rgba.png")
    files = sorted(str(p) for p in (tmp_path / "train").rglob("*.png"))[::3] + [str(tmp_path / "rgba.png")]
    (tmp_path / "list.txt").write_text("".join(f"{f} {0 if '/dark/' in f else 1}\n" for f in files))
    ds_job = create_dataset(
        "image-classification",
        {
            "folder": str(tmp_path / "train"),
            "image_type": "grayscale",
            "width": 8,
            "height": 8,
            "resize_mode": "crop",
            "val_percent": 0,
        },
        workers=1,
        jobs_dir=jobs_dir,
    )

    def build(shape):
        inputs = keras.Input(shape)
        return keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(keras.layers.Flatten()(inputs)))

    job = _model_job(jobs_dir, ds_job.id, "images", "classification", build, "image", None, 1, ["bright", "dark"])
    positional = infer(job.id, [tmp_path / "list.txt"], jobs_dir=jobs_dir)
    plugin = infer(job.id, form_data={"image_list": str(tmp_path / "list.txt"), "show_labels": True}, jobs_dir=jobs_dir)
    assert [s.input_id for s in plugin.samples] == [s.input_id for s in positional.samples] == files
    for a, b in zip(positional.samples, plugin.samples):
        assert a.input_data.shape == (8, 8, 1)
        assert np.array_equal(a.input_data, b.input_data), a.input_id
    assert np.allclose(positional.outputs, plugin.outputs)
    assert positional.metrics["count"] == plugin.metrics["count"] == len(files)
