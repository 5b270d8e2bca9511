"""The options of a dataset job, declared once, and the knobs behind them (error budget, workers, chunks).

:data:`DATASET_OPTIONS` declares every option a dataset job takes besides
its plugin's form (name, group, worker processes, error budget) as
:class:`~digits_core.option_spec.OptionSpec` entries, the declaration type of
the training options too: kind, label, help, what an empty value means, and
the function that checks and normalizes a value. Generated from it, by the
same generators as the training options' flags and fields:

* the ``job options`` flags of ``digits dataset create PLUGIN`` (:func:`add_cli_arguments`,
  :func:`options_from_cli`);
* the common fields of the web "New dataset" form (:func:`web_form_fields`; the
  web form, the JSON API and the page read them back with :func:`options_from_web`);
* the validation of :func:`~digits_core.datasets.create_dataset` (:func:`check_dataset_options`,
  unknown names refused);
* the table in docs/datasets.md (:func:`markdown_table`; a test fails when they differ).

A plugin's own options (folders, resize mode, encoding, compression...) are
declared once too, by its WTForms dataset form, which the same three front
doors are generated from (:func:`digits_core.forms.add_form_arguments`).
No WTForms or TensorFlow at import time.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import DatasetError, DigitsError, FormValidationError
from ..groups import MAX_GROUP_LENGTH, normalize_group
from ..jobs.checks import MAX_JOB_NAME_LENGTH
from ..option_spec import OptionSpec, add_arguments, check_message, wtforms_field

#: Default ``max_errors``: the fraction of entries that may be skipped.
DEFAULT_MAX_ERRORS = 0.05
#: Largest chunk of entries sent to a worker at once.
MAX_CHUNK = 512


def parse_max_errors(value: Any) -> float | int:
    """Normalise a ``max_errors`` setting.

    Accepts ``None`` (default 5 %), an int >= 0 or a string of one (a count
    of entries), a float in ``[0, 1)`` or a string like ``"0.1"`` /
    ``"10%"`` (a fraction of all entries).

    Raises:
        DatasetError: The value is none of these.
    """
    if value is None:
        return DEFAULT_MAX_ERRORS
    original = value
    try:
        if isinstance(value, str):
            text = value.strip()
            if text.endswith("%"):
                value = float(text[:-1]) / 100.0
            elif text.isdigit():
                value = int(text)
            else:
                value = float(text)
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, int):
            if value < 0:
                raise ValueError
            return value
        value = float(value)
        if value.is_integer() and value >= 1:
            return int(value)
        if not 0 <= value < 1:
            raise ValueError
        return value
    except ValueError:
        raise DatasetError(
            f'max_errors "{original}" is not a count (e.g. 10), a fraction (e.g. 0.05) or a percentage (e.g. 5%).'
        ) from None


def allowed_errors(max_errors: float | int, total: int) -> int:
    """Return how many of ``total`` entries may be skipped under ``max_errors``."""
    if isinstance(max_errors, int):
        return max_errors
    return int(math.floor(max_errors * total))


def resolve_workers(workers: int | None) -> int:
    """Return the worker count: ``workers`` or the number of CPUs this process may use."""
    if workers is None:
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not Linux
            return max(1, os.cpu_count() or 1)
    workers = int(workers)
    if workers < 1:
        raise DatasetError(f"workers must be at least 1, not {workers}")
    return workers


def chunk_size(total: int, workers: int) -> int:
    """Entries per task: large enough that inter-process traffic does not dominate."""
    return max(1, min(MAX_CHUNK, math.ceil(total / (workers * 4))))


# -- the declaration ---------------------------------------------------------------------------------

#: Longest dataset name.
MAX_NAME_LENGTH = MAX_JOB_NAME_LENGTH  # one limit for every job name (digits_core.jobs.record)


def _parse_name(value: Any) -> str | None:
    if not isinstance(value, str):
        raise DatasetError(f"name must be text, not {type(value).__name__}.")
    text = value.strip()
    if len(text) > MAX_NAME_LENGTH:
        raise DatasetError(f"name is {len(text)} characters long; at most {MAX_NAME_LENGTH} are allowed.")
    return text or None


def _parse_group(value: Any) -> str | None:
    return normalize_group(value)


def _parse_workers(value: Any) -> int | None:
    if isinstance(value, str):
        value = value.strip()
        if not value:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).isdigit():
        raise DatasetError(f'workers "{value}" is not a whole number of processes (e.g. 4).')
    return resolve_workers(int(value))


def _parse_max_errors(value: Any) -> int | float | None:
    if isinstance(value, str) and not value.strip():
        return None
    return parse_max_errors(value)


#: The one declaration type of options (as training options), under the name this module used first.
DatasetOption = OptionSpec


def _option(
    name: str,
    kind: str,
    label: str,
    help: str,
    default_text: str,
    parse: Callable[[Any], Any],
    *,
    metavar: str = "X",
    max_length: int = 200,
    html: Mapping[str, str] | None = None,
) -> OptionSpec:
    return OptionSpec(
        name,
        kind,
        label,
        help,
        "Job",
        default_text=default_text,
        parse=_empty_is_default(parse),
        metavar=metavar,
        web_prefix="job_",
        max_length=max_length,
        html=html or {},
    )


def _empty_is_default(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``None`` stays ``None`` (the default applies); anything else goes through ``parse``."""

    def check(value: Any) -> Any:
        return None if value is None else parse(value)

    return check


DATASET_OPTIONS: tuple[OptionSpec, ...] = (
    _option(
        "name",
        "text",
        "Dataset name",
        "the dataset's name in the jobs tables",
        "the plugin id",
        _parse_name,
        metavar="NAME",
        max_length=MAX_NAME_LENGTH,
    ),
    _option(
        "group",
        "text",
        "Group",
        "job group: jobs of one group are shown together, collapsible, on the web home page",
        "no group",
        _parse_group,
        metavar="NAME",
        max_length=MAX_GROUP_LENGTH,
        html={"list": "group-names"},
    ),
    _option(
        "workers",
        "int",
        "Worker processes",
        "processes that encode entries in parallel (1: in this process)",
        "the CPUs this process may use",
        _parse_workers,
        metavar="N",
        max_length=4,
    ),
    _option(
        "max_errors",
        "text",
        "Entries allowed to fail",
        "entries that may fail (skipped, listed in the errors report) before the job fails: "
        'a count ("10"), a fraction ("0.05") or a percentage ("5%")',
        "5%",
        _parse_max_errors,
        max_length=20,
    ),
)

BY_NAME: dict[str, OptionSpec] = {option.name: option for option in DATASET_OPTIONS}


class DatasetOptionsError(FormValidationError, DatasetError):
    """Dataset job options a front door refused: a form error per option, and a :class:`DatasetError`."""


def check_dataset_options(values: Mapping[str, Any], what: str = "dataset job options") -> dict[str, Any]:
    """Check and normalize dataset job options (the API's validation).

    Args:
        values: Option name -> value; ``None`` (or empty text) means the default.
        what: How the options are named in the error (``"new dataset"``...).

    Returns:
        Every declared option, normalized (``None`` where the default applies).

    Raises:
        DatasetOptionsError: Unknown options, or values an option refuses; each
            message is filed under its option's name.
    """
    errors: dict[str, list[str]] = {}
    unknown = sorted(set(values) - set(BY_NAME))
    for name in unknown:
        errors[name] = [f"no such dataset job option (known: {', '.join(BY_NAME)})"]
    result: dict[str, Any] = {}
    for option in DATASET_OPTIONS:
        try:
            result[option.name] = option.coerce(values.get(option.name))
        except (ValueError, DigitsError) as exc:
            errors[option.name] = [check_message(exc)]
    if errors:
        raise DatasetOptionsError(errors, what)
    return result


# -- the CLI -----------------------------------------------------------------------------------------


def add_cli_arguments(parser: Any) -> None:
    """Add one flag per dataset job option to an argparse parser or argument group (as training's flags)."""
    add_arguments(parser, DATASET_OPTIONS)


def options_from_cli(namespace: Any) -> dict[str, Any]:
    """The dataset job options of a parsed command line (``None`` where a flag was not given)."""
    return {option.name: getattr(namespace, option.name, None) for option in DATASET_OPTIONS}


# -- the web form ------------------------------------------------------------------------------------


def web_form_fields() -> dict[str, Any]:
    """Unbound WTForms fields (``job_<name>``) for the web "New dataset" form, checked by each option's parser."""
    return {option.web_field: wtforms_field(option) for option in DATASET_OPTIONS}


def options_from_web(form: Any) -> dict[str, Any]:
    """The dataset job options of a validated web form (``None`` where a field was left empty)."""
    values = {}
    for option in DATASET_OPTIONS:
        value = form[option.web_field].data
        values[option.name] = None if value in ("", None) else value
    return values


def web_values(record: Mapping[str, Any]) -> dict[str, Any]:
    """The web form's values (``job_<name>``) for the options stored in a job record (e.g. to clone it)."""
    return {
        option.web_field: record.get(option.name) for option in DATASET_OPTIONS if record.get(option.name) is not None
    }


# -- docs --------------------------------------------------------------------------------------------


def markdown_table() -> str:
    """The manual's table of dataset job options (docs/datasets.md) (checked by ``tests/test_dataset_options.py``)."""
    rows = ["| option (API / `job.json`) | flag | web field | default | meaning |", "|---|---|---|---|---|"]
    for option in DATASET_OPTIONS:
        rows.append(
            f"| `{option.name}` | `{option.flag} {option.metavar}` | {option.label} | {option.default_text} | "
            f"{option.help} |"
        )
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # python -m digits_core.datasets.options > the README table
    print(markdown_table(), end="")
