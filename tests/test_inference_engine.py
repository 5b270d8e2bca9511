"""Inference on models trained by the real training engine (digits_core.engine.train).

Checks the contract between the engine's model jobs (model.json,
snapshots, preprocessing) and inference/export: LeNet on the engine's
synthetic shapes, a U-Net with a centre crop on its synthetic LV images.
"""

from __future__ import annotations

import numpy as np
import pytest

from digits_core import registry

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def engine_jobs(tmp_path_factory):
    from synthetic_plugins import SyntheticLV, SyntheticShapes

    from digits_core.datasets import create_dataset
    from digits_core.engine import train

    jobs_dir = tmp_path_factory.mktemp("engine-infer")
    registry.register(SyntheticShapes)
    registry.register(SyntheticLV)
    try:
        shapes = create_dataset(
            "synthetic-shapes", {"count": 96, "val_count": 16, "size": 16, "classes": 3}, workers=1, jobs_dir=jobs_dir
        )
        lv = create_dataset("synthetic-lv", {"count": 16, "val_count": 4, "size": 24}, workers=1, jobs_dir=jobs_dir)
    finally:
        registry.unregister(SyntheticShapes)
        registry.unregister(SyntheticLV)
    lenet = train(shapes.id, "lenet", name="lenet", epochs=2, batch_size=32, jobs_dir=jobs_dir)
    unet = train(lv.id, "unet", name="unet", epochs=1, batch_size=8, crop_size=16, jobs_dir=jobs_dir)
    return jobs_dir, lenet, unet, SyntheticShapes, SyntheticLV


def _entries(plugin_class, values, stage, count):
    plugin = plugin_class(**values)
    return [plugin.encode_entry(e) for e in list(plugin.itemize_entries(stage))[:count]]


def test_engine_classifier_infer_matches_load_snapshot(engine_jobs):
    """infer() equals an independent reference: the snapshot loaded with plain Keras, preprocessed with numpy."""
    from keras_reference import reference_predict

    from digits_core.inference import infer

    jobs_dir, lenet, _, shapes, _ = engine_jobs
    pairs = _entries(shapes, {"count": 96, "val_count": 16, "size": 16, "classes": 3, "seed": 0}, "val", 6)
    inputs = [(f"v{i}", np.asarray(f).reshape(16, 16, -1), int(label)) for i, (f, label) in enumerate(pairs)]
    result = infer(lenet.id, inputs, jobs_dir=jobs_dir)
    expected = reference_predict(lenet.path, np.stack([x for _, x, _ in inputs]))
    assert result.model.epoch == 2
    assert expected.shape == (6, 3) and np.allclose(expected.sum(axis=1), 1.0, atol=1e-5)
    assert np.allclose(result.outputs, expected, atol=1e-5)
    assert result.metrics["count"] == 6
    assert "Confusion matrix" in result.to_html()


def test_engine_writes_the_model_json_layout_the_hand_written_jobs_use(engine_jobs):
    """tests/test_inference_api.py builds model jobs by hand; they follow this layout, checked here on the engine's."""
    import json

    from keras_reference import check_model_json_layout

    _, lenet, unet, _, _ = engine_jobs
    for job in (lenet, unet):
        info = json.loads((job.path / "model.json").read_text())
        check_model_json_layout(info, exact=False)
        assert (job.path / info["preprocessing"]["mean_file"]).is_file()
        assert all((job.path / "snapshots" / s["file"]).is_file() for s in info["snapshots"])
    assert json.loads((unet.path / "model.json").read_text())["preprocessing"]["crop_size"] == 16


def test_engine_unet_with_crop_infer_and_export(engine_jobs, tmp_path):
    import tarfile

    from digits_core.inference import export_model, infer

    jobs_dir, _, unet, _, lv = engine_jobs
    pairs = _entries(lv, {"count": 16, "val_count": 4, "size": 24, "seed": 0}, "val", 2)
    inputs = [(f"lv{i}", np.asarray(f).reshape(24, 24, -1), np.asarray(m)) for i, (f, m) in enumerate(pairs)]
    result = infer(unet.id, inputs, jobs_dir=jobs_dir)
    assert result.samples[0].output.shape == (16, 16, 2)
    assert result.samples[0].ground_truth.shape == (16, 16)
    from keras_reference import reference_predict

    # The network's own outputs (plain Keras, numpy preprocessing with the centre crop), and the view's scores
    # computed from them against the centre of the mask: a crop off by a pixel or a transposed mask changes them.
    expected = reference_predict(unet.path, np.stack([x for _, x, _ in inputs]))
    assert np.allclose(result.outputs, expected, atol=1e-5)
    data = result.to_json()
    assert data["view"] == "image-segmentation"
    for (_, _, mask), sample, shown in zip(inputs, result.samples, data["samples"]):
        truth, predicted = mask[4:20, 4:20], np.argmax(sample.output, axis=-1)
        assert np.array_equal(sample.ground_truth, truth)
        scores = {s["class"]: s for s in shown["view"]["scores"]}
        assert sorted(scores) == sorted(int(c) for c in np.union1d(truth, predicted))
        for c, s in scores.items():
            t, p = truth == c, predicted == c
            assert (s["truth_pixels"], s["predicted_pixels"]) == (int(t.sum()), int(p.sum()))
            assert s["dice"] == pytest.approx(2 * (t & p).sum() / (t.sum() + p.sum()))
    archive = export_model(unet.id, tmp_path / "unet.tar.gz", jobs_dir=jobs_dir)
    with tarfile.open(archive) as tar:
        assert any(name.endswith(f"serving/{unet.id}/1/saved_model.pb") for name in tar.getnames())


def test_a_list_of_images_with_the_right_pixel_count_but_another_shape_is_prepared_image_by_image(engine_jobs):
    """The fast path joins a list of ready images into one batch: only images of exactly the model's shape.

    An image with the element count of a 16x16 one but another shape (8x32, a flattened row) is resized like any
    other odd-sized input, never reinterpreted as 16x16 by a reshape.
    """
    from digits_core.inference import infer
    from digits_core.inference.model import load_inference_model
    from digits_core.inference.reading import ready_batch

    jobs_dir, lenet, _, shapes, _ = engine_jobs
    pairs = _entries(shapes, {"count": 96, "val_count": 16, "size": 16, "classes": 3, "seed": 0}, "val", 2)
    right = np.asarray(pairs[0][0]).reshape(16, 16, 1)
    model = load_inference_model(lenet.id, jobs_dir=jobs_dir)
    assert model.feature_shape == (16, 16, 1) and right.dtype == model.feature_dtype
    wide = np.ascontiguousarray(np.asarray(pairs[1][0]).reshape(16, 16, 1)[::2].repeat(2, axis=1))  # 8x32
    flat = np.asarray(pairs[1][0]).reshape(256, 1, 1)
    for odd in (wide, flat):
        assert odd.size == right.size and odd.dtype == right.dtype
        assert ready_batch(model, [right, odd]) is None
        batch = infer(lenet.id, [right, odd], jobs_dir=jobs_dir)
        one_by_one = [infer(lenet.id, [("x", image)], jobs_dir=jobs_dir).outputs[0] for image in (right, odd)]
        assert np.allclose(batch.outputs, np.stack(one_by_one), atol=1e-6)
        assert not np.allclose(
            batch.outputs[1], infer(lenet.id, [odd.reshape(16, 16, 1)], jobs_dir=jobs_dir).outputs[0]
        )


CUSTOM_NET = """
import keras


@keras.saving.register_keras_serializable(package="toy_infer_net")
class Doubler(keras.layers.Layer):
    def call(self, x):
        return x * 2.0


def build_model(input_shape, num_outputs, **params):
    inputs = keras.Input(input_shape)
    x = Doubler()(inputs)
    x = keras.layers.Flatten()(x)
    return keras.Model(inputs, keras.layers.Dense(num_outputs, activation="softmax")(x))
"""


def test_custom_network_file_infer_and_export(engine_jobs, tmp_path):
    import tarfile

    from digits_core.engine import train
    from digits_core.inference import export_model, infer

    jobs_dir, lenet, _, shapes, _ = engine_jobs
    net = tmp_path / "toy_net.py"
    net.write_text(CUSTOM_NET)
    job = train(_dataset_of(lenet), str(net), name="custom", epochs=1, batch_size=32, jobs_dir=jobs_dir)
    pairs = _entries(shapes, {"count": 96, "val_count": 16, "size": 16, "classes": 3, "seed": 0}, "val", 2)
    result = infer(job.id, [np.asarray(f).reshape(16, 16, -1) for f, _ in pairs], jobs_dir=jobs_dir)
    assert result.outputs.shape == (2, 3)
    archive = export_model(job.id, tmp_path / "custom.tar.gz", format="keras", jobs_dir=jobs_dir)
    with tarfile.open(archive) as tar:
        network = [m for m in tar.getmembers() if m.name.endswith("/network.py")]
        assert network and b"class Doubler" in tar.extractfile(network[0]).read()


def _dataset_of(model_job):
    import json

    return json.loads((model_job.path / "model.json").read_text())["dataset_id"]
