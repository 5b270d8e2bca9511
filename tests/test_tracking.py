"""Results leave the tool (issue 42): TensorBoard HParams data and MLflow runs of training runs and sweep trials.

Real parts only: tiny LeNet runs on a real LMDB dataset, the event files read back with TensorBoard's own
``EventAccumulator``, and a real ``mlflow server`` (SQLite backend, local artifact root) started here on
127.0.0.1 and stopped after, read through ``MlflowClient``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from digits_core import registry


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """A real ``mlflow server`` on 127.0.0.1 (:mod:`mlflow_server`): yields a function that waits until it answers
    and returns its URI."""
    pytest.importorskip("mlflow")
    from mlflow_server import mlflow_server as serve

    with serve(tmp_path_factory.mktemp("mlflow")) as ready:
        yield ready


def _free_port() -> int:
    from live_server import free_port

    return free_port()


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    from synthetic_plugins import SyntheticShapes

    from digits_core.datasets import create_dataset

    jobs = tmp_path_factory.mktemp("tracking-jobs")
    registry.register(SyntheticShapes)
    try:
        job = create_dataset("synthetic-shapes", {"count": 48, "val_count": 16, "size": 12}, workers=1, jobs_dir=jobs)
    finally:
        registry.unregister(SyntheticShapes)
    return job.id, jobs


def _tensorboard_run(folder: Path) -> tuple[dict, dict, list[str]]:
    """A job's ``tb/`` read back by TensorBoard: (session hparams, final metric values by name, config metric tags)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import metadata
    from tensorboard.util import tensor_util

    acc = EventAccumulator(str(folder / "tb"), size_guidance={"tensors": 0})
    acc.Reload()
    content = acc.PluginTagToContent(metadata.PLUGIN_NAME)
    start = metadata.parse_session_start_info_plugin_data(content[metadata.SESSION_START_INFO_TAG])
    hparams = {}
    for name, value in start.hparams.items():
        kind = value.WhichOneof("kind")
        hparams[name] = getattr(value, kind)
    experiment = metadata.parse_experiment_plugin_data(content[metadata.EXPERIMENT_TAG])
    tags = [info.name.tag for info in experiment.metric_infos]
    finals = {}
    for tag in acc.Tags()["tensors"]:
        if tag.startswith("final/"):
            (event,) = acc.Tensors(tag)
            finals[tag[len("final/") :]] = float(tensor_util.make_ndarray(event.tensor_proto))
    assert start.group_name == folder.name
    return hparams, finals, tags


def _expected_hparams(record: dict) -> dict:
    from digits_core.engine.hparams import hparam_values

    return hparam_values(record["options"], network=record["network"], dataset=record["dataset_id"])


@pytest.mark.slow
def test_a_four_trial_sweep_shows_the_same_numbers_in_tensorboard_hparams_and_in_a_real_mlflow_server(
    mlflow_server, shapes, monkeypatch, capsys
):
    """Each trial's HParams session holds its options and its final metrics exactly as its model.json has them,
    and the MLflow run of the trial (found by its job id tag) has the same parameters, the same final metrics, one
    point per epoch and the model's files as artifacts; ``digits evaluate --mlflow`` logs an evaluation's metrics
    and its report folder there too."""
    from mlflow.tracking import MlflowClient

    from digits_core.engine import read_model_info
    from digits_core.sweeps import train_sweep

    dataset, jobs = shapes
    uri = mlflow_server()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    trials = train_sweep(
        dataset,
        "lenet",
        "tracked",
        jobs_dir=jobs,
        epochs=2,
        seed=1,
        learning_rate="0.01,0.02",
        batch_size="8,16",
        validation_interval=1,
    )
    assert len(trials) == 4 and all(job.status.value == "Done" for job in trials)
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(trials[0].data["group"])
    assert experiment is not None
    seen_rates = set()
    for job in trials:
        record = read_model_info(job.path)
        final = {k: float(v) for k, v in record["final_metrics"].items() if isinstance(v, float)}
        assert {"loss", "val_loss", "val_accuracy"} <= set(final)
        hparams, finals, tags = _tensorboard_run(job.path)
        assert hparams == _expected_hparams(record)
        assert finals == final  # float64 in the event file: exactly the record
        assert sorted(tags) == sorted(f"final/{name}" for name in final)
        seen_rates.add((hparams["learning_rate"], hparams["batch_size"]))
        (run,) = client.search_runs([experiment.experiment_id], f"tags.`digits.job_id` = '{job.id}'")
        assert run.info.status == "FINISHED" and read_model_info(job.path)["mlflow"]["run_id"] == run.info.run_id
        assert run.data.params == {key: str(value) for key, value in _expected_hparams(record).items()}
        assert {key: run.data.metrics[f"final/{key}"] for key in final} == pytest.approx(final, rel=0, abs=1e-12)
        history = client.get_metric_history(run.info.run_id, "val_loss")
        assert sorted(point.step for point in history) == [1, 2]  # one point per epoch
        artifacts = {item.path for item in client.list_artifacts(run.info.run_id, "model")}
        assert {"model/model.json", "model/mean.npy"} <= artifacts and any(
            path.endswith(".keras") for path in artifacts
        )
        exported = [item.path for item in client.list_artifacts(run.info.run_id, "export")]
        assert exported == [f"export/{job.id}-savedmodel.tar.gz"]
    assert seen_rates == {(0.01, 8), (0.01, 16), (0.02, 8), (0.02, 16)}

    # an evaluation of a trial through `digits evaluate --mlflow`: its metrics and its report reach the same server
    from digits_core.cli import main

    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    capsys.readouterr()
    code = main(
        ["--jobs-dir", str(jobs), "evaluate", "--model", trials[0].id, "--stage", "val", "--mlflow", uri, "--json"]
    )
    assert code in (0, None)
    summary = json.loads(capsys.readouterr().out)  # nothing but the JSON on stdout: MLflow's own lines go to the log
    evaluation = client.get_experiment_by_name("digits")
    (run,) = client.search_runs([evaluation.experiment_id], f"tags.`digits.job_id` = '{summary['job_id']}'")
    assert run.data.metrics["accuracy"] == summary["metrics"]["accuracy"]
    assert run.data.params["model_id"] == trials[0].id and run.data.params["stage"] == "val"
    reported = {item.path for item in client.list_artifacts(run.info.run_id, "report")}
    assert {"report/report.html", "report/metrics.json", "report/predictions.csv"} <= reported


def test_an_mlflow_uri_in_a_request_passes_the_operators_outbound_rules(tmp_path, monkeypatch):
    """Over the web the tracking URI is an outbound address: loopback refused unless the operator allows it, a
    database or file URI refused whatever the rules (it would write on the server); the command line is free."""
    from digits_core.errors import FormValidationError
    from digits_core.jobs import JobStore
    from digits_core.paths import confined_to
    from digits_core.submit.options import check_request_options

    store = JobStore(tmp_path)
    monkeypatch.delenv("DIGITS_ALLOW_URL", raising=False)
    with confined_to([tmp_path]):
        for uri in ("http://127.0.0.1:5000", "sqlite:///mlflow.db", "file:///tmp/mlruns", "databricks"):
            with pytest.raises(FormValidationError) as caught:
                check_request_options({"epochs": 1, "mlflow": uri}, store)
            assert set(caught.value.errors) == {"mlflow"}, uri
        monkeypatch.setenv("DIGITS_ALLOW_URL", "127.0.0.1:5000")
        check_request_options({"epochs": 1, "mlflow": "http://127.0.0.1:5000"}, store)
        with pytest.raises(FormValidationError, match="mlflow"):
            check_request_options({"epochs": 1, "mlflow": "sqlite:///mlflow.db"}, store)
    check_request_options({"epochs": 1, "mlflow": "sqlite:///mlflow.db"}, store)  # the operator's own shell


def test_neither_tensorboard_nor_mlflow_is_imported_until_a_run_is_tracked():
    """The tracking modules, the gate and the train/evaluate commands' help load neither package."""
    code = (
        "import sys\n"
        "import digits_core.engine.hparams, digits_core.engine.mlflow_log, digits_core.submit.options\n"
        "from digits_core.cli import main\n"
        "for command in ('train', 'evaluate'):\n"
        "    try:\n"
        "        main([command, '--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(sorted(m for m in ('mlflow', 'tensorboard', 'tensorflow') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.slow
def test_a_tracking_server_that_is_down_costs_a_warning_not_the_run(shapes, caplog, monkeypatch):
    """The run is Done with its HParams data, the warning names the server; MLflow's retries are bounded where the
    user set none (its own defaults hold a run's start for minutes), and a user's own setting is kept."""
    from digits_core.engine import train
    from digits_core.engine.mlflow_log import HTTP_DEFAULTS

    for name in HTTP_DEFAULTS:  # unset here, and unset again after the test (setenv records the original)
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "7")
    dataset, jobs = shapes
    down = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    with caplog.at_level("WARNING", logger="digits_core.engine"):
        job = train(dataset, "lenet", jobs_dir=jobs, epochs=1, batch_size=16, seed=1, mlflow=down)
    assert job.status.value == "Done" and (job.path / "tb").is_dir()
    assert any(down in record.getMessage() and "start failed" in record.getMessage() for record in caplog.records)
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == HTTP_DEFAULTS["MLFLOW_HTTP_REQUEST_MAX_RETRIES"]
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "7"


@pytest.mark.slow
def test_a_resumed_run_continues_its_mlflow_run_with_each_epoch_once_and_the_savedmodel_export(
    mlflow_server, shapes, monkeypatch, capsys
):
    """An aborted run's MLflow run is KILLED with only its whole epochs logged (the interrupted epoch is not one);
    ``digits train --resume`` continues the same run (its id kept in model.json, the server found from there)
    to FINISHED with every epoch logged once, and the SavedModel export (a TF Serving archive) as an artifact."""
    import tarfile

    from mlflow.tracking import MlflowClient

    from digits_core.cli import main
    from digits_core.engine import read_model_info, train

    dataset, jobs = shapes
    uri = mlflow_server()
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)

    def stop_in_epoch_two(event: dict) -> None:
        if event.get("phase") == "train" and event["epoch"] > 1.0:
            raise RuntimeError("stopped by the test in epoch 2")

    job = train(
        dataset, "lenet", jobs_dir=jobs, epochs=3, batch_size=16, seed=1, mlflow=uri, progress=stop_in_epoch_two
    )
    assert job.status.value == "Aborted"
    client = MlflowClient(tracking_uri=uri)
    stored = read_model_info(job.path)["mlflow"]
    assert stored["uri"] == uri
    run = client.get_run(stored["run_id"])
    assert run.info.status == "KILLED" and run.data.tags["digits.job_id"] == job.id
    assert [point.step for point in client.get_metric_history(run.info.run_id, "loss")] == [1]

    capsys.readouterr()
    assert main(["--jobs-dir", str(jobs), "train", "--resume", job.id, "--quiet"]) in (0, None)
    record = read_model_info(job.path)
    assert record["status"] == "Done" and record["mlflow"]["run_id"] == run.info.run_id
    (again,) = client.search_runs([run.info.experiment_id], f"tags.`digits.job_id` = '{job.id}'")
    assert again.info.run_id == run.info.run_id and again.info.status == "FINISHED"
    for name in ("loss", "val_loss", "val_accuracy"):
        history = client.get_metric_history(run.info.run_id, name)
        assert sorted(point.step for point in history) == [1, 2, 3], name  # each epoch once, none twice
    final = {k: v for k, v in record["final_metrics"].items() if isinstance(v, float)}
    assert {k: again.data.metrics[f"final/{k}"] for k in final} == pytest.approx(final, rel=0, abs=1e-12)
    (archive,) = [item.path for item in client.list_artifacts(run.info.run_id, "export")]
    local = Path(client.download_artifacts(run.info.run_id, archive, str(job.path.parent / "downloaded")))
    with tarfile.open(local) as tar:
        names = tar.getnames()
    assert any(name.endswith("saved_model/saved_model.pb") for name in names), names


def test_an_mlflow_uri_of_a_sweep_request_goes_through_the_gate_of_a_model_request(shapes, tmp_path, monkeypatch):
    """``POST /api/sweeps`` refuses a tracking server the operator's outbound rules refuse, in the words of
    ``POST /api/models``, and creates nothing; one the operator allows is planned into every trial's options
    (it rides beside the training options: the engine's validation does not see it as an unknown option)."""
    from digits_core.sweeps.tune import TuneSettings, plan_sweep
    from digits_core.web import create_app

    monkeypatch.delenv("DIGITS_ALLOW_URL", raising=False)
    app = create_app(tmp_path / "jobs", start_scheduler=False, testing=True, data_roots=[tmp_path])
    web = app.test_client()
    token = web.get("/api/csrf-token").get_json()["csrf_token"]
    dataset, jobs = shapes
    answers = {}
    for door, extra in (("models", {}), ("sweeps", {"search": ["learning_rate=0.01,0.1"], "scheduler": "grid"})):
        for uri in ("http://127.0.0.1:5000", "sqlite:///mlflow.db", "http://user:secret@mlflow.example"):
            body = {"name": "m", "dataset": "d", "network": "lenet", "options": {"epochs": 1, "mlflow": uri}, **extra}
            answer = web.post(f"/api/{door}", json=body, headers={"X-CSRFToken": token})
            assert answer.status_code == 400, answer.get_data(as_text=True)[:300]
            answers[door, uri] = answer.get_json()["error"]["fields"]["mlflow"]
    assert answers["sweeps", "http://127.0.0.1:5000"] == answers["models", "http://127.0.0.1:5000"]
    assert answers["sweeps", "sqlite:///mlflow.db"] == answers["models", "sqlite:///mlflow.db"]
    with_password = "http://user:secret@mlflow.example"  # stored with the sweep or job: refused, allowed host or not
    assert answers["sweeps", with_password] == answers["models", with_password]
    assert "MLFLOW_TRACKING_PASSWORD" in answers["models", with_password][0]
    monkeypatch.setenv("DIGITS_ALLOW_URL", "mlflow.example")
    answer = web.post(
        "/api/sweeps",
        json={"name": "m", "dataset": "d", "network": "lenet", "search": ["learning_rate=0.01,0.1"]}
        | {"scheduler": "grid", "options": {"epochs": 1, "mlflow": with_password}},
        headers={"X-CSRFToken": token},
    )
    assert "MLFLOW_TRACKING_USERNAME" in answer.get_json()["error"]["fields"]["mlflow"][0]
    monkeypatch.delenv("DIGITS_ALLOW_URL")
    assert not (app.extensions["digits"]["jobs_dir"] / ".sweeps").exists()

    uri = "http://127.0.0.1:5000"
    plan = plan_sweep(
        dataset,
        "lenet",
        "tracked",
        ["learning_rate=0.01,0.02"],
        TuneSettings(scheduler="grid", max_epochs=1),
        {"mlflow": uri, "batch_size": 16},
        jobs_dir=jobs,
    )
    assert plan["options"]["mlflow"] == uri and len(plan["trials"]) == 2
