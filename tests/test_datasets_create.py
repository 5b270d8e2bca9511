"""create_dataset / open_dataset with a synthetic in-process data plugin, real LMDB, 2 worker processes."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import wtforms

from digits_core import DataIngestion, hookimpl, registry
from digits_core.cli.dataset_cmd import job_status_text
from digits_core.datasets import EncodedImage, create_dataset, open_dataset
from digits_core.datasets.create import parse_max_errors
from digits_core.errors import DatasetError, FormValidationError
from digits_core.jobs import JobStore


class SynthForm(wtforms.Form):
    n = wtforms.IntegerField("Train entries", default=40, validators=[wtforms.validators.NumberRange(min=0)])
    n_val = wtforms.IntegerField("Val entries", default=0)
    dtype = wtforms.SelectField("Feature dtype", choices=["uint8", "uint16", "int16", "float32"], default="uint8")
    label = wtforms.SelectField("Label kind", choices=["class", "regression", "vector", "mask"], default="class")
    fail_every = wtforms.IntegerField("Fail every k-th entry", default=0)
    odd_shape_at = wtforms.IntegerField("Entry with another shape", default=-1)
    encoded = wtforms.BooleanField("Store PNG", default=False)
    sleep = wtforms.FloatField("Seconds per entry", default=0.0)
    itemize_fails = wtforms.BooleanField("Itemize raises", default=False)


def synth_feature(dtype: str, index: int, shape=(6, 5, 2)) -> np.ndarray:
    rng = np.random.default_rng(index)
    if dtype == "float32":
        return rng.standard_normal(shape).astype(np.float32)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


class SynthIngestion(DataIngestion):
    plugin_id = "test-synth"
    title = "Synthetic test data"

    @staticmethod
    def get_dataset_form():
        return SynthForm

    @staticmethod
    def get_dataset_template(form):
        return "{{ form.n() }}", {"form": form}

    def itemize_entries(self, stage):
        if self.itemize_fails:
            raise RuntimeError("the source folder vanished")
        if stage == "train":
            return list(range(self.n))
        if stage == "val":
            return list(range(1000, 1000 + self.n_val))
        return []

    def encode_entry(self, entry):
        if self.sleep:
            time.sleep(self.sleep)
        if self.fail_every and entry % self.fail_every == self.fail_every - 1:
            raise ValueError(f"entry {entry} is broken")
        shape = (4, 4, 2) if entry == self.odd_shape_at else (6, 5, 2)
        if self.encoded:
            gray = synth_feature("uint8", entry, (6, 5, 1))
            return EncodedImage.from_array(gray, "png"), entry % 4
        feature = synth_feature(self.dtype, entry, shape)
        if self.label == "class":
            label = entry % 4
        elif self.label == "regression":
            label = float(entry) / 3
        elif self.label == "vector":
            label = np.array([entry, -entry, 0.5], np.float32)
        else:
            label = (np.arange(30).reshape(6, 5) + entry) % 3
            label = label.astype(np.uint8)
        return feature, label


@pytest.fixture
def synth():
    registry.register(SynthIngestion)
    yield SynthIngestion
    registry.unregister(SynthIngestion)


def job_files(job) -> list[str]:
    """The job folder's files, without the owner's lock file (see digits_core.jobs)."""
    return sorted(p.name for p in job.path.iterdir() if p.name != "job.lock")


@pytest.fixture
def jobs(tmp_path):
    return tmp_path / "jobs"


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int16", "float32"])
def test_two_workers_store_each_dtype_bit_exactly(synth, jobs, dtype):
    job = create_dataset("test-synth", {"n": 90, "n_val": 7, "dtype": dtype}, name="d", workers=2, jobs_dir=jobs)
    assert job.status.value == "Done"
    assert [s for s, _ in job.data["status_history"]] == ["Initialized", "Running", "Done"]
    ds = open_dataset(job.id, jobs_dir=jobs)
    expected = np.stack([synth_feature(dtype, i) for i in range(90)])
    features, labels = ds.read_all("train")
    assert features.dtype == np.dtype(dtype) and features.shape == (90, 6, 5, 2)
    assert features.tobytes() == expected.tobytes()
    assert labels.dtype == np.int64 and labels.tolist() == [i % 4 for i in range(90)]
    f, l = ds.read_batch("train", 10, 20)
    assert f.tobytes() == expected[10:20].tobytes() and l.tolist() == [i % 4 for i in range(10, 20)]
    batches = list(ds.iter_batches("train", 32))
    assert [len(b[0]) for b in batches] == [32, 32, 26]
    assert np.concatenate([b[0] for b in batches]).tobytes() == expected.tobytes()
    f, _ = ds.read_indexes("train", [89, 0, 45])
    assert f.tobytes() == expected[[89, 0, 45]].tobytes()
    copy = pickle.loads(pickle.dumps(ds))  # e.g. sent to a spawned process
    assert copy.read_batch("train", 3, 4)[0].tobytes() == expected[3:4].tobytes()
    ds.close()  # the shared LMDB environment stays open for the other reader
    assert copy.read_batch("train", 5, 6)[0].tobytes() == expected[5:6].tobytes()
    assert ds.read_batch("train", 7, 8)[0].tobytes() == expected[7:8].tobytes()  # reopens
    copy.close()
    ds.close()
    assert ds.stages == ["train", "val"] and ds.count("val") == 7 and ds.count("test") == 0
    assert ds.feature_shape("train") == (6, 5, 2) and ds.feature_dtype("val") == dtype
    assert ds.label_kind == "class" and ds.plugin_id == "test-synth"
    assert ds.label_histogram("train") == [23, 23, 22, 22] and ds.num_classes == 4
    assert ds.class_labels == ["0", "1", "2", "3"]  # the plugin named none: named by index
    mean = ds.mean()
    assert mean.dtype == np.float32 and mean.shape == (6, 5, 2)
    np.testing.assert_allclose(mean, expected.astype(np.float64).mean(axis=0), rtol=1e-6, atol=1e-4)
    info = json.loads((job.path / "dataset" / "dataset.json").read_text())
    assert info["stages"]["train"]["count"] == 90 and info["feature"] == {
        "shape": [6, 5, 2],
        "dtype": dtype,
        "layout": "HWC",
    }
    assert info["timing"]["total_s"] > 0 and info["workers"] == 2 and info["mean"]["exact"] is True


@pytest.mark.parametrize(
    "kind, dtype, shape", [("regression", "float64", ()), ("vector", "float32", (3,)), ("mask", "uint8", (6, 5))]
)
def test_label_kinds_round_trip(synth, jobs, kind, dtype, shape):
    job = create_dataset("test-synth", {"n": 12, "label": kind}, workers=1, jobs_dir=jobs)
    ds = open_dataset(job.path)
    _, labels = ds.read_all("train")
    assert labels.dtype == np.dtype(dtype) and labels.shape == (12, *shape)
    expected = [
        SynthIngestion(
            **{
                **{"n": 12, "label": kind},
                "dtype": "uint8",
                "encoded": False,
                "sleep": 0,
                "fail_every": 0,
                "odd_shape_at": -1,
            }
        ).encode_entry(i)[1]
        for i in range(12)
    ]
    assert np.array_equal(labels, np.stack([np.asarray(e, dtype) for e in expected]))
    assert ds.label_kind == ("mask" if kind == "mask" else "regression")


def test_records_are_in_the_same_order_whatever_the_worker_count(synth, jobs):
    a = open_dataset(create_dataset("test-synth", {"n": 70}, workers=1, jobs_dir=jobs).path)
    b = open_dataset(create_dataset("test-synth", {"n": 70}, workers=2, jobs_dir=jobs).path)
    assert a.read_records("train", 0, 70) == b.read_records("train", 0, 70)


def test_encoded_features_are_decoded_by_default(synth, jobs):
    ds = open_dataset(create_dataset("test-synth", {"n": 9, "encoded": True}, workers=2, jobs_dir=jobs).path)
    features, _ = ds.read_all("train")
    expected = np.stack([synth_feature("uint8", i, (6, 5, 1)) for i in range(9)])
    assert features.dtype == np.uint8 and np.array_equal(features, expected)
    raw, labels = ds.read_batch("train", 0, 2, decode=False)
    assert isinstance(raw[0], bytes) and raw[0].startswith(b"\x89PNG") and labels.tolist() == [0, 1]
    assert ds.feature_encodings("train") == {"png": 9}
    np.testing.assert_allclose(ds.mean(), expected.mean(axis=0), atol=1e-4)


def test_bad_entries_are_skipped_and_reported(synth, jobs):
    job = create_dataset(
        "test-synth", {"n": 40, "fail_every": 10, "odd_shape_at": 4}, workers=2, jobs_dir=jobs, max_errors=5
    )
    ds = open_dataset(job.id, jobs_dir=jobs)
    assert ds.count("train") == 35
    errors = ds.errors()
    assert [e["entry"] for e in errors] == ["4", "9", "19", "29", "39"]
    assert errors[1]["error"] == "ValueError: entry 9 is broken"
    assert "differs from the dataset's" in errors[0]["error"] and "(4, 4, 2)" in errors[0]["error"]
    assert ds.info["errors"]["skipped"] == 5 and job.data["dataset"]["skipped"] == 5
    _, labels = ds.read_all("train")
    assert labels.tolist() == [i % 4 for i in range(40) if i != 4 and i % 10 != 9]


def test_too_many_errors_fail_the_job_and_publish_nothing(synth, jobs):
    with pytest.raises(DatasetError, match="max-errors") as info:
        create_dataset("test-synth", {"n": 40, "fail_every": 2}, workers=2, jobs_dir=jobs)
    assert "entry 1 is broken" in str(info.value)
    (job,) = JobStore(jobs).list(kind="dataset")
    assert job.status.value == "Error" and "max-errors" in job.error
    assert job_files(job) == ["errors.jsonl", "job.json", "progress.json"]
    assert json.loads((job.path / "progress.json").read_text())["status"] == "Error"
    with pytest.raises(DatasetError, match="no published dataset"):
        open_dataset(job.id, jobs_dir=jobs)


def test_itemize_failure_names_the_plugin(synth, jobs):
    with pytest.raises(
        DatasetError,
        match=r'Plugin "test-synth" failed to list the entries of stage "train": '
        r"RuntimeError: the source folder vanished",
    ):
        create_dataset("test-synth", {"itemize_fails": True}, jobs_dir=jobs)
    (job,) = JobStore(jobs).list()
    assert job.status.value == "Error"


def test_invalid_form_values_name_the_field_before_any_job_exists(synth, jobs):
    with pytest.raises(FormValidationError) as info:
        create_dataset("test-synth", {"n": "many", "dtype": "int64"}, jobs_dir=jobs)
    assert set(info.value.errors) == {"n", "dtype"}
    assert "n:" in str(info.value) and 'dataset form of plugin "test-synth"' in str(info.value)
    assert not jobs.exists() or not any(jobs.iterdir())
    with pytest.raises(DatasetError, match="max_errors"):
        create_dataset("test-synth", {}, jobs_dir=jobs, max_errors="lots")


def test_progress_callback_file_and_created_hook(synth, jobs):
    snapshots, created = [], []

    class Hooks:
        @hookimpl
        def digits_dataset_created(self, dataset):
            created.append((dataset.id, (dataset.path / "dataset.json").is_file()))

    hooks = Hooks()
    registry.register(hooks)
    try:
        job = create_dataset("test-synth", {"n": 50, "n_val": 10}, workers=2, jobs_dir=jobs, progress=snapshots.append)
    finally:
        registry.unregister(hooks)
    assert created == [(job.id, True)]
    assert snapshots[-1]["done"] == snapshots[-1]["total"] == 60
    assert snapshots[-1]["stages"]["val"] == {"done": 10, "total": 10, "errors": 0}
    assert {s["stage"] for s in snapshots} == {"train", "val"}
    final = json.loads((job.path / "progress.json").read_text())
    assert final["status"] == "Done" and final["done"] == 60


def test_interrupt_marks_the_job_aborted_and_publishes_nothing(jobs):
    class Interrupted(SynthIngestion):
        plugin_id = "test-interrupted"

        def encode_entry(self, entry):
            if entry == 20:
                raise KeyboardInterrupt
            return super().encode_entry(entry)

    registry.register(Interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            create_dataset("test-interrupted", {"n": 40}, workers=1, jobs_dir=jobs)
    finally:
        registry.unregister(Interrupted)
    (job,) = JobStore(jobs).list()
    assert job.status.value == "Aborted"
    assert job_files(job) == ["job.json", "progress.json"]


def test_parse_max_errors():
    assert parse_max_errors(None) == 0.05
    assert parse_max_errors("10") == 10 and parse_max_errors(3) == 3
    assert parse_max_errors("0.1") == 0.1 and parse_max_errors("5%") == 0.05
    for bad in ("-1", "1.5x", "150%", True):
        with pytest.raises(DatasetError):
            parse_max_errors(bad)


CHILD = textwrap.dedent("""
    import sys, time, wtforms
    from digits_core import DataIngestion, registry
    from digits_core.datasets import create_dataset
    import numpy as np

    class Form(wtforms.Form):
        n = wtforms.IntegerField("n", default=4000)

    class Slow(DataIngestion):
        plugin_id = "test-slow"
        @staticmethod
        def get_dataset_form():
            return Form
        @staticmethod
        def get_dataset_template(form):
            return "", {}
        def itemize_entries(self, stage):
            return list(range(self.n)) if stage == "train" else []
        def encode_entry(self, entry):
            time.sleep(0.002)
            return np.full((8, 8, 1), entry % 256, np.uint8), entry % 2

    registry.register(Slow)
    create_dataset("test-slow", {}, workers=2, jobs_dir=sys.argv[1])
""")


@pytest.mark.slow
def test_sigkill_mid_job_publishes_nothing(tmp_path, jobs):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.Popen([sys.executable, str(script), str(jobs)], start_new_session=True)
    try:
        deadline = time.time() + 60
        progress = None
        while time.time() < deadline:
            found = list(jobs.glob("*/progress.json")) if jobs.exists() else []
            if found:
                try:
                    progress = json.loads(found[0].read_text())
                except (OSError, ValueError):
                    progress = None
                if progress and progress["done"] > 0:
                    break
            time.sleep(0.02)
        assert progress and 0 < progress["done"] < progress["total"], progress
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    (job,) = JobStore(jobs).list(kind="dataset")
    assert not (job.path / "dataset").exists()
    assert all(
        p.name.startswith(".") or p.name in ("job.json", "progress.json")
        for p in job.path.iterdir()
        if p.name != "job.lock"
    )
    assert job_status_text(job) == "Aborted"
    with pytest.raises(DatasetError, match="no published dataset"):
        open_dataset(job.id, jobs_dir=jobs)
