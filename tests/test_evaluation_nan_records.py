"""A metric that is not a number (a detector's mAP before it finds any box) never makes model.json unreadable.

Found by issue 42's evaluation of a two-epoch detector: ``record_best`` kept a NaN mAP as the best (nothing beats
NaN afterwards) and the run's ``final_metrics`` held NaN; the job store's reader refuses NaN, so the model could
not be loaded, shown or evaluated.
"""

from __future__ import annotations

import operator
from types import SimpleNamespace

import pytest

from digits_core.engine.trainer import _finish_info
from digits_core.jobs import JobStatus
from digits_core.jobs.model import read_model_record, record_best, write_model_record


def test_a_nan_metric_is_never_the_best(tmp_path):
    write_model_record(tmp_path, {"job_id": "x", "best_metric": None})
    assert record_best(tmp_path, 1.0, float("nan"), "val_map50", operator.gt) is False
    assert read_model_record(tmp_path).get("best_metric") is None
    assert record_best(tmp_path, 2.0, 0.25, "val_map50", operator.gt) is True
    assert record_best(tmp_path, 3.0, float("inf"), "val_map50", operator.gt) is False
    record = read_model_record(tmp_path)
    assert (record["best_epoch"], record["best_metric"]) == (2.0, 0.25)


@pytest.mark.slow  # the end of a run writes TensorBoard HParams data (TensorFlow's summary writer)
def test_final_metrics_write_nan_as_null(tmp_path):
    write_model_record(tmp_path, {"job_id": "x"})
    state = SimpleNamespace(strat=SimpleNamespace(is_chief=True), folder=tmp_path, job=SimpleNamespace(id="x"))
    _finish_info(state, JobStatus.DONE, None, {"loss": 0.5, "val_map": float("nan")}, False)  # type: ignore[arg-type]
    assert read_model_record(tmp_path)["final_metrics"] == {"loss": 0.5, "val_map": None}
