"""Sweep expansion and job group names (no TensorFlow): the one expansion every front door and executor uses."""

from __future__ import annotations

import pytest

from digits_core import FormValidationError
from digits_core.cli import build_parser
from digits_core.groups import MAX_GROUP_LENGTH, normalize_group
from digits_core.sweeps import (
    MAX_SWEEP_JOBS,
    expand_sweep,
    is_sweep,
    parse_values,
    refuse_sweep,
    sweep_group,
    sweep_option_names,
)


def test_two_by_two_sweep_gives_every_combination_in_order_with_other_options_kept():
    points = expand_sweep(
        {"learning_rate": "0.1, 0.01", "batch_size": [32, "64"], "epochs": 1, "solver": "adam"}, "mnist"
    )
    assert [(p.options["learning_rate"], p.options["batch_size"]) for p in points] == [
        (0.1, 32),
        (0.1, 64),
        (0.01, 32),
        (0.01, 64),
    ]
    assert [p.index for p in points] == [0, 1, 2, 3]
    assert [p.name for p in points] == [
        "mnist lr=0.1 batch=32",
        "mnist lr=0.1 batch=64",
        "mnist lr=0.01 batch=32",
        "mnist lr=0.01 batch=64",
    ]
    assert points[1].values == {"learning_rate": 0.1, "batch_size": 64}
    assert all(p.options["epochs"] == 1 and p.options["solver"] == "adam" for p in points)
    assert all(
        isinstance(p.options["batch_size"], int) and isinstance(p.options["learning_rate"], float) for p in points
    )


def test_one_swept_option_varies_alone_and_names_only_it():
    points = expand_sweep({"learning_rate": [0.3, 0.2, 0.1], "batch_size": 16}, "net")
    assert [p.name for p in points] == ["net lr=0.3", "net lr=0.2", "net lr=0.1"]
    assert {p.options["batch_size"] for p in points} == {16}
    assert points[0].values == {"learning_rate": 0.3}


def test_no_sweep_is_one_point_with_the_options_as_given():
    options = {"learning_rate": 0.05, "epochs": 2}
    (point,) = expand_sweep(options, "plain")
    assert point.options == options and point.values == {} and point.name == "plain"
    (point,) = expand_sweep({"learning_rate": "0.05", "batch_size": ["8"]})
    assert point.options == {"learning_rate": 0.05, "batch_size": 8}  # one value: a plain number
    (point,) = expand_sweep({"learning_rate": "", "batch_size": None, "epochs": 1})
    assert point.options == {"batch_size": None, "epochs": 1}  # an empty form field is "not given"


def test_repeated_values_count_once():
    assert parse_values("batch_size", "32,32, 64") == [32, 64]
    assert len(expand_sweep({"learning_rate": "0.1,0.10,1e-1"})) == 1


@pytest.mark.parametrize(
    "name, raw, message",
    [
        ("learning_rate", "0.1,-0.01", "-0.01: must be above 0"),
        ("learning_rate", "0.1,0", "0: must be above 0"),
        ("learning_rate", "0.1,abc", '"abc" is not a number'),
        ("learning_rate", "0.1,,0.2", "every comma-separated item must be a number"),
        ("learning_rate", "nan,0.1", "must be a finite number"),
        ("batch_size", "32,0", "0: must be above 0"),
        ("batch_size", "32,12.5", '"12.5" is not a whole number'),
        ("batch_size", [True, 4], "must be a number"),
    ],
)
def test_bad_values_are_refused_naming_the_option(name, raw, message):
    with pytest.raises(FormValidationError) as info:
        expand_sweep({name: raw})
    assert list(info.value.errors) == [name]
    assert message in info.value.errors[name][0]


def test_a_sweep_larger_than_the_limit_is_refused():
    many = ",".join(str(2**i) for i in range(1, 10))  # 9 batch sizes
    assert len(expand_sweep({"learning_rate": "0.1,0.2,0.3,0.4,0.5,0.6,0.7", "batch_size": many})) == 63
    with pytest.raises(FormValidationError, match=f"at most {MAX_SWEEP_JOBS}"):
        expand_sweep({"learning_rate": "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8", "batch_size": many})


def test_is_sweep_and_refuse_sweep():
    assert sweep_option_names() == ("learning_rate", "batch_size")
    assert is_sweep({"learning_rate": "0.1,0.01"}) and is_sweep({"batch_size": [16, 32]})
    assert not is_sweep({"learning_rate": 0.1}) and not is_sweep({"batch_size": [16]})
    assert not is_sweep({"lr_step_values": "50,85"})  # a comma list that is one value, not a sweep
    with pytest.raises(FormValidationError) as info:
        refuse_sweep({"epochs": 1, "batch_size": [16, 32]})
    assert list(info.value.errors) == ["batch_size"] and "train_sweep" in info.value.errors["batch_size"][0]
    refuse_sweep({"learning_rate": 0.1})


def test_sweep_group_is_the_given_group_else_the_name():
    assert sweep_group("mnist lr", None) == "mnist lr"
    assert sweep_group("mnist", "  my   runs ") == "my runs"
    assert sweep_group("", "") == "sweep"


def test_group_names_are_normalised_and_checked():
    assert normalize_group("  cardiac   MRI ") == "cardiac MRI"
    assert normalize_group("") is None and normalize_group("   ") is None and normalize_group(None) is None
    with pytest.raises(FormValidationError, match=f"at most {MAX_GROUP_LENGTH} characters"):
        normalize_group("x" * (MAX_GROUP_LENGTH + 1))
    with pytest.raises(FormValidationError, match="control characters") as info:
        normalize_group("bad\x00name", "job_group")
    assert list(info.value.errors) == ["job_group"]
    with pytest.raises(FormValidationError, match="a group is a name"):
        normalize_group(3)


def test_cli_flags_take_comma_separated_values():
    args = build_parser().parse_args(
        ["train", "--dataset", "x", "--learning-rate", "0.1,0.01", "--batch-size", "32,64", "--group", "g"]
    )
    assert args.learning_rate == [0.1, 0.01] and args.batch_size == [32, 64] and args.group == "g"
    args = build_parser().parse_args(["train", "--dataset", "x", "--lr", "0.5", "--batch-size", "8"])
    assert args.learning_rate == 0.5 and args.batch_size == 8  # one value stays a number


def test_cli_refuses_a_bad_sweep_value_naming_it(capsys):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["train", "--dataset", "x", "--batch-size", "32,-1"])
    assert info.value.code == 2
    assert "--batch-size: -1: must be above 0" in capsys.readouterr().err


def test_model_list_shows_and_filters_groups(tmp_path, capsys):
    from digits_core.cli import main
    from digits_core.jobs import Job

    Job.create("model", "a lr=0.1", jobs_dir=tmp_path, group="a", sweep={"learning_rate": 0.1}, network="lenet")
    Job.create("model", "solo", jobs_dir=tmp_path, network="lenet")
    assert main(["--jobs-dir", str(tmp_path), "model", "list", "--group", " a "]) == 0
    out = capsys.readouterr().out
    assert "a lr=0.1" in out and "solo" not in out and out.splitlines()[0].split()[3] == "GROUP"
    assert main(["--jobs-dir", str(tmp_path), "model", "list", "--group", "b"]) == 0
    assert 'No model job in group "b".' in capsys.readouterr().out
    job_id = Job.create("model", "x", jobs_dir=tmp_path, group="a", sweep={"batch_size": 8}).id
    assert main(["--jobs-dir", str(tmp_path), "model", "show", job_id]) == 0
    assert "group: a (sweep: batch_size=8)" in capsys.readouterr().out
