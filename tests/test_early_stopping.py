"""Early stopping as declared training options: a diverging run ends Done within patience + 1 epochs."""

from __future__ import annotations

import json

import pytest

from digits_core import FormValidationError
from digits_core.engine.early_stopping import EarlyStopping, direction
from digits_core.engine.options import TrainingOptions


def test_the_options_are_declared_and_checked_on_their_fields():
    from digits_core.engine.option_specs import BY_NAME

    assert {
        "early_stopping_metric",
        "early_stopping_mode",
        "early_stopping_patience",
        "early_stopping_min_delta",
        "early_stopping_restore_best",
    } <= set(BY_NAME)
    with pytest.raises(FormValidationError) as caught:
        TrainingOptions.from_kwargs(
            early_stopping_metric="loss",
            early_stopping_patience=0,
            early_stopping_mode="sideways",
            early_stopping_min_delta=-1,
        )
    errors = caught.value.errors
    assert "val_" in errors["early_stopping_metric"][0]
    assert set(errors) >= {"early_stopping_patience", "early_stopping_mode", "early_stopping_min_delta"}


def test_auto_mode_follows_the_metric_name():
    assert direction("val_loss", "auto") == "min" and direction("val_accuracy", "auto") == "max"
    assert direction("val_accuracy", "min") == "min"


class _Weights:
    def __init__(self):
        import numpy as np

        self.value = np.zeros(1)

    def get_weights(self):
        return [self.value]

    def set_weights(self, weights):
        self.value = weights[0]


def test_patience_counts_epochs_without_an_improvement_above_min_delta_and_restores_the_best():
    model = _Weights()
    stopper = EarlyStopping("val_accuracy", "auto", patience=2, min_delta=0.01)
    for epoch, accuracy in enumerate([0.5, 0.7, 0.705, 0.69], start=1):
        model.value = model.value + 1  # the weights of epoch N are [N]
        stopped = stopper.observe(float(epoch), {"val_accuracy": accuracy}, model)
        assert stopped is (epoch == 4)
    assert stopper.best_epoch == 2 and model.value[0] == 2  # 0.705 is not 0.01 better than 0.7
    assert stopper.note == "stopped early at epoch 4 (best val_accuracy 0.7 at epoch 2); best weights restored"


def test_a_metric_the_run_does_not_log_names_the_ones_it_does():
    from digits_core.errors import TrainingError

    with pytest.raises(TrainingError, match="val_accuracy, val_loss"):
        EarlyStopping("val_dice").observe(1.0, {"val_loss": 1.0, "val_accuracy": 0.5}, _Weights())


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    from synthetic_plugins import build_small_shapes_dataset

    jobs = tmp_path_factory.mktemp("early-stopping-jobs")
    return build_small_shapes_dataset(jobs), jobs


@pytest.mark.slow
def test_a_diverging_run_stops_within_patience_plus_one_epochs_done_and_says_so(shapes):
    from digits_core.engine import train
    from digits_core.jobs import JobStatus

    dataset, jobs = shapes
    patience = 2
    job = train(
        dataset,
        "lenet",
        jobs_dir=jobs,
        epochs=12,
        batch_size=32,
        seed=1,
        solver="sgd",
        learning_rate=5.0,
        lr_policy="fixed",
        early_stopping_metric="val_loss",
        early_stopping_patience=patience,
    )
    assert job.status is JobStatus.DONE
    info = json.loads((job.path / "model.json").read_text())
    record = info["early_stopping"]
    assert record["stopped_epoch"] <= patience + 1 and record["stopped_epoch"] - record["best_epoch"] == patience
    assert info["last_epoch"] == record["stopped_epoch"]  # the result snapshot is where it stopped
    note = job.reload().data["status_note"]
    assert note.startswith(f"stopped early at epoch {record['stopped_epoch']:g} (best val_loss")
    points = [json.loads(line) for line in (job.path / "metrics.jsonl").read_text().splitlines()]
    flagged = [p for p in points if p["name"] == "early_stopped"]
    assert len(flagged) == 1 and flagged[0]["epoch"] == record["stopped_epoch"]
    assert max(p["epoch"] for p in points) == record["stopped_epoch"]
    assert any(path.name.startswith("events.out") for path in (job.path / "tb").rglob("*"))


@pytest.mark.slow
@pytest.mark.parametrize("restore", [True, False])
def test_the_result_snapshot_holds_the_best_epochs_weights_when_restore_best_is_set(shapes, restore):
    import numpy as np

    from digits_core.engine import load_snapshot, train

    dataset, jobs = shapes
    # a learning run, but no change counts as an improvement (min_delta 1): it stops at epoch 3, best epoch 1
    job = train(
        dataset,
        "lenet",
        jobs_dir=jobs,
        epochs=12,
        batch_size=32,
        seed=1,
        solver="adam",
        learning_rate=0.01,
        lr_policy="fixed",
        snapshot_interval=1,
        early_stopping_metric="val_accuracy",
        early_stopping_min_delta=1.0,
        early_stopping_patience=2,
        early_stopping_restore_best=restore,
    )
    record = json.loads((job.path / "model.json").read_text())["early_stopping"]
    best = load_snapshot(job, record["best_epoch"]).get_weights()
    result = load_snapshot(job).get_weights()
    same = all(np.array_equal(a, b) for a, b in zip(best, result))
    assert (record["best_epoch"], record["stopped_epoch"]) == (1, 3)
    assert same is restore and record["restored_best"] is restore
