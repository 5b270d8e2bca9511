"""Issue 42: a volume run (unet3d) is logged to a real MLflow server as a 2-D run is.

A real ``mlflow server`` (SQLite backend; tests/mlflow_server.py) on 127.0.0.1, a real unet3d run from the CLI on
the synthetic Decathlon task, read back with ``MlflowClient`` and compared with the run's own TensorBoard HParams
data (read with TensorBoard) and ``metrics.jsonl``.
"""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path

import pytest

from digits_core.cli import main

pytestmark = pytest.mark.slow


def _hparams_data(model) -> tuple[dict, dict]:
    """The run's HParams session values and its ``final/`` scalars, read back by TensorBoard."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import metadata
    from tensorboard.util import tensor_util

    acc = EventAccumulator(str(model / "tb"), size_guidance={"tensors": 0})
    acc.Reload()
    content = acc.PluginTagToContent(metadata.PLUGIN_NAME)
    start = metadata.parse_session_start_info_plugin_data(content[metadata.SESSION_START_INFO_TAG])
    hparams = {name: getattr(value, value.WhichOneof("kind")) for name, value in start.hparams.items()}
    finals = {
        tag: float(tensor_util.make_ndarray(acc.Tensors(tag)[-1].tensor_proto))
        for tag in acc.Tags()["tensors"]
        if tag.startswith("final/")
    }
    return hparams, finals


def test_a_volume_run_logs_its_options_epochs_final_figures_model_and_export_to_a_real_mlflow_server(
    trained, tmp_path, monkeypatch
):
    """The run's parameters are its HParams values, every epoch's loss and validation Dice/HD95 are logged once at
    their epoch, ``final/<name>`` equals the HParams data's final figures, the model's files and its SavedModel
    export are artifacts, and the run is FINISHED; its id is kept in model.json."""
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))  # the server helper (run alone too)
    from mlflow_server import mlflow_server

    jobs, dataset, _ = trained
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with mlflow_server(tmp_path) as ready:
        uri = ready()
        args = ["--jobs-dir", str(jobs), "train", "--dataset", dataset.name, "--network", "unet3d", "--quiet"]
        args += ["--epochs", "2", "--validation-interval", "1", "--volume-steps-per-epoch", "3", "--mlflow", uri]
        assert main(args) == 0
        (model,) = [
            p for p in jobs.iterdir() if (p / "model.json").is_file() and "mlflow" in (p / "model.json").read_text()
        ]
        info = json.loads((model / "model.json").read_text())
        assert info["kind"] == "volume" and info["status"] == "Done"
        client = MlflowClient(tracking_uri=uri)
        run = client.get_run(info["mlflow"]["run_id"])
        assert run.info.status == "FINISHED" and run.data.tags["digits.job_id"] == model.name
        hparams, finals = _hparams_data(model)
        assert set(run.data.params) == set(hparams)  # TensorBoard keeps a number as a float: 8 reads 8.0
        for name, value in hparams.items():
            param = run.data.params[name]
            assert (float(param) == value) if isinstance(value, float) else (param == str(value)), name
        assert json.loads(run.data.params["volume_patch"]) == info["volume"]["patch"]
        for name in ("loss", "val_dice", "val_hd95"):
            history = client.get_metric_history(run.info.run_id, name)
            assert sorted(point.step for point in history) == [1, 2], name
        assert finals and {tag: run.data.metrics[tag] for tag in finals} == pytest.approx(finals, rel=0, abs=1e-12)
        model_files = {item.path for item in client.list_artifacts(run.info.run_id, "model")}
        assert {"model/model.json", "model/model.keras"} <= model_files
        (archive,) = [item.path for item in client.list_artifacts(run.info.run_id, "export")]
        local = client.download_artifacts(run.info.run_id, archive, str(tmp_path))
        with tarfile.open(local) as tar:
            names = tar.getnames()
        assert any(name.endswith("saved_model/saved_model.pb") for name in names), names
