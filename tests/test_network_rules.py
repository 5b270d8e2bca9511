"""The network rules live in the core (engine.networks) and every door calls them before a job exists."""

import pytest
from synthetic_plugins import SyntheticShapes

from digits_core.engine.networks import (
    BUILTIN,
    NetworkSpec,
    check_network_task,
    custom_code_problem,
    network_task_problem,
)
from digits_core.errors import FormValidationError
from digits_core.jobs import JobStore


def test_network_task_rule_in_the_core():
    problem = network_task_problem(BUILTIN["detectnet"], "classification", "ds1")
    assert problem.startswith('Network "detectnet" is for detection; dataset ds1 is a classification dataset')
    assert "lenet" in problem and "detectnet" not in problem.split("choose")[1]
    assert network_task_problem(BUILTIN["lenet"], "classification", "ds1") is None
    assert network_task_problem(NetworkSpec("mine", lambda *a, **k: None, "callable"), "detection", "d") is None
    with pytest.raises(FormValidationError) as info:
        check_network_task(BUILTIN["unet"], "regression", "ds2")
    assert "ds2 is a regression dataset" in info.value.errors["network"][0]


def test_build_model_contract_in_the_core():
    assert custom_code_problem("def build_model(input_shape, num_outputs):\n    pass\n") is None
    assert custom_code_problem("x = 1") == "Custom code must define build_model(input_shape, num_outputs, **params)."


@pytest.fixture
def shapes_dataset(jobs_dir):
    from digits_core import registry
    from digits_core.datasets import create_dataset

    registry.register(SyntheticShapes)
    try:
        return create_dataset("synthetic-shapes", {"count": 8, "val_count": 2, "size": 8}, workers=1)
    finally:
        registry.unregister(SyntheticShapes)


@pytest.mark.slow
def test_cli_and_api_refuse_a_network_for_another_task_before_creating_a_job(jobs_dir, shapes_dataset, digits_cli):
    import digits_core.engine

    with pytest.raises(FormValidationError, match="is for detection; dataset .* is a classification dataset"):
        digits_core.engine.train(shapes_dataset.id, "detectnet", epochs=1)
    result = digits_cli(
        "--jobs-dir", str(jobs_dir), "train", "--dataset", shapes_dataset.id, "--network", "detectnet", "--epochs", "1"
    )
    assert result.returncode != 0
    assert "is for detection" in result.stderr and "choose" in result.stderr
    assert "output shape" not in result.stderr  # refused by the rule, not by building the model
    assert JobStore(jobs_dir).list("model") == []  # no job folder at either door
