"""Reading regression targets: a CSV or JSON-lines file of ``path`` + numbers per image.

CSV: a header row ``path,<target 1>,...,<target N>`` names the targets,
then one row per image (the path is relative to the image folder, or
absolute). JSON lines: one object per line, ``{"path": ..., "<target>": number, ...}``
(the first object's key order names the targets) or
``{"path": ..., "targets": [numbers]}`` (targets named ``t1..tN``).
Blank lines and CSV lines starting with ``#`` are skipped. The format comes
from the extension (``.jsonl``/``.json``/``.ndjson`` → JSON lines, anything
else CSV).
"""

from __future__ import annotations

import csv
import json
import math
import os

from digits_core.paths import resolve_in_roots

JSON_EXTENSIONS = (".jsonl", ".json", ".ndjson")
#: Most targets one row may hold (a regression network's outputs; a bigger file is refused before its rows are read).
MAX_TARGETS = 1024


def _check_count(count: int, where: str) -> None:
    if count > MAX_TARGETS:
        raise ValueError(f"{where}: {count} targets in one row; at most {MAX_TARGETS} are allowed")


def _number(text, where: str) -> float:
    if isinstance(text, bool):
        raise ValueError(f"{where}: {text} is not a number")
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: {str(text)[:40]!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{where}: targets must be finite numbers, not {value}")
    return value


def _resolve(path, root: str | None, where: str) -> str:
    """A row's image path through the core's path gate (refused outside the server's data roots)."""
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"{where}: empty path")
    return str(resolve_in_roots(path, base=root, where=where))


def _read_csv(path: str, root: str | None) -> tuple[list[str], list[tuple[str, tuple[float, ...]]]]:
    with open(path, newline="", encoding="utf-8-sig") as handle:
        rows = [
            (n, row)
            for n, row in enumerate(csv.reader(handle), 1)
            if row and any(c.strip() for c in row) and not row[0].lstrip().startswith("#")
        ]
    if not rows:
        raise ValueError(f"targets file {path} is empty; it needs a header row path,<target names...>")
    line, header = rows[0]
    header = [c.strip() for c in header]
    if len(header) < 2 or header[0].lower() != "path":
        raise ValueError(
            f"{path}:{line}: the header row must be path,<target 1>,...,<target N> (got {','.join(header)[:80]!r})"
        )
    names = header[1:]
    _check_count(len(names), f"{path}:{line}")
    entries = []
    for line, row in rows[1:]:
        where = f"{path}:{line}"
        if len(row) != len(header):
            raise ValueError(f"{where}: {len(row)} columns, the header has {len(header)}")
        entries.append((_resolve(row[0], root, where), tuple(_number(c.strip(), where) for c in row[1:])))
    return names, entries


def _read_jsonl(path: str, root: str | None) -> tuple[list[str], list[tuple[str, tuple[float, ...]]]]:
    names: list[str] | None = None
    entries = []
    with open(path, encoding="utf-8-sig") as handle:
        for line, text in enumerate(handle, 1):
            if not text.strip():
                continue
            where = f"{path}:{line}"
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}: not valid JSON ({exc.msg})") from None
            if not isinstance(obj, dict) or "path" not in obj:
                raise ValueError(f'{where}: each line must be an object with a "path" key')
            if "targets" in obj:
                values = obj["targets"] if isinstance(obj["targets"], list) else [obj["targets"]]
                keys = [f"t{i + 1}" for i in range(len(values))]
            else:
                keys = [k for k in obj if k != "path"]
                values = [obj[k] for k in keys]
            _check_count(len(values), where)
            if names is None:
                names = keys
            elif keys != names and "targets" not in obj:
                raise ValueError(f"{where}: targets {keys} differ from the first line's {names}")
            if len(values) != len(names):
                raise ValueError(f"{where}: {len(values)} targets, the first line has {len(names)}")
            entries.append((_resolve(obj["path"], root, where), tuple(_number(v, where) for v in values)))
    if not names:
        raise ValueError(f"targets file {path} has no entries")
    return names, entries


def read_targets(path: str, root: str | None = None) -> tuple[list[str], list[tuple[str, tuple[float, ...]]]]:
    """Read a targets file.

    Args:
        path: The CSV or JSON-lines file.
        root: Folder that relative image paths start from (default: the file's folder).

    Returns:
        ``(target names, [(absolute image path, (t1, ..., tN)), ...])`` in file order.

    Raises:
        ValueError: Unreadable file, bad header, a non-numeric value or a
            row of the wrong length (the message names the file and line).
    """
    root = root or os.path.dirname(os.path.abspath(path))
    try:
        if path.lower().endswith(JSON_EXTENSIONS):
            names, entries = _read_jsonl(path, root)
        else:
            names, entries = _read_csv(path, root)
    except OSError as exc:
        raise ValueError(f"cannot read targets file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"targets file {path} is not UTF-8 text (CSV or JSON lines)") from None
    if len(set(names)) != len(names):
        raise ValueError(f"targets file {path}: target names repeat ({', '.join(names)})")
    if not entries:
        raise ValueError(f"targets file {path} lists no images")
    return names, entries
