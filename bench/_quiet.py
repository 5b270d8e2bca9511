"""The load guard every bench that prints a ratio or a speed uses: was the machine quiet during the run?

A figure taken while other work shares the cores is not a result: both sides of a ratio slow down, but not
equally (a tracing-heavy side suffers more than a compute-bound one), and absolute figures fall with the
load. :class:`LoadGuard` samples the 1-minute CPU time the *other* processes of the machine used while the bench ran (all CPU time in ``/proc/stat``
less this process's and its finished children's): when they took more than :data:`OTHERS_LIMIT` of the
machine, every ratio and speed it formats is marked ``(loaded ...)``, and with ``--strict`` the bench refuses
to print any and exits with status 3. The load average is sampled too, for the record only: a bench that
keeps both cores of a 2-core machine busy reads 2.1 on its own (TensorFlow's pools have more runnable
threads than cores), so the load average cannot tell the bench's own work from someone else's. Where
``/proc/stat`` is missing, a load average above the core count is the verdict.

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
#: Share of the whole machine (all its cores) that other processes may use during a run that is still quiet.
OTHERS_LIMIT = 0.1


def cpu_seconds() -> tuple[float, float] | None:
    """CPU seconds used so far by every process of the machine, and by this process with its finished children.

    ``None`` where ``/proc/stat`` cannot be read (not Linux).
    """
    try:
        with open("/proc/stat") as stat:
            values = [int(v) for v in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    busy = (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait
    own = os.times()
    return busy, own.user + own.system + own.children_user + own.children_system


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
        cpu: The CPU-time reader (default :func:`cpu_seconds`); tests pass their own.
    """

    def __init__(
        self, strict: bool = False, interval: float = 1.0, cores: int | None = None, read=None, cpu=cpu_seconds
    ) -> None:
        self.strict = strict
        self.interval = interval
        self.cores = cores or core_count()
        self._read = read or (lambda: os.getloadavg()[0])
        self._cpu = cpu
        self._cpu_marks: list[tuple[float, tuple[float, float] | None]] = []
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
        self._cpu_marks = [(time.monotonic(), self._cpu())]
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
            self._cpu_marks.append((time.monotonic(), self._cpu()))
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
    def others_share(self) -> float | None:
        """The share of the machine other processes used during the run (``None``: not measured)."""
        if len(self._cpu_marks) < 2 or self._cpu_marks[0][1] is None or self._cpu_marks[-1][1] is None:
            return None
        (t0, (busy0, own0)), (t1, (busy1, own1)) = self._cpu_marks[0], self._cpu_marks[-1]  # type: ignore[misc]
        wall = max(t1 - t0, 1e-9)
        return max(0.0, (busy1 - busy0) - (own1 - own0)) / (wall * self.cores)

    @property
    def loaded(self) -> bool:
        """Others used more than :data:`OTHERS_LIMIT` of the machine (without ``/proc/stat``: load > cores)."""
        share = self.others_share
        return self.load_max > self.cores if share is None else share > OTHERS_LIMIT

    def note(self) -> str:
        """``"quiet (others used 2 % of 2 cores; load <= 2.1)"`` or ``"loaded (others used 40 % of 2 cores; ...)"``."""
        share = self.others_share
        if share is None:
            if self.loaded:
                return f"loaded (load {self.load_max:.1f} > {self.cores} cores)"
            return f"quiet (load <= {self.load_max:.1f}, {self.cores} cores)"
        verdict = "loaded" if self.loaded else "quiet"
        return f"{verdict} (others used {share:.0%} of {self.cores} cores; load <= {self.load_max:.1f})"

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
            "others_share": None if self.others_share is None else round(self.others_share, 3),
            "loaded": self.loaded,
            "verdict": "loaded" if self.loaded else "quiet",
        }
