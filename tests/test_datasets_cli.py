"""``digits dataset ...``: options generated from the plugin form, validation, list/show/explore/delete."""

from __future__ import annotations

import json

import numpy as np
import pytest
import wtforms
from PIL import Image

from digits_core import DataIngestion, registry
from digits_core.cli import main
from digits_core.jobs import JobStore


class CliForm(wtforms.Form):
    n_items = wtforms.IntegerField(
        "Number of items",
        default=30,
        description="How many training records",
        validators=[wtforms.validators.NumberRange(min=1, max=1000)],
    )
    flavour = wtforms.SelectField("Flavour", choices=[("plain", "Plain"), ("striped", "Striped")], default="plain")
    bad_every = wtforms.IntegerField("Fail every k-th", default=0)


class CliIngestion(DataIngestion):
    plugin_id = "test-cli"
    title = "CLI test data"

    @staticmethod
    def get_dataset_form():
        return CliForm

    @staticmethod
    def get_dataset_template(form):
        return "", {}

    def itemize_entries(self, stage):
        if stage == "train":
            self.userdata["class_labels"] = ["even", "odd"]
            return list(range(self.n_items))
        return list(range(100, 105)) if stage == "val" else []

    def encode_entry(self, entry):
        if self.bad_every and entry % self.bad_every == 1:
            raise ValueError(f"item {entry} is unreadable")
        image = np.full((12, 10, 3), entry * 7 % 256, np.uint8)
        if self.flavour == "striped":
            image[::2] = 0
        return image, entry % 2


@pytest.fixture
def plugin():
    registry.register(CliIngestion)
    yield
    registry.unregister(CliIngestion)


def test_create_help_lists_the_plugin_form_fields(plugin, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["dataset", "create", "test-cli", "--help"])
    assert exit_info.value.code == 0
    out = " ".join(capsys.readouterr().out.split())  # undo argparse's line wrapping
    assert "--n-items N_ITEMS" in out and "Number of items. How many training records (default: 30)" in out
    assert "--flavour {plain,striped}" in out and "--max-errors X" in out and "--workers N" in out
    assert main(["dataset", "create", "--help"]) == 0
    assert "test-cli" in capsys.readouterr().out


def test_invalid_values_fail_before_any_work_naming_the_field(plugin, tmp_path, capsys):
    jobs = tmp_path / "jobs"
    assert main(["--jobs-dir", str(jobs), "dataset", "create", "test-cli", "--n-items", "5000"]) == 2
    err = capsys.readouterr().err
    assert "n_items: Number must be between 1 and 1000" in err
    assert not jobs.exists() or not any(jobs.iterdir())
    with pytest.raises(SystemExit):
        main(["dataset", "create", "test-cli", "--flavour", "spotted"])
    assert "invalid choice" in capsys.readouterr().err
    assert main(["--jobs-dir", str(jobs), "dataset", "create", "no-such-plugin"]) == 1
    assert 'No data plugin with id "no-such-plugin"' in capsys.readouterr().err


def test_create_list_show_explore_delete(plugin, tmp_path, capsys):
    jobs = str(tmp_path / "jobs")
    rc = main(
        [
            "--jobs-dir",
            jobs,
            "dataset",
            "create",
            "test-cli",
            "--name",
            "stripes",
            "--workers",
            "2",
            "--n-items",
            "40",
            "--flavour",
            "striped",
            "--bad-every",
            "10",
            "--max-errors",
            "5",
        ]
    )
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "records: train 36, val 4" in captured.out and "skipped 5 entries" in captured.out
    assert "train" in captured.err and "img" in captured.err  # the progress bar
    (job,) = JobStore(jobs).list(kind="dataset")

    assert main(["--jobs-dir", jobs, "dataset", "list"]) == 0
    out = capsys.readouterr().out
    assert job.id in out and "stripes" in out and "train=36 val=4" in out and "Done" in out

    assert main(["--jobs-dir", jobs, "dataset", "show", job.id[:15], "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["dataset"]["stages"] == {"train": 36, "val": 4}
    assert data["dataset"]["feature"]["shape"] == [12, 10, 3] and data["dataset"]["class_labels"] == ["even", "odd"]
    assert [e["entry"] for e in data["skipped_entries"]] == ["1", "11", "21", "31", "101"]

    assert main(["--jobs-dir", jobs, "dataset", "show", job.id]) == 0
    out = capsys.readouterr().out
    assert (
        "uint8 (12, 10, 3)" in out
        and "0 even  train=20 val=3" in out
        and "1 odd  train=16 val=1" in out
        and "item 11 is unreadable" in out
    )

    sheet = tmp_path / "grid.png"
    assert (
        main(["--jobs-dir", jobs, "dataset", "explore", job.id, "--stage", "val", "-n", "4", "--out", str(sheet)]) == 0
    )
    with Image.open(sheet) as image:
        assert image.mode == "RGB" and image.width > 40 and image.height > 40

    assert main(["--jobs-dir", jobs, "dataset", "delete", job.id]) == 0
    assert JobStore(jobs).list() == []
    assert main(["--jobs-dir", jobs, "dataset", "show", job.id]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_failed_job_shows_its_error(plugin, tmp_path, capsys):
    jobs = str(tmp_path / "jobs")
    assert (
        main(["--jobs-dir", jobs, "dataset", "create", "test-cli", "--bad-every", "2", "--quiet", "--workers", "1"])
        == 1
    )
    assert "max-errors" in capsys.readouterr().err
    (job,) = JobStore(jobs).list()
    assert main(["--jobs-dir", jobs, "dataset", "show", job.id]) == 0
    out = capsys.readouterr().out
    assert "status: Error" in out and "no published dataset" in out and "skipped entries: " in out
    assert main(["--jobs-dir", jobs, "dataset", "explore", job.id]) == 1
    assert "no published dataset" in capsys.readouterr().err
