"""The submission layer of evaluation jobs (issue 42): the one gate of POST /api/evaluations and the Evaluate panel."""

from __future__ import annotations

import pytest

from digits_core.errors import FormValidationError
from digits_core.jobs import JobStore
from digits_core.paths import confined_to
from digits_core.submit.evaluations import check_evaluation_request, evaluation_arguments
from digits_core.submit.records import create_model_record


def test_labelled_folders_and_lists_under_the_data_roots_become_the_command_line(tmp_path, monkeypatch):
    """Folders and lists (one per line, as the panel's text box sends them) are resolved under the data roots and
    passed to ``digits evaluate`` in place of a stage; the MLflow URI the operator allows is passed too."""
    model = create_model_record("m", jobs_dir=tmp_path / "jobs")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "list.txt").write_text("x.png cat\n")
    monkeypatch.setenv("DIGITS_ALLOW_URL", "127.0.0.1:5000")
    with confined_to([tmp_path]):
        options = check_evaluation_request(
            {
                "model": model.id[:10],
                "folder": f"{tmp_path / 'a'}\n\n{tmp_path / 'b'}\n",
                "list": [str(tmp_path / "list.txt")],
                "mlflow": "http://127.0.0.1:5000",
                "bootstrap": "0",
            },
            JobStore(tmp_path / "jobs"),
        )
    assert options["model"] == model.id and options["folder"] == [str(tmp_path / "a"), str(tmp_path / "b")]
    args = evaluation_arguments(options, tmp_path / "jobs")
    assert args[args.index("--model") + 1] == model.id and "--stage" not in args
    assert [args[i + 1] for i, a in enumerate(args) if a == "--folder"] == options["folder"]
    assert args[args.index("--list") + 1] == str(tmp_path / "list.txt")
    assert args[args.index("--mlflow") + 1] == "http://127.0.0.1:5000"


def test_every_bad_field_is_named_and_nothing_is_looked_up(tmp_path, monkeypatch):
    monkeypatch.delenv("DIGITS_ALLOW_URL", raising=False)
    (tmp_path / "root").mkdir()
    (tmp_path / "outside").mkdir()
    with confined_to([tmp_path / "root"]), pytest.raises(FormValidationError) as caught:
        check_evaluation_request(
            {
                "model": "",
                "stage": "holdout",
                "epoch": "last",
                "bootstrap": 10**6,
                "folder": str(tmp_path / "outside"),
                "list": str(tmp_path / "root" / "missing.txt"),
                "dataset": "d",
                "mlflow": "http://127.0.0.1:5000",
            },
            JobStore(tmp_path / "jobs"),
        )
    errors = caught.value.errors
    assert set(errors) == {"model", "stage", "epoch", "bootstrap", "folder", "list", "dataset", "mlflow"}
    assert "missing.txt: not found" in errors["list"][0]


def test_a_tracking_uri_with_a_password_is_refused_even_for_an_allowed_host(tmp_path, monkeypatch):
    """The request's URI is stored with the evaluation job: credentials in it are refused, naming MLflow's own
    environment variables (an allowed host alone would let the password reach ``job.json``)."""
    monkeypatch.setenv("DIGITS_ALLOW_URL", "127.0.0.1")
    (tmp_path / "root").mkdir()
    with confined_to([tmp_path / "root"]), pytest.raises(FormValidationError) as caught:
        check_evaluation_request(
            {"model": "m", "dataset": "d", "mlflow": "http://user:secret@127.0.0.1:5000"}, JobStore(tmp_path / "jobs")
        )
    assert "MLFLOW_TRACKING_PASSWORD" in caught.value.errors["mlflow"][0]
