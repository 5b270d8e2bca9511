"""The one declaration type of every option a front door takes, and the generators built on it.

Training options (:data:`digits_core.engine.option_specs.TRAINING_OPTIONS`) and
dataset-job options (:data:`digits_core.datasets.options.DATASET_OPTIONS`) are
both tuples of :class:`OptionSpec`: kind, bounds, choices, default, help,
form label and group, where it applies. From a tuple of them, the same
functions here make

* the command-line flags (:func:`add_arguments`, :func:`options_from_args`);
* the web form fields (:func:`wtforms_field`);
* the type check of every door, the Python API included (:meth:`OptionSpec.coerce`).

Each list keeps its own docs-table layout (training options have ranges and
applicability columns, dataset options a web field column); both tables are
generated from the specs and checked against the manual (docs/training.md) by the tests. No
WTForms at import time (the field generator imports it when a form is built).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import DigitsError, FormValidationError


@dataclass(frozen=True)
class OptionSpec:
    """One option as every front door shows and checks it.

    Attributes:
        name: The option name (API keyword, ``job.json`` / ``model.json`` key; the flag is
            ``--name-with-dashes``).
        kind: ``int``, ``float``, ``choice``, ``bool``, ``text`` or ``json``.
        label: Form label.
        help: One-line help (CLI ``--help``, form description, docs table).
        group: Form section (training options: ``Training``, ``Solver``, ...).
        choices: Allowed values of a ``choice``.
        minimum: Lower bound of a number (``None``: none).
        exclusive_min: The bound itself is not allowed (``> minimum``).
        maximum: Upper bound of a number.
        solvers: Solvers it applies to (``None``: all); hidden in the form and left out of
            ``model.json`` otherwise.
        policies: LR policies it applies to (``None``: all).
        cli: Expose as a command-line flag.
        web: How the web form shows it: ``"auto"`` (generated), ``"custom"`` (the form defines it) or ``""`` (not shown).
        sweep: Several comma-separated values are accepted and make a sweep: one job per
            combination (:func:`digits_core.sweeps.grid.expand_sweep`).
        search: A search space may range over it (with a numeric or choice kind; see :attr:`searchable`).
        defaults: Returns every option's default value by name (training options: the
            ``TrainingOptions`` dataclass); ``None``: the default is ``None``.
        default_text: What an empty value means, in words (shown in ``--help``, the form and the docs);
            when empty, ``--help`` shows :attr:`default` instead.
        parse: Checks a given value and returns it normalized, raising a
            :class:`~digits_core.errors.DigitsError` or ``ValueError`` that says what is wrong; replaces the
            generic check of :meth:`coerce` for options with rules of their own (a dataset job's ``max_errors``).
        aliases: More flags (``--lr`` for ``--learning-rate``).
        metavar: The value's name in ``--help`` (``None``: argparse's).
        web_prefix: The web field is ``web_prefix + name`` (dataset options: ``job_``: plugin forms own the
            plain names).
        max_length: Longest text the web field accepts (``None``: no limit).
        html: Extra HTML attributes of the web field.
    """

    name: str
    kind: str
    label: str
    help: str
    group: str = ""
    choices: tuple = ()
    minimum: float | None = None
    exclusive_min: bool = False
    maximum: float | None = None
    solvers: tuple | None = None
    policies: tuple | None = None
    cli: bool = True
    web: str = "auto"
    sweep: bool = False
    search: bool = True
    defaults: Callable[[], Mapping[str, Any]] | None = field(default=None, compare=False, repr=False)
    default_text: str = ""
    parse: Callable[[Any], Any] | None = field(default=None, compare=False, repr=False)
    aliases: tuple[str, ...] = ()
    metavar: str | None = None
    web_prefix: str = ""
    max_length: int | None = None
    html: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def flag(self) -> str:
        """The command-line flag (``--no-shuffle`` for a switch that is on by default)."""
        if self.kind == "bool" and self.default is True:
            return f"--no-{self.name.replace('_', '-')}"
        return f"--{self.name.replace('_', '-')}"

    @property
    def web_field(self) -> str:
        """The web form's field name."""
        return self.web_prefix + self.name

    @property
    def default(self) -> Any:
        """The value used when none is given (from :attr:`defaults`)."""
        return None if self.defaults is None else self.defaults()[self.name]

    @property
    def searchable(self) -> bool:
        """A search space may range over it (``digits tune --search``): numbers, switches and choices that
        are not hardware settings or declared ``search=False`` (the run's length and book-keeping)."""
        return self.kind in ("int", "float", "choice", "bool") and self.group != "Hardware" and self.search

    def coerce(self, value: Any) -> Any:
        """``value`` as this option's kind, checked against its bounds: the one type check of every door.

        An option with :attr:`parse` is checked by it. Otherwise ``bool`` takes
        true/false, 0/1 and their strings (``"false"``, ``"no"``, ``"off"``...);
        ``int`` and ``float`` take numbers and numeric strings (not booleans)
        within ``minimum``/``maximum``. Other kinds come back unchanged (choices
        are checked by the list's own validation against the live registries).
        ``None`` is kept where the default is ``None`` (the default applies).

        Raises:
            ValueError: The message for the field (e.g. ``must be <= 0.999``); an option's
                :attr:`parse` may raise a :class:`~digits_core.errors.DigitsError` instead.
        """
        if self.parse is not None:
            return self.parse(value)
        if value is None and (self.default is None or self.kind not in ("bool", "int", "float")):
            return None
        if self.kind == "bool":
            return _as_bool(value)
        if self.kind not in ("int", "float"):
            return value
        number = _as_number(value, integer=self.kind == "int")
        if self.minimum is not None and (number <= self.minimum if self.exclusive_min else number < self.minimum):
            raise ValueError(f"must be {'>' if self.exclusive_min else '>='} {self.minimum:g}")
        if self.maximum is not None and number > self.maximum:
            raise ValueError(f"must be <= {self.maximum:g}")
        return number

    def applies(self, options: Mapping[str, Any]) -> bool:
        """Whether the option means anything with these (resolved) options' solver and LR policy."""
        if self.solvers is not None and options.get("solver") not in self.solvers:
            return False
        return self.policies is None or options.get("lr_policy") in self.policies

    def default_help(self) -> str:
        """What ``--help`` appends: `` (default: <default_text>)`` or `` (default <value>)`` (none for switches)."""
        if self.default_text:
            return f" (default: {self.default_text})"
        default = self.default
        if default is None or default == "" or self.kind == "bool":
            return ""
        return f" (default {default})"

    def description(self) -> str:
        """The web field's description: the help, and what an empty field means when that is declared."""
        if not self.default_text:
            return self.help
        return f"{self.help[0].upper()}{self.help[1:]}; empty: {self.default_text}."


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def _as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError("must be true or false")


def _as_number(value: Any, *, integer: bool) -> int | float:
    what = "an integer" if integer else "a number"
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not {what}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{value!r} is not {what}") from None
    if not math.isfinite(number):
        raise ValueError("must be finite")
    if integer:
        if not number.is_integer():
            raise ValueError(f"{value!r} is not {what}")
        return int(value) if isinstance(value, int) else int(number)
    return number


#: Most values one sweepable option may list, and most jobs one sweep may create (a typo such as a stray comma
#: list should not queue hundreds).
MAX_SWEEP_JOBS = 64
_SWEEP_FORM = "training options"


def out_of_range(spec: OptionSpec, value: float) -> str | None:
    """Why ``value`` is outside the option's declared range (``"must be above 0"``), or ``None`` when it is inside."""
    if not math.isfinite(value):
        return "must be a finite number"
    low, high = spec.minimum, spec.maximum
    if low is not None and (value <= low if spec.exclusive_min else value < low):
        return f"must be {'above' if spec.exclusive_min else 'at least'} {low:g}"
    if high is not None and value > high:
        return f"must be at most {high:g}"
    return None


def parse_values(spec: OptionSpec, raw: Any) -> list[Any]:
    """The values given for a number option that accepts several (a sweep), converted and checked.

    Args:
        spec: The option (``int`` or ``float``; errors are keyed by its name).
        raw: A number, a comma-separated string (``"0.1, 0.01"``), or a list of numbers or
            numeric strings. Repeated values count once; order is kept.

    Returns:
        The values (at least one), as ``int`` or ``float`` as the option declares.

    Raises:
        FormValidationError: Naming the option: an empty item, something that is not a number,
            a value outside the option's declared range, or more than :data:`MAX_SWEEP_JOBS` values.
    """
    name = spec.name
    if isinstance(raw, str):
        items: list[Any] = raw.split(",")
    elif isinstance(raw, (list, tuple)):
        items = list(raw)
    else:
        items = [raw]
    if not items:
        raise FormValidationError({name: ["give at least one value"]}, _SWEEP_FORM)
    if len(items) > MAX_SWEEP_JOBS:  # before any per-value work: a huge list costs one split, nothing more
        raise FormValidationError(
            {name: [f"{len(items)} values; a sweep may create at most {MAX_SWEEP_JOBS} jobs"]}, _SWEEP_FORM
        )
    values: list[Any] = []
    seen: set[Any] = set()
    for item in items:
        text = str(item).strip()
        if text == "" or isinstance(item, bool):
            raise FormValidationError(
                {name: [f'"{str(raw)[:80]}": every comma-separated item must be a number']}, _SWEEP_FORM
            )
        shown = text[:80]  # a number is short: anything longer is cut in messages, never echoed whole
        try:
            number = float(text)
            value: Any = number
            if spec.kind == "int":
                if not number.is_integer():
                    raise ValueError
                value = int(number)
        except (ValueError, OverflowError):
            kind = "a whole number" if spec.kind == "int" else "a number"
            raise FormValidationError({name: [f'"{shown}" is not {kind}']}, _SWEEP_FORM) from None
        problem = out_of_range(spec, value)
        if problem:
            raise FormValidationError({name: [f"{shown}: {problem}"]}, _SWEEP_FORM)
        if value not in seen:
            seen.add(value)
            values.append(value)
    return values


def holds_several(raw: Any) -> bool:
    """True when an option's raw value gives several values (a list not of one item, or a string with a comma)."""
    if isinstance(raw, (list, tuple)):
        return len(raw) != 1
    return isinstance(raw, str) and "," in raw


def check_message(exc: Exception) -> str:
    """The field message of an option check's error (a form error's messages joined, else the error's text)."""
    if isinstance(exc, FormValidationError):
        return "; ".join(m for messages in exc.errors.values() for m in messages)
    return str(exc)


# -- the command line ------------------------------------------------------------------------------


def _plain_type(spec: OptionSpec) -> Callable[[str], Any]:
    return {"int": int, "float": float}.get(spec.kind, str)


def add_arguments(
    parser: Any,
    specs: Iterable[OptionSpec],
    *,
    value_type: Callable[[OptionSpec], Any] | None = None,
    extra_help: Callable[[OptionSpec], str] | None = None,
) -> None:
    """Add one flag per option with ``cli`` to an argparse parser or argument group.

    Args:
        parser: The parser (or group).
        specs: The options.
        value_type: The argparse ``type`` of an option (default: ``int``/``float``/``str`` by kind).
        extra_help: Text added to an option's help (e.g. that it sweeps).
    """
    for spec in specs:
        if not spec.cli:
            continue
        text = (spec.help + (extra_help(spec) if extra_help else "") + spec.default_help()).replace("%", "%%")
        if spec.kind == "bool":
            action = "store_false" if spec.default is True else "store_true"
            parser.add_argument(spec.flag, *spec.aliases, dest=spec.name, action=action, default=None, help=text)
            continue
        kwargs: dict[str, Any] = {
            "dest": spec.name,
            "type": (value_type or _plain_type)(spec),
            "help": text,
            "default": None,
        }
        if spec.metavar:
            kwargs["metavar"] = spec.metavar
        if spec.kind == "choice":
            kwargs["choices"] = spec.choices
        parser.add_argument(spec.flag, *spec.aliases, **kwargs)


def options_from_args(namespace: Any, specs: Iterable[OptionSpec]) -> dict[str, Any]:
    """The options a parsed command line set (flags not given are left out)."""
    return {
        spec.name: getattr(namespace, spec.name)
        for spec in specs
        if spec.cli and getattr(namespace, spec.name, None) is not None
    }


# -- the web form ----------------------------------------------------------------------------------


def select_choices(pairs: Iterable[Any]) -> list:
    """``SelectField`` choices that work on every supported WTForms: ``SelectChoice`` where it exists.

    WTForms 3.3 deprecates ``(value, label)`` tuples (and 3.4 drops them);
    older versions have no ``SelectChoice``. Plugins write
    ``SelectField("Mode", choices=select_choices([("a", "A"), "b"]))``.

    Args:
        pairs: ``(value, label)`` tuples (DIGITS 6's ``(value, label, render_kw)`` too), values that are
            their own label, or ``SelectChoice`` s (kept).
    """
    items = list(pairs)
    try:
        from wtforms import SelectChoice  # WTForms >= 3.3; no WTForms at import time
    except ImportError:
        return [p if isinstance(p, tuple) else (p, p) for p in items]
    choices = []
    for item in items:
        if isinstance(item, SelectChoice):
            choices.append(item)
        elif isinstance(item, tuple):
            value, label, *rest = item
            choices.append(SelectChoice(value, label, render_kw=rest[0]) if rest else SelectChoice(value, label))
        else:
            choices.append(SelectChoice(item, item))
    return choices


def _checked_by(spec: OptionSpec) -> Callable[[Any, Any], None]:
    """A WTForms validator running the option's own check (:attr:`OptionSpec.parse`)."""

    def validate(form: Any, fld: Any) -> None:
        from wtforms import ValidationError  # WTForms loads when a form is validated, not with the specs

        try:
            spec.coerce(fld.data)
        except (ValueError, DigitsError) as exc:
            raise ValidationError(check_message(exc)) from None

    return validate


def wtforms_field(
    spec: OptionSpec, *, choices: list[tuple[str, str]] | None = None, validators: Iterable[Any] = ()
) -> Any:
    """An unbound WTForms field for one option (empty: not set, the default applies).

    Numbers get their bounds, choices their values (or ``choices``), options with a
    :attr:`~OptionSpec.parse` check run it; the field is named by :attr:`~OptionSpec.web_field`
    where it is set on a form.
    """
    from wtforms import FloatField, IntegerField, SelectField, StringField  # a form is being built
    from wtforms.validators import NumberRange, Optional  # likewise

    checks: list[Any] = [Optional(), *validators]
    if spec.parse is not None:
        checks.append(_checked_by(spec))
    elif spec.kind in ("int", "float") and (spec.minimum is not None or spec.maximum is not None):
        checks.append(NumberRange(min=spec.minimum, max=spec.maximum))
    render_kw = dict(spec.html)
    if spec.default_text:
        render_kw["placeholder"] = spec.default_text
    if spec.max_length is not None:
        render_kw["maxlength"] = str(spec.max_length)
    common: dict[str, Any] = {"validators": checks, "description": spec.description(), "render_kw": render_kw or None}
    if spec.kind == "int":
        return IntegerField(spec.label, **common)
    if spec.kind == "float":
        return FloatField(spec.label, **common)
    if spec.kind in ("choice", "bool") and choices is not None:
        return SelectField(spec.label, choices=select_choices(choices), validate_choice=spec.kind == "choice", **common)
    if spec.kind == "choice":
        values = [(c, c) for c in spec.choices]
        return SelectField(
            spec.label, choices=select_choices(([("", "default")] if spec.default is None else []) + values), **common
        )
    return StringField(spec.label, **common)
