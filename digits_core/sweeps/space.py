"""Search spaces for hyper-parameter tuning: per option a grid, a range or choices.

A space is written ``OPTION=EXPR`` (``digits tune --search``, the web form's
Search panel) or given as ``{OPTION: EXPR}`` (``POST /api/sweeps``,
:func:`digits_core.sweeps.tune.tune`), where ``EXPR`` is one of

* ``0.1,0.01`` or a list ``[0.1, 0.01]``: a grid (every value is tried by the
  ``grid`` scheduler; random search picks among them);
* ``choice(32,64,128)``: the same, said explicitly (``choice(sgd,adam)`` for a choice option);
* ``uniform(LOW,HIGH)``: a range, sampled uniformly (whole numbers for an integer option);
* ``loguniform(LOW,HIGH)``: a range, sampled uniformly in log scale (``LOW > 0``).

The option specs (:mod:`digits_core.engine.option_specs`) decide what is
searchable (:attr:`~digits_core.engine.option_specs.OptionSpec.searchable`)
and its bounds; ``network`` is a choice like any other (its values must be
known networks suited to the dataset's task). A bad space raises
:class:`~digits_core.errors.FormValidationError` keyed by the option, with
the reason. No TensorFlow here.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..engine.option_specs import BY_NAME, TRAINING_OPTIONS
from ..errors import FormValidationError
from ..option_spec import out_of_range, parse_values

_FORM = "search space"
#: Most trials one search may make.
MAX_TRIALS = 256
KINDS = ("grid", "choice", "uniform", "loguniform")
_EXPR = re.compile(r"^\s*(?P<kind>[a-z]+)\s*\((?P<args>.*)\)\s*$", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Space:
    """The values one option may take in a search.

    Attributes:
        option: The training option (or ``network``).
        kind: ``grid``, ``choice``, ``uniform`` or ``loguniform``.
        values: The values of a grid or choice (converted to the option's type).
        low, high: The bounds of a range (both included).
    """

    option: str
    kind: str
    values: tuple = ()
    low: float | None = None
    high: float | None = None

    @property
    def discrete(self) -> bool:
        """A grid or choice (its values can be enumerated)."""
        return self.kind in ("grid", "choice")

    def sample(self, rng: random.Random) -> Any:
        """One value drawn from the space."""
        if self.discrete:
            return rng.choice(self.values)
        assert self.low is not None and self.high is not None
        if self.kind == "loguniform":
            value: Any = math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        else:
            value = rng.uniform(self.low, self.high)
        if _kind(self.option) == "int":
            return min(max(int(round(value)), int(math.ceil(self.low))), int(math.floor(self.high)))
        # Rounding to 6 digits (and exp(log(high))) can step past a bound written with more digits.
        return min(max(float(f"{value:.6g}"), self.low), self.high)

    def describe(self) -> str:
        """The space as written on a command line: ``loguniform(0.0001,0.1)``."""
        if self.discrete:
            return f"{self.kind}({','.join(_text(v) for v in self.values)})"
        return f"{self.kind}({self.low:g},{self.high:g})"

    def to_dict(self) -> dict:
        """JSON form (stored with the sweep)."""
        if self.discrete:
            return {"kind": self.kind, "values": list(self.values)}
        return {"kind": self.kind, "low": self.low, "high": self.high}


def _text(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _kind(option: str) -> str:
    if option == "network":
        return "choice"
    return BY_NAME[option].kind


def _refuse(option: str, message: str) -> FormValidationError:
    return FormValidationError({option: [message]}, _FORM)


def parse_search(text: str) -> Space:
    """Parse one ``OPTION=EXPR`` (see the module docstring); the space is checked with :func:`check_space`.

    Raises:
        FormValidationError: Keyed by the option (``search`` when there is no ``=``).
    """
    option, sep, expr = str(text).partition("=")
    if not sep or not option.strip():
        raise FormValidationError(
            {"search": [f'"{text}": write OPTION=EXPR, e.g. learning_rate=loguniform(1e-4,1e-1)']}, _FORM
        )
    return make_space(option.strip(), expr.strip())


def make_space(option: str, expr: Any) -> Space:
    """The :class:`Space` for ``option`` from an expression string, a list (a grid) or a :meth:`Space.to_dict`.

    Raises:
        FormValidationError: Keyed by ``option``: unknown or not searchable, a malformed expression,
            a value or bound outside the option's range, a choice it cannot take.
    """
    _check_option(option)
    if isinstance(expr, Mapping):
        kind = str(expr.get("kind", ""))
        args: list[Any] = (
            list(expr.get("values") or []) if kind in ("grid", "choice") else [expr.get("low"), expr.get("high")]
        )
    elif isinstance(expr, (list, tuple)):
        kind, args = "grid", list(expr)
    else:
        text = str(expr)
        match = _EXPR.match(text)
        if match:
            kind, args = match["kind"].lower(), [a.strip() for a in match["args"].split(",")]
        else:
            kind, args = "grid", [a.strip() for a in text.split(",")]
    if kind not in KINDS:
        raise _refuse(option, f'"{kind}" is not a kind of space: use {", ".join(KINDS)}')
    if kind in ("grid", "choice"):
        return Space(option, kind, _discrete_values(option, args))
    return _range(option, kind, args)


def _check_option(option: str) -> None:
    if option == "network":
        return
    spec = BY_NAME.get(option)
    if spec is None or not spec.searchable:
        names = ", ".join(["network"] + [s.name for s in TRAINING_OPTIONS if s.searchable])
        reason = "unknown training option" if spec is None else "not searchable"
        raise _refuse(option, f"{reason}; a search may range over {names}")


def _discrete_values(option: str, items: list[Any]) -> tuple:
    if not items or any(str(item).strip() == "" for item in items):
        raise _refuse(option, "give at least one value, separated by commas, none empty")
    if option == "network":
        values: list[Any] = [str(item).strip() for item in items]
    else:
        spec = BY_NAME[option]
        if spec.kind in ("int", "float"):
            values = parse_values(spec, list(items))
        elif spec.kind == "bool":
            values = [_bool(option, item) for item in items]
        else:
            values = [str(item).strip().lower() for item in items]
            wrong = [v for v in values if v not in spec.choices]
            if wrong:
                raise _refuse(option, f'"{wrong[0]}" is not a choice of {option}: use {", ".join(spec.choices)}')
    return tuple(dict.fromkeys(values))


def _bool(option: str, item: Any) -> bool:
    text = str(item).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise _refuse(option, f'"{item}" is not true or false')


def _range(option: str, kind: str, args: list[Any]) -> Space:
    spec = BY_NAME.get(option)
    if spec is None or spec.kind not in ("int", "float"):
        raise _refuse(option, f"{kind}(LOW,HIGH) needs a number option; give choice(...) values instead")
    if len(args) != 2:
        raise _refuse(option, f"{kind}(LOW,HIGH) takes two numbers, not {len(args)}")
    try:
        low, high = (float(str(a).strip()) for a in args)
    except ValueError:
        raise _refuse(option, f"{kind}({', '.join(map(str, args))}): the bounds must be numbers") from None
    for value in (low, high):
        problem = out_of_range(spec, value)
        if problem:
            raise _refuse(option, f"{kind}({low:g},{high:g}): {value:g} is outside the option's range ({problem})")
    if not low < high:
        raise _refuse(option, f"{kind}({low:g},{high:g}): LOW must be below HIGH")
    if kind == "loguniform" and low <= 0:
        raise _refuse(option, f"loguniform({low:g},{high:g}): a log scale needs LOW > 0")
    if spec.kind == "int" and math.floor(high) < math.ceil(low):
        raise _refuse(option, f"{kind}({low:g},{high:g}) holds no whole number")
    return Space(option, kind, low=low, high=high)


def parse_spaces(search: Iterable[str] | Mapping[str, Any] | None) -> dict[str, Space]:
    """Every space of a search, by option: from ``OPTION=EXPR`` strings or a ``{option: expr}`` mapping.

    Raises:
        FormValidationError: Every bad space, each keyed by its option; ``search`` when none is given
            or an option is given twice.
    """
    spaces: dict[str, Space] = {}
    errors: dict[str, list[str]] = {}
    items = list(search.items()) if isinstance(search, Mapping) else [(None, text) for text in search or ()]
    for option, expr in items:
        try:
            space = parse_search(expr) if option is None else make_space(str(option), expr)
        except FormValidationError as exc:
            errors.update(exc.errors)
            continue
        if space.option in spaces:
            errors[space.option] = ["given twice: one space per option"]
        spaces[space.option] = space
    if not spaces and not errors:
        errors["search"] = ["give at least one space, e.g. learning_rate=loguniform(1e-4,1e-1)"]
    if errors:
        raise FormValidationError(errors, _FORM)
    return spaces


def check_networks(spaces: Mapping[str, Space], task: str | None) -> None:
    """Refuse network choices that are unknown or, when ``task`` is known, not suited to it.

    Raises:
        FormValidationError: Keyed ``network``.
    """
    space = spaces.get("network")
    if space is None:
        return
    from ..engine.networks import list_networks  # the network registry scans plugins: only when a search names one

    specs = {spec.name.lower(): spec for spec in list_networks()}
    for name in space.values:
        spec = specs.get(str(name).lower())
        if spec is None and not str(name).endswith(".py"):
            raise _refuse("network", f'"{name}" is not a network: use one of {", ".join(sorted(specs))}')
        if spec is not None and task and spec.tasks and task not in spec.tasks:
            fits = sorted(n for n, s in specs.items() if task in (s.tasks or ()))
            raise _refuse(
                "network",
                f'"{name}" cannot train a {task} dataset (it suits {", ".join(spec.tasks)}); '
                f"networks for {task}: {', '.join(fits)}",
            )


def grid_trials(spaces: Mapping[str, Space]) -> list[dict[str, Any]]:
    """Every combination of discrete spaces (the ``grid`` scheduler), first option outermost.

    Raises:
        FormValidationError: A range (it has no grid), or more than :data:`MAX_TRIALS` combinations.
    """
    ranged = [s.option for s in spaces.values() if not s.discrete]
    if ranged:
        raise _refuse(ranged[0], "a range has no grid: use the random or asha scheduler, or list values")
    size = grid_size(spaces) or 0
    if size > MAX_TRIALS:
        raise _refuse(next(iter(spaces)), f"the grid has {size} combinations; at most {MAX_TRIALS}")
    return [dict(zip(spaces, combo)) for combo in itertools.product(*(s.values for s in spaces.values()))]


def grid_size(spaces: Mapping[str, Space]) -> int | None:
    """Combinations of a full grid over ``spaces``, or ``None`` when a space is a range."""
    if not all(s.discrete for s in spaces.values()):
        return None
    return math.prod(len(s.values) for s in spaces.values())


def random_trials(spaces: Mapping[str, Space], trials: int, seed: int | None = None) -> list[dict[str, Any]]:
    """``trials`` points drawn at random from the spaces (the ``random`` and ``asha`` schedulers).

    Raises:
        FormValidationError: Keyed ``trials``: not between 1 and :data:`MAX_TRIALS`.
    """
    if isinstance(trials, bool) or not isinstance(trials, int) or not 1 <= trials <= MAX_TRIALS:
        raise FormValidationError({"trials": [f"a whole number from 1 to {MAX_TRIALS}, not {trials!r}"]}, _FORM)
    rng = random.Random(seed)
    return [{option: space.sample(rng) for option, space in spaces.items()} for _ in range(trials)]
