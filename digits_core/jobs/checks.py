"""Checks of what a job file holds and what a user names a job: declared types, times, name length.

:func:`check_record_types` holds a parsed record (``job.json``, ``model.json``,
``dataset.json``, ``sweep.json``) against its :class:`~typing.TypedDict` in
:mod:`digits_core.jobs.record`: each declared key's value must have the
declared type at the top level (and the keys of nested TypedDicts), ``null``
passes for any key, numbers stay within ±1e300. :func:`check_job_name` is the
one limit on a job's name that every door meets.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import FormValidationError
from .readers import UnreadableRecordError

#: Characters a job's name may have (every door: web form, JSON API, CLI, Python API; :func:`check_job_name`).
MAX_JOB_NAME_LENGTH = 200

#: Unix times a record may hold (``created``, status times): 1970 up to the end of year 9999.
MAX_TIMESTAMP = 253402300799.0


def is_unix_time(value: Any) -> bool:
    """True for a number of seconds since 1970 up to the end of year 9999 (what a record's times must be)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= MAX_TIMESTAMP


def _type_problem(value: Any, hint: Any) -> str | None:
    """Why ``value`` does not have the declared type ``hint`` (top level, and TypedDict keys), else ``None``."""
    if hint is Any:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if any(_type_problem(value, option) is None for option in options):
            return None
        return "has the wrong type"
    if hint is type(None):
        return None if value is None else "has the wrong type"
    target = origin or hint
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return "must be a JSON object"
        return _typed_dict_problem(value, hint)
    if target is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif target is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif target in (dict, list, str, bool):
        ok = isinstance(value, target)
    else:
        return None
    if not ok:
        return {dict: "must be a JSON object", list: "must be a list", str: "must be text"}.get(
            target, f"must be a {target.__name__}"
        )
    if target is float and not -1e300 <= value <= 1e300:
        return "is out of range"
    if target is list and origin is list and typing.get_args(hint):
        item_hint = typing.get_args(hint)[0]
        if typing.is_typeddict(item_hint) and any(_type_problem(item, item_hint) for item in value):
            return f"must be a list of {item_hint.__name__} objects"
    return None


@functools.cache
def _hints(record_type: Any) -> dict[str, Any]:
    return typing.get_type_hints(record_type)


def _typed_dict_problem(data: Mapping[str, object], record_type: Any) -> str | None:
    hints = _hints(record_type)
    for key, hint in hints.items():
        if key in data and data[key] is not None:
            problem = _type_problem(data[key], hint)
            if problem:
                return f'"{key}" {problem}'
    return None


def check_record_types(
    data: Mapping[str, object], record_type: Any, path: str | Path, error: type[UnreadableRecordError]
) -> None:
    """Check the declared keys of a parsed record against its TypedDict (``None`` passes for any key).

    Raises:
        UnreadableRecordError: ``error``, naming the file and the first key of the wrong type.
    """
    problem = _typed_dict_problem(data, record_type)
    if problem:
        raise error(path, problem)


def check_job_name(name: Any, field: str = "name", *, what: str = "new job") -> str:
    """Check a job's name as a user gave it (at most :data:`MAX_JOB_NAME_LENGTH` characters, text).

    :meth:`Job.create <digits_core.jobs.Job.create>` and :meth:`Job.rename <digits_core.jobs.Job.rename>`
    call it, so every door that makes a job meets the same limit; doors call it earlier to name
    their own field.

    Args:
        name: The name.
        field: The form field, JSON key or flag named in the error.
        what: What is being made, for the message.

    Returns:
        ``name`` unchanged.

    Raises:
        FormValidationError: Naming ``field``: not text, too long, or with control characters.
    """
    if name is None:
        return ""
    if not isinstance(name, str):
        raise FormValidationError({field: ["a job name is text"]}, what)
    if len(name) > MAX_JOB_NAME_LENGTH:
        raise FormValidationError({field: [f"at most {MAX_JOB_NAME_LENGTH} characters, not {len(name)}"]}, what)
    if any(ord(ch) < 32 and ch not in "\t" or ord(ch) == 127 for ch in name):
        raise FormValidationError({field: ["a job name cannot contain control characters"]}, what)
    return name


__all__ = ["MAX_JOB_NAME_LENGTH", "MAX_TIMESTAMP", "check_job_name", "check_record_types", "is_unix_time"]
