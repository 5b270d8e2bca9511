"""The multilabel view: labels decided at their thresholds; its summary equals scikit-learn's."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as sk

from digits_core.errors import FormValidationError
from digits_core.forms import validate_values
from digits_view_classification.multilabel import MultilabelConfigForm, MultilabelView


def test_labels_are_decided_at_their_thresholds_and_summarized_as_scikit_learn():
    rng = np.random.default_rng(4)
    truth = (rng.random((30, 3)) < 0.4).astype(np.uint8)
    scores = np.clip(truth * 0.3 + rng.random((30, 3)) * 0.7, 0, 1)
    view = MultilabelView({"class_labels": ["cat", "dog", "sky"]}, thresholds="0.5,0.3,0.9")
    first = view.process_data("x0", None, scores[0], truth[0])
    for i in range(1, 30):
        view.process_data(f"x{i}", None, scores[i], truth[i])
    decided = scores >= [0.5, 0.3, 0.9]
    assert first["predicted"] == [item["label"] for item in first["labels"] if item["predicted"]]
    assert {item["label"] for item in first["labels"] if item["predicted"]} == {
        name for name, d in zip(["cat", "dog", "sky"], decided[0]) if d
    }
    summary = view.summary()
    assert summary["exact_match"] == pytest.approx(sk.accuracy_score(truth, decided))
    assert summary["hamming_loss"] == pytest.approx(sk.hamming_loss(truth, decided))
    f1 = sk.f1_score(truth, decided, average=None, zero_division=0)
    assert [c["f1"] for c in summary["per_label"]] == pytest.approx(list(f1))
    assert view.process_data("none", None, scores[0])["exact"] is None  # no ground truth: no statistics
    assert view.summary()["labelled"] == 30


def test_thresholds_option_is_checked():
    assert validate_values(MultilabelConfigForm, {"thresholds": "0.2, 0.7"}, "view")["thresholds"] == "0.2, 0.7"
    for bad in ("0.2,x", "1.5"):
        with pytest.raises(FormValidationError, match="thresholds"):
            validate_values(MultilabelConfigForm, {"thresholds": bad}, "view")
    assert MultilabelView({}, thresholds="").threshold_of(2) == 0.5
