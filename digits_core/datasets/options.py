"""The options of a dataset job, declared once, and the knobs behind them (error budget, workers, chunks).

:data:`DATASET_OPTIONS` declares every option a dataset job takes besides
its plugin's form (name, group, worker processes, error budget): kind,
label, help, what an empty value means, and the function that checks and
normalizes a value. Generated from it:

* the ``job options`` flags of ``digits dataset create PLUGIN`` (:func:`add_cli_arguments`,
  :func:`options_from_cli`);
* the common fields of the web "New dataset" form (:func:`web_form_fields`; the
  web form, the JSON API and the page read them back with :func:`options_from_web`);
* the validation of :func:`~digits_core.datasets.create_dataset` (:func:`check_dataset_options`,
  unknown names refused);
* the table in README.md (:func:`markdown_table`; a test fails when they differ).

A plugin's own options (folders, resize mode, encoding, compression...) are
declared once too, by its WTForms dataset form, which the same three front
doors are generated from (:func:`digits_core.forms.add_form_arguments`).
No WTForms or TensorFlow at import time.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import DatasetError, DigitsError, FormValidationError
from ..groups import MAX_GROUP_LENGTH, normalize_group

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
        raise DatasetError(f'max_errors "{original}" is not a count (e.g. 10), a fraction (e.g. 0.05) '
                           "or a percentage (e.g. 5%).") from None


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
MAX_NAME_LENGTH = 200


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


@dataclass(frozen=True)
class DatasetOption:
    """One option of a dataset job, as every front door shows it.

    Attributes:
        name: The keyword of :func:`~digits_core.datasets.create_dataset`, the
            ``job.json`` key and the JSON API key; the flag is ``--name-with-dashes``,
            the web field ``job_<name>``.
        kind: ``text`` or ``int`` (how the web form and the CLI read it).
        label: The web form's label.
        help: One line of help (``--help``, the form's description, the README table).
        default: What an empty value means, in words.
        parse: Checks a given value and returns it normalized (``None``: the default);
            raises a :class:`~digits_core.errors.DigitsError` saying what is wrong.
        metavar: The value's name in ``--help``.
        max_length: Longest text the web field accepts.
        html: Extra HTML attributes of the web field.
    """

    name: str
    kind: str
    label: str
    help: str
    default: str
    parse: Callable[[Any], Any]
    metavar: str = "X"
    max_length: int = 200
    html: Mapping[str, str] = field(default_factory=dict)

    @property
    def flag(self) -> str:
        """The ``digits dataset create`` flag."""
        return "--" + self.name.replace("_", "-")

    @property
    def web_field(self) -> str:
        """The web form's field name (prefixed: plugin forms own the plain names)."""
        return f"job_{self.name}"


DATASET_OPTIONS: tuple[DatasetOption, ...] = (
    DatasetOption("name", "text", "Dataset name", "the dataset's name in the jobs tables", "the plugin id",
                  _parse_name, metavar="NAME", max_length=MAX_NAME_LENGTH),
    DatasetOption("group", "text", "Group", "job group: jobs of one group are shown together, collapsible, "
                  "on the web home page", "no group", _parse_group, metavar="NAME", max_length=MAX_GROUP_LENGTH,
                  html={"list": "group-names"}),
    DatasetOption("workers", "int", "Worker processes", "processes that encode entries in parallel (1: in this process)",
                  "the CPUs this process may use", _parse_workers, metavar="N", max_length=4),
    DatasetOption("max_errors", "text", "Entries allowed to fail",
                  'entries that may fail (skipped, listed in the errors report) before the job fails: '
                  'a count ("10"), a fraction ("0.05") or a percentage ("5%")', "5%", _parse_max_errors,
                  max_length=20),
)

BY_NAME: dict[str, DatasetOption] = {option.name: option for option in DATASET_OPTIONS}


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
        value = values.get(option.name)
        try:
            result[option.name] = None if value is None else option.parse(value)
        except FormValidationError as exc:
            errors[option.name] = [m for messages in exc.errors.values() for m in messages]
        except DigitsError as exc:
            errors[option.name] = [str(exc)]
    if errors:
        raise DatasetOptionsError(errors, what)
    return result


# -- the CLI -----------------------------------------------------------------------------------------


def add_cli_arguments(parser: Any) -> None:
    """Add one flag per dataset job option to an argparse parser or argument group."""
    for option in DATASET_OPTIONS:
        text = f"{option.help} (default: {option.default})"
        parser.add_argument(option.flag, dest=option.name, default=None, metavar=option.metavar,
                            type=int if option.kind == "int" else str, help=text.replace("%", "%%"))


def options_from_cli(namespace: Any) -> dict[str, Any]:
    """The dataset job options of a parsed command line (``None`` where a flag was not given)."""
    return {option.name: getattr(namespace, option.name, None) for option in DATASET_OPTIONS}


# -- the web form ------------------------------------------------------------------------------------


def web_form_fields() -> dict[str, Any]:
    """Unbound WTForms fields (``job_<name>``) for the web "New dataset" form, checked by each option's parser."""
    from wtforms import IntegerField, StringField, ValidationError
    from wtforms.validators import Optional

    def checked_by(option: DatasetOption) -> Callable[[Any, Any], None]:
        def validate(form: Any, fld: Any) -> None:
            try:
                check_dataset_options({option.name: fld.data})
            except FormValidationError as exc:
                raise ValidationError("; ".join(exc.errors[option.name])) from None

        return validate

    fields: dict[str, Any] = {}
    for option in DATASET_OPTIONS:
        field_class = IntegerField if option.kind == "int" else StringField
        fields[option.web_field] = field_class(
            option.label, validators=[Optional(), checked_by(option)],  # the declaration's check, nothing else
            description=f"{option.help[0].upper()}{option.help[1:]}; empty: {option.default}.",
            render_kw={"placeholder": option.default, "maxlength": str(option.max_length), **option.html})
    return fields


def options_from_web(form: Any) -> dict[str, Any]:
    """The dataset job options of a validated web form (``None`` where a field was left empty)."""
    values = {}
    for option in DATASET_OPTIONS:
        value = form[option.web_field].data
        values[option.name] = None if value in ("", None) else value
    return values


def web_values(record: Mapping[str, Any]) -> dict[str, Any]:
    """The web form's values (``job_<name>``) for the options stored in a job record (e.g. to clone it)."""
    return {option.web_field: record.get(option.name) for option in DATASET_OPTIONS
            if record.get(option.name) is not None}


# -- docs --------------------------------------------------------------------------------------------


def markdown_table() -> str:
    """The README's table of dataset job options (checked by ``tests/test_dataset_options.py``)."""
    rows = ["| option (API / `job.json`) | flag | web field | default | meaning |", "|---|---|---|---|---|"]
    for option in DATASET_OPTIONS:
        rows.append(f"| `{option.name}` | `{option.flag} {option.metavar}` | {option.label} | {option.default} | "
                    f"{option.help} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # python -m digits_core.datasets.options > the README table
    print(markdown_table(), end="")
