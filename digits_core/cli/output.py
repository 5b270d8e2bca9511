"""Small helpers shared by the CLI commands for printing."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator, Sequence
from typing import Any


@contextlib.contextmanager
def plugin_output_to_stderr() -> Iterator[None]:
    """Send what ``print()`` writes to stderr while plugin code runs, so a command's stdout stays its own.

    DIGITS 6 plugins print as they go (bAbI: ``lines are ...``); ``digits infer
    --json`` and ``digits dataset create --json`` print JSON on stdout after
    the block, and nothing else comes before it.
    """
    with contextlib.redirect_stdout(sys.stderr):
        yield


def print_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout."""
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print rows as a plain left-aligned text table."""
    cells = [[("" if c is None else str(c)) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    line = "  ".join(h.upper().ljust(w) for h, w in zip(headers, widths))
    print(line.rstrip())
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def print_unreadable(problems: Sequence[Any]) -> None:
    """After a jobs table: each record that cannot be read (``file`` and ``reason``) and what to do about it."""
    if not problems:
        return
    print(f"\n{len(problems)} job record(s) cannot be read (nothing was changed on disk):")
    for problem in problems:
        print(f"  {problem.file}: {problem.reason}")
    print("Fix or restore each file, or delete its job or sweep folder (`digits model delete ID`, ...).")
