"""The ``precision`` option: bfloat16 training where the hardware has it, refused where it would be emulated.

The hardware rule is a function of the CPU flags and GPU capabilities, tested here with given flag lists;
the bfloat16 runs are real TensorFlow on a tiny real LMDB set (they need a CPU with avx512_bf16 or amx_bf16,
or the force switch, which the run tests set so they also run on other machines: emulated, only slower).
"""

from __future__ import annotations

import numpy as np
import pytest

from digits_core import registry
from digits_core.engine.options import TrainingOptions
from digits_core.engine.precision import FORCE_ENV, bf16_missing, check_precision, cpu_flags
from digits_core.errors import FormValidationError

AMD_ZEN4 = "fpu vme sse2 avx2 avx512f avx512_bf16 avx512_vnni"
SAPPHIRE_RAPIDS = "fpu sse2 avx2 avx512f amx_bf16 amx_tile amx_int8"
SKYLAKE = "fpu sse2 avx2 avx512f avx512bw avx512_vnni"


def test_native_bf16_is_read_from_the_cpu_flags(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {SKYLAKE}\n\nprocessor\t: 1\nflags\t\t: {SKYLAKE}\n")
    assert "avx512f" in cpu_flags(cpuinfo) and bf16_missing(cpu_flags(cpuinfo)) is not None
    cpuinfo.write_text(f"processor\t: 0\nflags\t\t: {AMD_ZEN4}\n")
    assert bf16_missing(cpu_flags(cpuinfo)) is None
    assert bf16_missing(SAPPHIRE_RAPIDS.split()) is None
    assert cpu_flags(tmp_path / "missing") == set()  # not Linux: no flags, so refused unless forced
    assert "no native bfloat16" in bf16_missing([])
    # a GPU run is judged by its GPUs, whatever the CPU: Ampere (8.0) and later compute bfloat16
    assert bf16_missing(SKYLAKE.split(), [(8, 0), (9, 0)]) is None
    assert "7.5" in bf16_missing(AMD_ZEN4.split(), [(8, 6), (7, 5)])


def test_bfloat16_without_native_support_is_refused_naming_the_option_and_the_way_out():
    with pytest.raises(FormValidationError) as refused:
        check_precision("bfloat16", flags=SKYLAKE.split(), environ={})
    assert list(refused.value.errors) == ["precision"]
    message = refused.value.errors["precision"][0]
    assert "no native bfloat16" in message and "avx512_bf16" in message and "tensorflow#45441" in message
    assert f"{FORCE_ENV}=1" in message and "float32" in message
    check_precision("bfloat16", flags=SKYLAKE.split(), environ={FORCE_ENV: "1"})  # forced: allowed
    check_precision("bfloat16", flags=AMD_ZEN4.split(), environ={})  # native: allowed
    check_precision("float32", flags=[], environ={})  # float32 runs anywhere
    with pytest.raises(FormValidationError, match="GPU compute capability 7.0"):
        check_precision("bfloat16", flags=AMD_ZEN4.split(), gpu_capabilities=[(7, 0)], environ={})


def test_the_option_is_declared_and_validated_for_every_door():
    from digits_core.engine.option_specs import BY_NAME

    spec = BY_NAME["precision"]
    assert spec.kind == "choice" and spec.choices == ("float32", "bfloat16")
    assert TrainingOptions().precision == "float32"
    assert TrainingOptions.from_kwargs(precision="BFloat16").precision == "bfloat16"
    with pytest.raises(FormValidationError, match="precision: choose one of float32, bfloat16"):
        TrainingOptions.from_kwargs(precision="float16")
    with pytest.raises(FormValidationError, match="precision: bfloat16 and mixed_precision"):
        TrainingOptions.from_kwargs(precision="bfloat16", mixed_precision=True)


def test_the_cli_flag_reaches_the_options():
    import argparse

    from digits_core.engine.option_specs import add_cli_arguments, options_from_cli

    parser = argparse.ArgumentParser()
    add_cli_arguments(parser)
    assert options_from_cli(parser.parse_args(["--precision", "bfloat16"]))["precision"] == "bfloat16"
    with pytest.raises(SystemExit):
        parser.parse_args(["--precision", "half"])


@pytest.mark.slow
def test_the_policy_scope_restores_the_previous_policy_after_an_error():
    import keras

    from digits_core.engine.precision import policy_scope

    assert keras.config.dtype_policy().name == "float32"
    with pytest.raises(RuntimeError), policy_scope("mixed_bfloat16"):
        assert keras.config.dtype_policy().name == "mixed_bfloat16"
        raise RuntimeError("the build failed")
    assert keras.config.dtype_policy().name == "float32"


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    from synthetic_plugins import SyntheticShapes

    from digits_core.datasets import create_dataset

    jobs = tmp_path_factory.mktemp("bf16-jobs")
    registry.register(SyntheticShapes)
    try:
        job = create_dataset("synthetic-shapes", {"count": 160, "val_count": 32, "size": 16}, workers=1, jobs_dir=jobs)
    finally:
        registry.unregister(SyntheticShapes)
    return job.id, jobs


def _policies(job):
    import keras

    from digits_core.engine.jobio import SNAPSHOT_DIR, read_model_info

    last = read_model_info(job.path)["snapshots"][-1]["file"]
    model = keras.models.load_model(job.path / SNAPSHOT_DIR / last, compile=False, safe_mode=False)
    return {layer.name: layer.dtype_policy.name for layer in model.layers}


@pytest.mark.slow
def test_a_refused_run_creates_no_job(shapes, monkeypatch):
    import digits_core.engine.precision as precision
    from digits_core.engine import train
    from digits_core.jobs import JobStore

    dataset, jobs = shapes
    monkeypatch.delenv(FORCE_ENV, raising=False)
    monkeypatch.setattr(precision, "cpu_flags", lambda: set(SKYLAKE.split()))  # this process's CPU, as Skylake
    before = len(JobStore(jobs).list(kind="model"))
    with pytest.raises(FormValidationError, match="precision: bfloat16 needs native hardware support"):
        train(dataset, "lenet", name="refused", jobs_dir=jobs, epochs=1, precision="bfloat16")
    assert len(JobStore(jobs).list(kind="model")) == before


@pytest.mark.slow
def test_a_bfloat16_lenet_trains_infers_resumes_and_exports_in_float32(shapes, monkeypatch, tmp_path, capsys):
    import json
    import tarfile

    import keras

    from digits_core.engine import load_snapshot, read_metrics, resume_training, train
    from digits_core.inference import export_model, infer
    from digits_core.jobs import JobStatus

    dataset, jobs = shapes
    monkeypatch.setenv(FORCE_ENV, "1")  # native on a CPU with bf16 flags; elsewhere forced (emulated, slower)
    stop = {"at": 16}

    def progress(info):
        if info["phase"] == "train" and info["step"] == stop["at"]:
            raise RuntimeError("interrupted")

    options = dict(batch_size=16, solver="adam", learning_rate=0.003, log_every=5, snapshot_interval=1, seed=2)
    job = train(
        dataset, "lenet", name="bf16", jobs_dir=jobs, epochs=3, precision="bfloat16", progress=progress, **options
    )
    assert job.status is JobStatus.ABORTED  # in epoch 2, after epoch 1's snapshot
    assert keras.config.dtype_policy().name == "float32"  # the job's policy did not outlive it
    policies = _policies(job)
    assert policies["probabilities"] == "float32"  # softmax (and the loss) in float32
    assert {name: p for name, p in policies.items() if "conv" in name} and all(
        p == "mixed_bfloat16" for name, p in policies.items() if "conv" in name or "dense" in name
    )
    job = resume_training(job, jobs_dir=jobs)
    assert job.status is JobStatus.DONE
    assert _policies(job) == policies  # the resumed run trained in bfloat16 too
    losses = [m["value"] for m in read_metrics(job) if m["name"] == "loss"]
    assert len(losses) >= 6 and np.mean(losses[-3:]) < 0.8 * np.mean(losses[:3])

    images = np.random.default_rng(0).integers(0, 255, (5, 16, 16, 1), dtype=np.uint8)
    assert {layer.dtype_policy.name for layer in load_snapshot(job).layers} == {"float32"}  # inference: float32
    result = infer(job.id, list(images), jobs_dir=jobs)
    assert result.outputs.dtype == np.float32
    np.testing.assert_allclose(result.outputs.sum(axis=1), 1.0, atol=1e-5)  # float32 softmax: bfloat16's is ±1e-2
    from PIL import Image

    from digits_core.cli import main as digits

    for i, image in enumerate(images[:2]):
        Image.fromarray(image[..., 0]).save(tmp_path / f"in{i}.png")
    classes = result.outputs.shape[1]
    argv = ["--jobs-dir", str(jobs), "infer", "--model", job.id, "--json", "--top", str(classes)]
    assert digits([*argv, str(tmp_path / "in0.png"), str(tmp_path / "in1.png")]) == 0
    for sample in json.loads(capsys.readouterr().out)["samples"]:  # digits infer: every class, summing to 1
        assert len(sample["top"]) == classes
        assert sum(entry["probability"] for entry in sample["top"]) == pytest.approx(1.0, abs=1e-5)

    archive = export_model(job.id, tmp_path / "bf16.tar.gz", format="savedmodel", parity_sample=8, jobs_dir=jobs)
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "out", filter="tar")
    (folder,) = (tmp_path / "out").iterdir()
    assert json.loads((folder / "parity.json").read_text())["passed"] is True
    archive = export_model(job.id, tmp_path / "bf16k.tar.gz", format="keras", parity_sample=8, jobs_dir=jobs)
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "keras", filter="tar")
    (folder,) = (tmp_path / "keras").iterdir()
    assert json.loads((folder / "parity.json").read_text())["passed"] is True
    exported = keras.models.load_model(folder / "model.keras", compile=False)
    assert {layer.dtype_policy.name for layer in exported.layers} == {"float32"}  # the bare network: float32

    # the next job in this process trains in float32: nothing of the bfloat16 job's policy is left
    plain = train(dataset, "lenet", name="fp32-after", jobs_dir=jobs, epochs=1, **options)
    assert set(_policies(plain).values()) == {"float32"}
