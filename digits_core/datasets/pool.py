"""The encoder worker processes of a dataset job, and their lifetime.

:class:`WorkerPool` sends chunks of entries to worker processes and yields
the results in submission order (= record order), keeping a bounded window
of chunks in flight. With one worker, :class:`InlinePool` encodes in the
job's own process behind the same interface.

Workers never outlive the job: each one asks the kernel to kill it when its
parent dies (``PR_SET_PDEATHSIG``, Linux), and a watchdog thread exits it
when the job process is gone (other systems, or a forkserver parent). They
ignore SIGINT (Ctrl-C reaches the whole terminal group; the job process
stops them). When a worker dies (out of memory, a crash in native code, an
``os._exit`` in a plugin), the error names the entry it was encoding.

Worker processes are forked when TensorFlow is not loaded in this process
(cheap, nothing to pickle); otherwise they come from a ``forkserver``
(forking a process that runs TensorFlow threads is unsafe), which pickles
the plugin instance once per worker. A plugin class defined in ``__main__``
(a notebook, the REPL, a script) or inside a function cannot be imported by
such a worker, so it is shipped by value with ``cloudpickle``; without
cloudpickle, :func:`make_pool` encodes in the job's process and says why.
A start method the program chose itself (``multiprocessing.set_start_method("spawn")``,
the default on macOS and Windows) is kept.

Spawn safety: a spawned or forkserver worker normally re-runs the program's
main script (as ``__mp_main__``) before it does anything, so a script without
an ``if __name__ == "__main__":`` guard would build the dataset again inside
every worker, and the worker dies. Workers are started here with the main
module hidden (:func:`main_module_hidden`), as a notebook's are: the script
never runs in them, guard or not.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager

from ..errors import DatasetError
from . import arena as arena_module
from .arena import Arena
from .encoder import ChunkResult, encode_chunk, set_worker_plugin

#: Seconds between two checks of the worker's watchdog that the job process is alive.
WATCHDOG_INTERVAL_S = 0.5
logger = logging.getLogger("digits_core.datasets")
_PR_SET_PDEATHSIG = 1


def mp_context(allow_fork: bool = True):
    """The multiprocessing context for workers: fork unless TensorFlow is loaded here (or ``allow_fork`` is off).

    Args:
        allow_fork: False for callers that start a pool while other threads of theirs may hold locks
            (a forked child inherits them held); forkserver starts each worker from a clean process.
    """
    methods = multiprocessing.get_all_start_methods()
    chosen = multiprocessing.get_start_method(allow_none=True)  # set by the program itself, else None
    if chosen in ("spawn", "forkserver"):
        _forget_phantom_main()
        return multiprocessing.get_context(chosen)
    if allow_fork and "fork" in methods and "tensorflow" not in sys.modules:
        return multiprocessing.get_context("fork")
    _forget_phantom_main()
    if "forkserver" in methods:
        return multiprocessing.get_context("forkserver")
    return multiprocessing.get_context("spawn")


def _forget_phantom_main() -> None:
    """Keep forkserver/spawn workers from re-running ``__main__`` when it is no file.

    ``python - < script.py`` names ``__main__`` ``"<stdin>"``; a new worker
    would try to run that path and die. The interactive REPL and notebooks
    have no ``__main__.__file__`` at all, so dropping a name that is not a
    file makes workers start as they do there (``__main__`` not re-imported).
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is not None and path is not None and getattr(main, "__spec__", None) is None and not os.path.isfile(path):
        del main.__file__


_main_lock = threading.Lock()


@contextmanager
def main_module_hidden() -> Iterator[None]:
    """Start processes in this block without the main script running again in them.

    ``multiprocessing`` tells a spawned (or forkserver) child to import the
    parent's ``__main__`` from its ``__file__`` (or, under ``python -m``, its
    module name); a script without an ``if __name__ == "__main__":`` guard then
    runs its top level again in the child. While the block runs, ``__main__``
    has neither, as in a notebook, so the child starts from the libraries
    alone. A plugin class defined in the script travels by value (cloudpickle),
    so nothing the workers need is lost. Restored on leaving, exceptions included.
    """
    main = sys.modules.get("__main__")
    if main is None or multiprocessing.parent_process() is not None:
        yield
        return
    with _main_lock:
        missing = object()
        saved = {name: main.__dict__.get(name, missing) for name in ("__file__", "__spec__")}
        main.__dict__.pop("__file__", None)
        main.__dict__["__spec__"] = None
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is missing:
                    main.__dict__.pop(name, None)
                else:
                    main.__dict__[name] = value


def pid_alive(pid: int) -> bool:
    """True while process ``pid`` exists (a zombie counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def die_with_parent(job_pid: int) -> None:
    """Make this process exit when the job process ``job_pid`` (or its direct parent) dies.

    ``PR_SET_PDEATHSIG`` makes the kernel send SIGKILL when the direct parent
    exits; a daemon thread covers the rest (no prctl, or a forkserver in
    between) by polling.
    """
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent or not pid_alive(job_pid):  # died before prctl took effect
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(WATCHDOG_INTERVAL_S)
            if os.getppid() != parent or not pid_alive(job_pid):
                os._exit(1)

    threading.Thread(target=watch, name="digits-parent-watchdog", daemon=True).start()


class _ByValue:
    """A plugin pickled by value (its class and code travel with it), for a worker that cannot import its class."""

    def __init__(self, data: bytes):
        self.data = data


def defined_in_place(plugin) -> bool:
    """True when a worker could not import the plugin's class by name (``__main__`` or a function's locals)."""
    cls = type(plugin)
    return cls.__module__ == "__main__" or "<locals>" in cls.__qualname__


def _cloudpickle():
    try:
        import cloudpickle  # optional (installed with Ray); only in-place plugin classes need it
    except ImportError:
        return None
    return cloudpickle


def make_pool(plugin, workers: int, plugin_id: str) -> InlinePool | WorkerPool:
    """The pool for a dataset job: :class:`WorkerPool` for several workers, else :class:`InlinePool`.

    A plugin class defined in place (see :func:`defined_in_place`) reaches
    forkserver/spawn workers by value through cloudpickle; when cloudpickle is
    missing, the job encodes in this process and logs why.
    """
    if (
        workers > 1
        and mp_context().get_start_method() != "fork"
        and defined_in_place(plugin)
        and _cloudpickle() is None
    ):
        logger.warning(
            'Plugin "%s" is defined in __main__ or a function and TensorFlow is loaded, so worker '
            "processes cannot import its class: encoding with 1 worker. Install cloudpickle (or define "
            "the plugin in a module) to use %d workers.",
            plugin_id,
            workers,
        )
        workers = 1
    return InlinePool(plugin) if workers == 1 else WorkerPool(plugin, workers, plugin_id)


def _init_worker(plugin, tracker, next_slot, job_pid: int, arena: tuple | None) -> None:
    """Pool initializer: bind to the job process, keep the plugin, claim a tracking slot."""
    die_with_parent(job_pid)
    sys.stdout = sys.stderr  # a plugin's print() in a worker never lands in the command's stdout (its --json)
    if isinstance(plugin, _ByValue):
        plugin = _cloudpickle().loads(plugin.data)  # type: ignore[union-attr]  # the parent had cloudpickle
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        pass
    with next_slot.get_lock():
        slot = next_slot.value % (len(tracker) // 2)
        next_slot.value += 1
    tracker[2 * slot] = os.getpid()
    tracker[2 * slot + 1] = -1
    set_worker_plugin(plugin, tracker, slot, arena)


#: A chunk to encode: ``(start index in the stage, entries)``.
Chunk = tuple


class InlinePool:
    """Encodes chunks in this process (one worker)."""

    def __init__(self, plugin):
        self.plugin = plugin

    def __enter__(self) -> InlinePool:
        set_worker_plugin(self.plugin)
        return self

    def __exit__(self, *exc) -> None:
        set_worker_plugin(None)

    def imap(self, chunks: Iterable[Chunk], mean_every: int, describe: Callable[[int], str]) -> Iterator:
        """Yield ``(start, ChunkResult)`` for each chunk, in order."""
        for start, entries in chunks:
            yield start, encode_chunk(start, entries, mean_every)

    def release(self, result: ChunkResult) -> None:
        """Nothing to give back: records made in this process are bytes."""


class WorkerPool:
    """``workers`` encoder processes running :func:`~.encoder.encode_chunk`.

    Args:
        plugin: The data plugin instance (inherited by fork, or pickled once per worker).
        workers: Number of processes.
        plugin_id: For error messages.
    """

    def __init__(self, plugin, workers: int, plugin_id: str):
        self.workers = workers
        self.plugin_id = plugin_id
        ctx = mp_context()
        self._tracker = ctx.Array("q", [0, -1] * workers, lock=False)
        # Slots for the chunks in flight plus a few waiting to be written; only a forked worker inherits them.
        self._arena = Arena(self.window + 3, arena_module.SLOT_BYTES) if ctx.get_start_method() == "fork" else None
        if ctx.get_start_method() != "fork" and defined_in_place(plugin):
            pickler = _cloudpickle()
            if pickler is None:
                raise DatasetError(
                    f'Plugin "{plugin_id}" is defined in __main__ or a function, so worker processes '
                    "cannot import its class: install cloudpickle, or use workers=1."
                )
            plugin = _ByValue(pickler.dumps(plugin))
        self._executor = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=ctx,
            initializer=_init_worker,
            initargs=(
                plugin,
                self._tracker,
                ctx.Value("i", 0),
                os.getpid(),
                (self._arena.region, self._arena.slot_bytes) if self._arena else None,
            ),
        )
        self._processes: dict = {}

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self._executor.shutdown(wait=True)
        else:
            self.kill()

    def kill(self) -> None:
        """Stop every worker now (used on errors and interrupts)."""
        procs = list(self._processes.values()) + list((getattr(self._executor, "_processes", None) or {}).values())
        for proc in procs:
            if proc.is_alive():
                proc.kill()
        self._executor.shutdown(wait=True, cancel_futures=True)

    @property
    def window(self) -> int:
        """Chunks in flight at once."""
        return self.workers * 2 + 1

    def release(self, result: ChunkResult) -> None:
        """Free the shared-memory slot of a result whose records are written (call once per result)."""
        if self._arena is not None:
            self._arena.release(result.slot)

    def imap(self, chunks: Iterable[Chunk], mean_every: int, describe: Callable[[int], str]) -> Iterator:
        """Yield ``(start, ChunkResult)`` for each chunk, in submission order.

        ``chunks`` is pulled lazily (one chunk after each result), so it may
        size later chunks from what earlier results held. Records may be
        memoryviews of shared memory: write them, then :meth:`release` the result.

        Raises:
            DatasetError: A worker died; ``describe(index)`` names the entry.
        """
        chunks = iter(chunks)
        window: deque = deque()

        def submit() -> None:
            chunk = next(chunks, None)
            if chunk is not None:
                start, entries = chunk
                slot = self._arena.take() if self._arena is not None else None
                with main_module_hidden():  # a submit may start a worker process
                    future = self._executor.submit(encode_chunk, start, entries, mean_every, slot)
                window.append((start, future))
                self._processes.update(getattr(self._executor, "_processes", None) or {})

        for _ in range(self.window):
            submit()
        while window:
            start, future = window.popleft()
            try:
                result = future.result()
            except BrokenProcessPool as exc:
                raise DatasetError(self._crash_message(describe)) from exc
            if result.slot is not None and self._arena is not None:  # a slot is only ever set with an arena
                result = result.map_records(self._arena.resolve)
            yield start, result
            submit()

    def _crash_message(self, describe: Callable[[int], str]) -> str:
        """Name the entry the dead worker was encoding and how it died."""
        for proc in self._processes.values():
            proc.join(timeout=5)
        dead = [p for p in self._processes.values() if p.exitcode not in (None, 0, -signal.SIGTERM)]
        culprit = dead[0] if dead else None
        how = "out of memory or a crash in native code"
        if culprit is not None:
            code = culprit.exitcode
            how = (
                f"killed by {signal.Signals(-code).name}"
                if code < 0 and -code in signal.valid_signals()
                else f"exit status {code}"
            )
        entry = None
        tracker = self._tracker
        for slot in range(len(tracker) // 2):
            pid, index = tracker[2 * slot], tracker[2 * slot + 1]
            if index >= 0 and (culprit is None or pid == culprit.pid):
                entry = describe(index)
                break
        where = f" while encoding entry {entry}" if entry is not None else ""
        return (
            f'A worker process of plugin "{self.plugin_id}" died{where} ({how}). '
            "Remove or fix that entry, or look for a crash in the plugin's native code."
        )
