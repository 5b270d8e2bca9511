"""The load guard every bench that prints a ratio or a speed uses: was the machine quiet during the run?

A figure taken while other work shares the cores is not a result: both sides of a ratio slow down, but not
equally (a tracing-heavy side suffers more than a compute-bound one), and absolute figures fall with the
load. :class:`LoadGuard` samples the 1-minute load average in a background thread while the bench runs;
when its highest sample (or the value at start, which describes the minute before) exceeded the number of
cores, every ratio and speed it formats is marked ``(loaded ...)``, and with ``--strict`` the bench refuses
to print any and exits with status 3. The bench's own threads count towards the load: on 2 cores a bench
that keeps both busy reads ~2, which is not "loaded"; anything beyond the core count is someone else's work.

Use::

    from _quiet import LoadGuard, add_guard_args

    add_guard_args(parser)  # --strict
    with LoadGuard.from_args(args) as guard:
        ... run the sides ...
    print(guard.mark(f"ratio {ratio:.2f}"))    # "ratio 1.04" or "ratio 1.04 (loaded: load 5.1 > 2 cores)"
    result["load"] = guard.summary()           # into the bench's JSON
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

#: Exit status of a ``--strict`` run refused because the machine was loaded.
LOADED_EXIT = 3


def core_count() -> int:
    """CPU cores this process may run on (its affinity set, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def add_guard_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--strict`` (refuse to print ratios from a loaded run) to a bench's argument parser."""
    parser.add_argument(
        "--strict",
        action="store_true",
        help="refuse to print ratios and speeds when the load average exceeded the core count during the run",
    )


class LoadGuard:
    """Samples the load average while a bench runs (a context manager; see the module docstring).

    Args:
        strict: Refuse (exit :data:`LOADED_EXIT`) instead of marking figures when loaded.
        interval: Seconds between samples.
        cores: The core count to compare with (default: :func:`core_count`).
        read: The load reader (default ``os.getloadavg()[0]``); tests pass their own.
    """

    def __init__(self, strict: bool = False, interval: float = 1.0, cores: int | None = None, read=None) -> None:
        self.strict = strict
        self.interval = interval
        self.cores = cores or core_count()
        self._read = read or (lambda: os.getloadavg()[0])
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started = self.ended = 0.0

    @classmethod
    def from_args(cls, args: argparse.Namespace, **kwargs) -> LoadGuard:
        """A guard for a bench's parsed arguments (``--strict`` from :func:`add_guard_args`)."""
        return cls(strict=bool(getattr(args, "strict", False)), **kwargs)

    def start(self) -> LoadGuard:
        self.started = time.time()
        self.samples.append(self._read())
        self._thread = threading.Thread(target=self._sample, name="bench-load-guard", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling (takes a last sample); idempotent."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self.samples.append(self._read())
            self.ended = time.time()

    def __enter__(self) -> LoadGuard:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self.samples.append(self._read())

    @property
    def load_max(self) -> float:
        return max(self.samples) if self.samples else 0.0

    @property
    def loaded(self) -> bool:
        """The load average exceeded the core count at some sample of the run."""
        return self.load_max > self.cores

    def note(self) -> str:
        """``"quiet (load <= 2.1, 2 cores)"`` or ``"loaded (load 5.1 > 2 cores)"``."""
        if self.loaded:
            return f"loaded (load {self.load_max:.1f} > {self.cores} cores)"
        return f"quiet (load <= {self.load_max:.1f}, {self.cores} cores)"

    def mark(self, text: str) -> str:
        """``text`` as it may be printed: unchanged when quiet, marked when loaded (refused if strict)."""
        if not self.loaded:
            return text
        self.refuse_if_strict()
        return f"{text} ({self.note()})"

    def refuse_if_strict(self) -> None:
        """Exit with :data:`LOADED_EXIT` when loaded and strict (call before printing any figure)."""
        if self.loaded and self.strict:
            print(
                f"refused: the machine was {self.note()} during the run; its ratios are not results. "
                "Run it again on a quiet machine (or without --strict to see figures marked loaded).",
                file=sys.stderr,
                flush=True,
            )
            raise SystemExit(LOADED_EXIT)

    def summary(self) -> dict:
        """For the bench's JSON: cores, highest and mean load, samples, and the verdict."""
        mean = sum(self.samples) / len(self.samples) if self.samples else 0.0
        return {
            "cores": self.cores,
            "load_max": round(self.load_max, 2),
            "load_mean": round(mean, 2),
            "samples": len(self.samples),
            "loaded": self.loaded,
            "verdict": "loaded" if self.loaded else "quiet",
        }
