"""Reading the files of a jobs folder as possibly hostile input: bounded, strict, never fatal to the caller.

Every record the job store reads (``job.json``, ``model.json``,
``dataset.json``, ``sweep.json``, the lines of ``metrics.jsonl``) goes
through :func:`read_json_record` or :func:`parse_json_line`. Whatever is
wrong with a file — bytes that are not UTF-8, JSON that does not parse,
``NaN``/``Infinity`` or a number too large for a float (``1e999``), nesting
deeper than :data:`MAX_RECORD_DEPTH`, more bytes than
:data:`MAX_RECORD_BYTES`, a file that is empty or cut short — comes back as
one exception, :class:`UnreadableRecordError`, that names the file and says
why in words (never the file's content). Listings report such a job as
"unreadable" instead of failing or hiding it; nothing here ever writes, so
a file that could not be parsed is never rewritten.

The limits are read from the environment once per call, so an operator can
raise them without a code change:

* ``DIGITS_MAX_RECORD_BYTES``: bytes one record file may have (default 16 MiB);
  the file is read up to that many bytes plus one, never whole.
* ``DIGITS_MAX_RECORD_DEPTH``: nesting of objects and lists (default 64).
* ``DIGITS_MAX_METRIC_LINE_BYTES``: bytes one ``metrics.jsonl`` line may have (default 64 KiB).
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

from ..errors import JobNotFoundError

#: Default bytes one record file may have (``DIGITS_MAX_RECORD_BYTES``).
MAX_RECORD_BYTES = 16 * 1024 * 1024
#: Default nesting depth of a record (``DIGITS_MAX_RECORD_DEPTH``); the job store writes 6 at most.
MAX_RECORD_DEPTH = 64
#: Default bytes of one ``metrics.jsonl`` line (``DIGITS_MAX_METRIC_LINE_BYTES``); a point is ~100.
MAX_METRIC_LINE_BYTES = 64 * 1024

#: What the page of an unreadable job tells its owner to do.
FIX_HINT = (
    "Restore the file from a backup or fix it by hand (it must be UTF-8 JSON written by DIGITS Core), "
    "or delete the job; nothing was changed on disk."
)


class UnreadableRecordError(JobNotFoundError):
    """A job file cannot be read as the record it should be; the message names the file and the reason.

    A :class:`~digits_core.errors.JobNotFoundError`, so code that skips a
    missing job also survives a damaged one; listings report it instead.

    Attributes:
        file: The file that could not be read.
        reason: Why, in words, without the file's content.
    """

    def __init__(self, file: str | os.PathLike, reason: str, *, hint: str = FIX_HINT):
        self.file = Path(file)
        self.reason = reason
        self.hint = hint
        super().__init__(f"{self.file} cannot be read: {reason}. {hint}")


def _env_limit(name: str, default: int) -> int:
    try:
        value = int(os.environ.get(name, "") or default)
    except ValueError:
        return default
    return value if value > 0 else default


def max_record_bytes() -> int:
    """Bytes one record file may have (``DIGITS_MAX_RECORD_BYTES``, default :data:`MAX_RECORD_BYTES`)."""
    return _env_limit("DIGITS_MAX_RECORD_BYTES", MAX_RECORD_BYTES)


def max_record_depth() -> int:
    """Nesting one record may have (``DIGITS_MAX_RECORD_DEPTH``, default :data:`MAX_RECORD_DEPTH`)."""
    return _env_limit("DIGITS_MAX_RECORD_DEPTH", MAX_RECORD_DEPTH)


def max_metric_line_bytes() -> int:
    """Bytes one ``metrics.jsonl`` line may have (``DIGITS_MAX_METRIC_LINE_BYTES``)."""
    return _env_limit("DIGITS_MAX_METRIC_LINE_BYTES", MAX_METRIC_LINE_BYTES)


class _Problem(ValueError):
    """A reason found while parsing (turned into :class:`UnreadableRecordError` with the file)."""


def _reject_constant(name: str) -> Any:
    raise _Problem(f"it holds {name}, which is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Problem("it holds a number too large for a float (such as 1e999)")
    return value


def nested_deeper_than(value: Any, limit: int) -> bool:
    """True when ``value`` nests objects/lists deeper than ``limit`` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def parse_json_bytes(raw: bytes, *, depth: int | None = None) -> Any:
    """Parse UTF-8 JSON strictly: finite numbers only, nesting bounded.

    Args:
        raw: The bytes.
        depth: The nesting limit (default :func:`max_record_depth`).

    Returns:
        The parsed value.

    Raises:
        ValueError: Why the bytes are not such JSON, in words without their content.
    """
    limit = max_record_depth() if depth is None else depth
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"it is not UTF-8 text (an invalid byte at offset {exc.start})") from None
    if not text.strip():
        raise ValueError("it is empty")
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except _Problem as exc:
        raise ValueError(str(exc)) from None
    except RecursionError:
        raise ValueError(f"it nests objects or lists deeper than {limit} levels") from None
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"it is not valid JSON, or was cut short ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except ValueError:  # e.g. an integer of more than 4,300 digits
        raise ValueError("it holds a number with too many digits") from None
    if nested_deeper_than(value, limit):
        raise ValueError(f"it nests objects or lists deeper than {limit} levels")
    return value


def read_json_record(path: str | os.PathLike, *, max_bytes: int | None = None) -> Any:
    """Read and parse one record file without trusting it (see the module docstring).

    Args:
        path: The file.
        max_bytes: The size limit (default :func:`max_record_bytes`); at most that many bytes plus one are read.

    Returns:
        The parsed JSON value (the caller checks its shape).

    Raises:
        FileNotFoundError: The file does not exist.
        UnreadableRecordError: Anything else is wrong (permissions, size, bytes, syntax, numbers, nesting).
    """
    path = Path(path)
    limit = max_record_bytes() if max_bytes is None else max_bytes
    try:  # non-blocking: a FIFO put there must not hang the reader
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UnreadableRecordError(path, f"it cannot be opened ({exc.strerror or type(exc).__name__})") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnreadableRecordError(path, "it is not a regular file")
        try:
            raw = handle.read(limit + 1)
        except OSError as exc:
            raise UnreadableRecordError(path, f"it cannot be read ({exc.strerror or type(exc).__name__})") from None
    if len(raw) > limit:
        raise UnreadableRecordError(
            path, f"it is larger than {limit:,} bytes, the limit for a job record (DIGITS_MAX_RECORD_BYTES)"
        )
    try:
        return parse_json_bytes(raw)
    except ValueError as exc:
        raise UnreadableRecordError(path, str(exc)) from None


def read_json_object(path: str | os.PathLike, *, max_bytes: int | None = None) -> dict[str, Any]:
    """:func:`read_json_record` for a file that must hold a JSON object.

    Raises:
        FileNotFoundError: The file does not exist.
        UnreadableRecordError: The file is unreadable or holds something other than an object.
    """
    value = read_json_record(path, max_bytes=max_bytes)
    if not isinstance(value, dict):
        raise UnreadableRecordError(path, f"it holds a JSON {_json_kind(value)}, not an object")
    return value


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return "number"


def parse_json_line(line: bytes | str) -> dict[str, Any] | None:
    """One ``metrics.jsonl`` line as an object, or ``None`` when it is not one (then the caller counts it).

    Oversized lines (:func:`max_metric_line_bytes`), bytes that are not UTF-8,
    JSON that does not parse, non-finite numbers, deep nesting and values
    other than objects all give ``None``.
    """
    raw = line.encode("utf-8", "surrogateescape") if isinstance(line, str) else line
    if len(raw) > max_metric_line_bytes() or not raw.strip():
        return None
    try:
        value = parse_json_bytes(raw, depth=8)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


__all__ = [
    "FIX_HINT",
    "MAX_METRIC_LINE_BYTES",
    "MAX_RECORD_BYTES",
    "MAX_RECORD_DEPTH",
    "UnreadableRecordError",
    "max_metric_line_bytes",
    "max_record_bytes",
    "max_record_depth",
    "nested_deeper_than",
    "parse_json_bytes",
    "parse_json_line",
    "read_json_object",
    "read_json_record",
]
