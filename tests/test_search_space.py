"""Search spaces and tuning settings (no TensorFlow, no Ray): what is searchable, bounds, refusals on the field."""

from __future__ import annotations

import random

import pytest

from digits_core import FormValidationError
from digits_core.sweeps.space import (
    MAX_TRIALS,
    check_networks,
    grid_size,
    grid_trials,
    parse_search,
    parse_spaces,
    random_trials,
)
from digits_core.sweeps.tune import TuneSettings


def test_the_issues_spaces_parse_into_ranges_and_choices_of_the_options_types():
    spaces = parse_spaces(
        [
            "learning_rate=loguniform(1e-4,1e-1)",
            "batch_size=choice(32,64,128)",
            "solver=choice(SGD,adam)",
            "momentum=uniform(0.5, 0.99)",
            "aug_rot90=true,false",
        ]
    )
    assert spaces["learning_rate"].describe() == "loguniform(0.0001,0.1)"
    assert spaces["batch_size"].values == (32, 64, 128) and all(type(v) is int for v in spaces["batch_size"].values)
    assert spaces["solver"].values == ("sgd", "adam")
    assert spaces["aug_rot90"].values == (True, False) and spaces["aug_rot90"].kind == "grid"
    assert parse_spaces({"learning_rate": [0.1, 0.01]})["learning_rate"].values == (0.1, 0.01)


def test_samples_stay_inside_their_ranges_and_log_ranges_cover_the_decades():
    space = parse_search("learning_rate=loguniform(1e-4,1e-1)")
    rng = random.Random(0)
    drawn = [space.sample(rng) for _ in range(400)]
    assert all(1e-4 <= v <= 1e-1 for v in drawn)
    decades = [sum(lo <= v < lo * 10 for v in drawn) for lo in (1e-4, 1e-3, 1e-2)]
    assert min(decades) > 80  # uniform in log scale: about a third in each decade (linear would put 90 % in the last)
    batch = parse_search("batch_size=uniform(8,12)")
    values = {batch.sample(rng) for _ in range(200)}
    assert values <= {8, 9, 10, 11, 12} and all(type(v) is int for v in values) and len(values) == 5


@pytest.mark.parametrize("kind", ["uniform", "loguniform"])
def test_float_samples_never_step_past_bounds_written_with_more_digits_than_a_sample_keeps(kind):
    # Samples keep 6 significant digits: 0.12345678 draws near HIGH round up to 0.123457 unless clamped.
    low, high = 0.10000004, 0.12345678
    space = parse_search(f"learning_rate={kind}({low!r},{high!r})")
    rng = random.Random(7)
    drawn = [space.sample(rng) for _ in range(20000)]
    assert min(drawn) >= low and max(drawn) <= high
    assert max(drawn) > high - 1e-4 and min(drawn) < low + 1e-4  # the whole range is reached, not a shrunk one
    assert all(type(v) is float for v in drawn)


def test_random_trials_are_seeded_and_grid_trials_are_every_combination():
    spaces = parse_spaces(["learning_rate=0.1,0.01", "solver=choice(sgd,adam,rmsprop)"])
    assert grid_size(spaces) == 6
    assert grid_trials(spaces)[:2] == [
        {"learning_rate": 0.1, "solver": "sgd"},
        {"learning_rate": 0.1, "solver": "adam"},
    ]
    assert random_trials(spaces, 5, seed=3) == random_trials(spaces, 5, seed=3)
    assert grid_size(parse_spaces(["learning_rate=uniform(0.1,0.2)"])) is None


@pytest.mark.parametrize(
    "search, field, message",
    [
        ("learning_rate=loguniform(-1e-3,1e-1)", "learning_rate", "outside the option's range (must be above 0)"),
        ("learning_rate=uniform(0.1,0.01)", "learning_rate", "LOW must be below HIGH"),
        ("learning_rate=-0.1,0.1", "learning_rate", "must be above 0"),
        ("frobnication=1,2", "frobnication", "unknown training option; a search may range over network,"),
        ("epochs=1,2", "epochs", "not searchable"),
        ("solver=choice(sgd,lbfgs)", "solver", '"lbfgs" is not a choice of solver'),
        ("solver=uniform(1,2)", "solver", "needs a number option"),
        ("batch_size=normal(1,2)", "batch_size", '"normal" is not a kind of space'),
        ("batch_size=choice(32,)", "batch_size", "none empty"),
        ("learning_rate", "search", "write OPTION=EXPR"),
    ],
)
def test_a_bad_space_is_refused_on_its_field_with_the_reason(search, field, message):
    with pytest.raises(FormValidationError) as caught:
        parse_spaces([search])
    assert message in caught.value.errors[field][0]


def test_a_network_choice_the_task_cannot_take_is_refused_on_the_network_field():
    check_networks(parse_spaces(["network=choice(lenet,alexnet)"]), "classification")
    with pytest.raises(FormValidationError) as caught:
        check_networks(parse_spaces(["network=choice(lenet,unet)"]), "classification")
    assert '"unet" cannot train a classification dataset' in caught.value.errors["network"][0]
    with pytest.raises(FormValidationError, match="is not a network"):
        check_networks(parse_spaces(["network=choice(lenet,nonet)"]), "classification")


def test_every_bad_space_of_a_search_is_reported_at_once():
    with pytest.raises(FormValidationError) as caught:
        parse_spaces(["learning_rate=loguniform(0,1)", "batch_size=choice(0,32)"])
    assert set(caught.value.errors) == {"learning_rate", "batch_size"}
    with pytest.raises(FormValidationError, match="from 1 to 256"):
        random_trials(parse_spaces(["learning_rate=0.1,0.2"]), MAX_TRIALS + 1)


def test_settings_are_checked_on_their_fields_and_the_mode_follows_the_metric():
    assert TuneSettings(metric="val_loss").checked().mode == "min"
    assert TuneSettings(metric="val_accuracy").checked().mode == "max"
    with pytest.raises(FormValidationError) as caught:
        TuneSettings(scheduler="hyperband", max_epochs=0, reduction_factor=1, metric="loss", max_concurrent=0).checked()
    assert set(caught.value.errors) == {"scheduler", "max_epochs", "reduction_factor", "metric", "max_concurrent"}
    with pytest.raises(FormValidationError, match="at most max_epochs"):
        TuneSettings(max_epochs=3, grace_period=4).checked()


def test_digits_tune_refuses_a_bad_space_on_its_field_without_loading_tensorflow(digits_cli, tmp_path):
    result = digits_cli(
        "--jobs-dir",
        str(tmp_path),
        "tune",
        "--dataset",
        "x",
        "--search",
        "learning_rate=loguniform(-1e-3,1e-1)",
        "--search",
        "batch_size=choice(32,64)",
    )
    assert result.returncode == 2
    assert "learning_rate: loguniform(-0.001,0.1): -0.001 is outside the option's range" in result.stderr
    assert result.heavy_modules == [] and not (tmp_path / ".sweeps").exists()
