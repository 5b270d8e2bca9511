"""Every learning-rate policy against DIGITS 6's formulas (issue 15), in the engine and in the web preview.

DIGITS 6 drew its preview with ``digits/model/views.py:visualize_lr`` (``i`` = 0..100 % of training)
and trained with the same formulas in ``digits/tools/tensorflow/lr_policy.py``. The expected values
below are those formulas written out again; :func:`learning_rate_at` is the one function both our
optimizer schedule and ``/api/lr-preview`` evaluate.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from digits_core.engine.lr_policies import POLICIES, learning_rate_at, resolve_policy

PROGRESS = np.arange(101, dtype=np.float64)  # DIGITS's preview: one point per % of training


def digits6(policy: str, i: float, lr: float, gamma=None, power=None, step=None, steps=None) -> float:
    """DIGITS 6's rate at ``i`` % of training (its defaults where a parameter is ``None``)."""
    if policy == "fixed":
        return lr
    if policy == "step":
        return lr * (0.1 if gamma is None else gamma) ** math.floor(i / (33 if step is None else step))
    if policy == "multistep":
        passed = sum(i >= s for s in (steps or (50, 85)))
        return lr * (0.5 if gamma is None else gamma) ** passed
    if policy == "exp":
        return lr * (0.95 if gamma is None else gamma) ** i
    if policy == "inv":
        return lr * (1.0 + (0.1 if gamma is None else gamma) * i) ** -(0.5 if power is None else power)
    if policy == "poly":
        return lr * (1.0 - i / 100.0) ** (3 if power is None else power)
    if policy == "sigmoid":
        return lr / (1.0 + math.exp((0.1 if gamma is None else gamma) * (i - (50 if step is None else step))))
    raise AssertionError(policy)


#: Non-default parameters per policy (what a user types into the form).
CUSTOM = {
    "fixed": {},
    "step": {"step": 20.0, "gamma": 0.5},
    "multistep": {"steps": (10.0, 40.0, 90.0), "gamma": 0.3},
    "exp": {"gamma": 0.9},
    "inv": {"gamma": 0.05, "power": 0.75},
    "poly": {"power": 1.5},
    "sigmoid": {"step": 30.0, "gamma": 0.25},
}


def _ours(policy: str, params: dict) -> dict:
    return resolve_policy(
        policy,
        step_size=params.get("step"),
        gamma=params.get("gamma"),
        power=params.get("power"),
        step_values=",".join(str(s) for s in params["steps"]) if "steps" in params else None,
    )


@pytest.mark.parametrize("policy", POLICIES)
def test_engine_rate_is_digits6_formula_with_defaults_and_custom_values(policy):
    for params in ({}, CUSTOM[policy]):
        ours = learning_rate_at(PROGRESS, 0.01, _ours(policy, params))
        expected = [digits6(policy, i, 0.01, **params) for i in PROGRESS]
        np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=0, err_msg=f"{policy} {params}")


def test_sigmoid_with_default_gamma_decays_through_half_the_rate_at_the_step():
    rates = learning_rate_at(PROGRESS, 0.01, resolve_policy("sigmoid"))
    assert np.all(np.diff(rates) < 0), "sigmoid with gamma 0.1 must decay, as in DIGITS 6"
    assert rates[50] == pytest.approx(0.005)
    assert rates[0] == pytest.approx(0.01 / (1 + math.exp(-5))) and rates[100] == pytest.approx(
        0.01 / (1 + math.exp(5))
    )
    rising = learning_rate_at(PROGRESS, 0.01, resolve_policy("sigmoid", gamma=-0.1))
    assert np.all(np.diff(rising) > 0)  # the Caffe docstring's sign: a negative gamma here


@pytest.fixture
def client(tmp_path):
    from digits_core.web import create_app

    return create_app(tmp_path / "jobs", start_scheduler=False, testing=True, data_roots=[tmp_path]).test_client()


@pytest.mark.parametrize("policy", POLICIES)
def test_web_preview_draws_digits6_formula(client, policy):
    params = CUSTOM[policy]
    query = {
        "learning_rate": "0.02",
        "lr_policy": policy,
        "lr_gamma": params.get("gamma", ""),
        "lr_power": params.get("power", ""),
        "lr_step_size": params.get("step", ""),
        "lr_step_values": ",".join(str(s) for s in params.get("steps", ())),
    }
    points = client.get("/api/lr-preview", query_string=query).get_json()["points"]
    assert [p["progress"] for p in points] == pytest.approx(list(PROGRESS))
    np.testing.assert_allclose(
        [p["lr"] for p in points], [digits6(policy, i, 0.02, **params) for i in PROGRESS], rtol=1e-12
    )


def test_web_preview_draws_one_curve_per_swept_learning_rate(client):
    data = client.get("/api/lr-preview", query_string={"learning_rate": "0.1, 0.01,0.001", "lr_policy": "sigmoid"})
    series = data.get_json()["series"]
    assert [s["learning_rate"] for s in series] == [0.1, 0.01, 0.001]
    for s in series:
        np.testing.assert_allclose(
            [p["lr"] for p in s["points"]], [digits6("sigmoid", i, s["learning_rate"]) for i in PROGRESS], rtol=1e-12
        )
    assert data.get_json()["points"] == series[0]["points"]
    bad = client.get("/api/lr-preview", query_string={"learning_rate": "0.1,-1", "lr_policy": "fixed"})
    assert bad.status_code == 400 and "learning_rate" in bad.get_json()["error"]["fields"]


@pytest.mark.parametrize(
    "policy, field, value, message",
    [
        ("exp", "lr_gamma", "-0.5", "exp: gamma -0.5 must be above 0"),
        ("step", "lr_gamma", "0", "step: gamma 0 must be above 0"),
        ("multistep", "lr_gamma", "-1", "multistep: gamma -1 must be above 0"),
        ("inv", "lr_gamma", "-0.1", "inv: gamma -0.1 must be 0 or more"),
        ("poly", "lr_power", "-2", "poly: power -2 must be 0 or more"),
        ("sigmoid", "lr_gamma", "nan", "is not a finite number"),
        ("multistep", "lr_step_values", "50,120", "step values are percentages of training, 0 to 100"),
    ],
)
def test_values_that_break_the_schedule_are_refused_on_their_field(client, policy, field, value, message):
    resp = client.get("/api/lr-preview", query_string={"learning_rate": "0.01", "lr_policy": policy, field: value})
    assert resp.status_code == 400
    assert message in resp.get_json()["error"]["fields"][field][0]


def test_the_engine_refuses_them_too():
    from digits_core.engine.options import TrainingOptions
    from digits_core.errors import FormValidationError

    with pytest.raises(FormValidationError, match="poly: power -1 must be 0 or more"):
        TrainingOptions(lr_policy="poly", lr_power=-1).lr_policy_params()
    assert resolve_policy("sigmoid", gamma=-0.1)["gamma"] == -0.1  # a rising sigmoid stays possible


# Both doors of the preview are generated from the option specs and check values as training does.
BAD_VALUES = [
    ("exp", "lr_gamma", "-0.5"),
    ("step", "lr_step_size", "0"),
    ("sigmoid", "lr_gamma", "nan"),
    ("poly", "lr_power", "-2"),
    ("multistep", "lr_step_values", "50,120"),
]  # a bad base rate: the chart's own sentence (tests/test_ui_parity.py)


def test_the_preview_takes_the_specs_options_and_policy_parameters_are_stated_once():
    import argparse

    from digits_core.cli import build_parser
    from digits_core.engine.lr_policies import DEFAULTS, policies_using
    from digits_core.engine.option_specs import BY_NAME, LR_PREVIEW_OPTIONS
    from digits_core.engine.solvers import MOMENTUM_SOLVERS, OPTIMIZERS, SOLVERS

    params = {name for policy in DEFAULTS.values() for name in policy}
    assert set(LR_PREVIEW_OPTIONS) == {"learning_rate", "lr_policy"} | {f"lr_{p}" for p in params}
    for name in params:
        assert (
            BY_NAME[f"lr_{name}"].policies == policies_using(name) == tuple(p for p in POLICIES if name in DEFAULTS[p])
        )
    assert BY_NAME["solver"].choices == SOLVERS == tuple(OPTIMIZERS)
    assert BY_NAME["momentum"].solvers == MOMENTUM_SOLVERS == ("momentum", "nesterov")
    parser = build_parser()
    preview = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["lr-preview"]
    flags = {a.dest: a for a in preview._actions}
    for name in LR_PREVIEW_OPTIONS:
        spec = BY_NAME[name]
        assert spec.flag in flags[name].option_strings and spec.help.replace("%", "%%") in flags[name].help
    assert flags["lr_policy"].choices == POLICIES


@pytest.mark.parametrize("policy, field, value", BAD_VALUES)
def test_both_preview_doors_refuse_what_training_refuses_with_its_message(client, capsys, policy, field, value):
    from digits_core.cli import main as digits
    from digits_core.engine.options import TrainingOptions
    from digits_core.errors import FormValidationError

    with pytest.raises(FormValidationError) as training:
        TrainingOptions.from_kwargs(lr_policy=policy, **{field: value})
    message = training.value.errors[field][0]
    resp = client.get("/api/lr-preview", query_string={"lr_policy": policy, field: value})
    assert resp.status_code == 400 and resp.get_json()["error"]["fields"][field] == [message]
    flag = "--" + field.replace("_", "-")
    assert digits(["lr-preview", "--lr-policy", policy, flag, value]) != 0
    assert message in capsys.readouterr().err
