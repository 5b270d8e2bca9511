"""Option kinds and bounds are enforced from the option specs, the same at every door (Python API included)."""

import pytest

from digits_core.engine.option_specs import TRAINING_OPTIONS
from digits_core.engine.options import TrainingOptions
from digits_core.errors import FormValidationError


def test_switches_given_as_strings_mean_what_they_say():
    assert TrainingOptions(shuffle="false").shuffle is False
    options = TrainingOptions.from_kwargs(shuffle="false", aug_rot90="no", jit="0", early_stopping_restore_best="off")
    assert options.shuffle is False and options.augmentation.rot90 is False and options.jit is False
    assert not options.augmentation.enabled and options.early_stopping_restore_best is False
    assert TrainingOptions.from_kwargs(aug_rot90="yes", shuffle=1).augmentation.rot90 is True


@pytest.mark.parametrize(
    "values, field, message",
    [
        ({"aug_scale": 0.9995}, "aug_scale", "must be <= 0.999"),
        ({"aug_hue": 0.7}, "aug_hue", "must be <= 0.5"),
        ({"shuffle": "maybe"}, "shuffle", "must be true or false"),
        ({"aug_rot90": 2}, "aug_rot90", "must be true or false"),
        ({"epochs": True}, "epochs", "is not an integer"),
        ({"epochs": "3.5"}, "epochs", "is not an integer"),
        ({"learning_rate": "nan"}, "learning_rate", "must be finite"),
        ({"learning_rate": 0}, "learning_rate", "must be > 0"),
        ({"aug_noise": -0.1}, "aug_noise", "must be >= 0"),
        ({"early_stopping_patience": 0}, "early_stopping_patience", "must be >= 1"),
    ],
)
def test_bad_values_are_refused_on_their_field(values, field, message):
    with pytest.raises(FormValidationError) as info:
        TrainingOptions.from_kwargs(**values)
    assert message in info.value.errors[field][0]


def test_numbers_are_brought_to_their_declared_kind():
    options = TrainingOptions.from_kwargs(epochs="3", learning_rate="0.1", aug_scale="0.2", batch_size=8.0)
    assert options.epochs == 3 and isinstance(options.epochs, int) and options.batch_size == 8
    assert options.learning_rate == 0.1 and options.augmentation.scale == 0.2


def test_every_declared_number_and_switch_is_checked():
    """Adding one spec entry is enough: its kind and bounds are enforced with no code of its own."""
    for spec in TRAINING_OPTIONS:
        if spec.kind == "bool":
            assert spec.coerce("false") is False and spec.coerce("on") is True
        elif spec.kind in ("int", "float") and spec.maximum is not None:
            with pytest.raises(ValueError, match="must be <="):
                spec.coerce(spec.maximum * 2 + 1)


def test_dataset_job_and_training_options_are_one_declaration_type_with_one_set_of_generators():
    import argparse

    from digits_core.datasets.options import DATASET_OPTIONS, add_cli_arguments, web_form_fields
    from digits_core.engine.option_specs import add_cli_arguments as add_training_arguments
    from digits_core.errors import DatasetError
    from digits_core.option_spec import OptionSpec

    assert all(type(spec) is OptionSpec for spec in TRAINING_OPTIONS + DATASET_OPTIONS)
    parser = argparse.ArgumentParser()
    add_cli_arguments(parser)
    add_training_arguments(parser)
    flags = {a.dest: a for a in parser._actions}
    for spec in TRAINING_OPTIONS + DATASET_OPTIONS:
        if spec.cli:
            assert spec.flag in flags[spec.name].option_strings and flags[spec.name].default is None
            assert flags[spec.name].help.startswith(spec.help.replace("%", "%%")[:20])
    workers = next(s for s in DATASET_OPTIONS if s.name == "workers")
    assert flags["workers"].metavar == "N" and "(default: the CPUs this process may use)" in flags["workers"].help
    with pytest.raises(DatasetError, match="not a whole number"):
        workers.coerce("four")  # a dataset option's own check is its coerce, as a training option's bounds are
    assert workers.coerce(None) is None and TRAINING_OPTIONS[0].coerce("3") == 3
    fields = web_form_fields()
    assert set(fields) == {f"job_{s.name}" for s in DATASET_OPTIONS}
    assert fields["job_workers"].kwargs["render_kw"]["placeholder"] == "the CPUs this process may use"
