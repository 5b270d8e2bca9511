"""The ``digits`` command line: a thin layer over the Python API.

Each sub-command lives in its own module of this package, exposing
``register(subparsers)``; the module list is :data:`COMMAND_MODULES`.
Command modules must stay light to import (no TensorFlow at module level):
``digits --help`` imports them all.

A :class:`~digits_core.errors.DigitsError` is printed as ``error: <message>``
without a traceback (``-v`` adds the traceback of its cause, e.g. the
plugin code behind a :class:`~digits_core.errors.PluginCodeError`), and the
command exits with the error's ``exit_code``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from .. import __version__
from ..errors import DigitsError
from ..faults import clear_stop_signals, note_stop_signal, stop_requested
from ..phase_marks import mark

#: Modules (relative to this package) that each add sub-commands.
COMMAND_MODULES = [
    "infer_cmd",
    "evaluate_cmd",
    "label_cmd",
    "export_cmd",
    "plugins_cmd",
    "dataset_cmd",
    "serve_cmd",
    "download_cmd",
    "upload_s3_cmd",
    "plugin_cmd",
    "train_cmd",
    "tune_cmd",
    "zoo_cmd",
    "users_cmd",
    "job_cmd",
]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Return the ``digits`` argument parser with every sub-command.

    Args:
        command: The sub-command about to run, if known: modules after the
            one that adds it are not imported (start-up of e.g. ``digits
            dataset create``); an unknown name gets every sub-command.
    """
    parser = argparse.ArgumentParser(
        prog="digits",
        description="DIGITS Core: build datasets, train and use deep networks from plugins.",
    )
    parser.add_argument("--version", action="version", version=f"digits-core {__version__}")
    parser.add_argument(
        "--jobs-dir",
        metavar="DIR",
        default=None,
        help="jobs folder (default: $DIGITS_JOBS_DIR or ~/.digits/jobs)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log more detail")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{module_name}").register(subparsers)
        if command is not None and command in subparsers.choices:
            break
    return parser


def _command_of(argv: list[str]) -> str | None:
    """The sub-command named in ``argv`` (the first word that is no global option or its value), or None."""
    words = iter(argv)
    for word in words:
        if word == "--jobs-dir":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


class _HeldWarnings(logging.Handler):
    """Holds the plugin registry's log records while the parser is built (it loads the plugins)."""

    def __init__(self):
        super().__init__()
        self.records: list[logging.LogRecord] = []
        from ..plugins.registry import logger

        self.logger = logger
        self.logger.addHandler(self)
        self.propagate, self.logger.propagate = self.logger.propagate, False

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def stop(self, *, replay: bool) -> None:
        """Stop holding; with ``replay``, print what was held (plain ``warning:`` lines)."""
        self.logger.removeHandler(self)
        self.logger.propagate = self.propagate
        if replay:
            for record in self.records:
                print(f"warning: {record.getMessage()}", file=sys.stderr)
            self.records = []

    def replay(self) -> None:
        """Log the held records again, now that logging is configured."""
        for record in self.records:
            self.logger.handle(record)
        self.records = []


#: Commands that always load TensorFlow; its C++ start-up log lines are filtered unless ``-v``.
TENSORFLOW_COMMANDS = {"train", "infer", "export"}


def _start_tensorflow(verbose: bool) -> None:
    import os

    if verbose:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0")
        return
    from ..tf_quiet import quiet_tensorflow_startup

    quiet_tensorflow_startup(lean=True)  # a digits process: none of the optional packages TF would load


def _raise_interrupt(signum, _frame):
    note_stop_signal(signum)  # kept even when the KeyboardInterrupt below is lost in compiled code
    raise KeyboardInterrupt


def stopped_by_signal() -> bool:
    """Whether a stop signal (Ctrl-C, SIGTERM, SIGHUP) has reached this command.

    The ``KeyboardInterrupt`` the signal raises can be replaced by another error
    on its way out: a signal that lands while a compiled extension (TensorFlow
    tracing a function, for one) is calling back into Python comes out as that
    extension's ``SystemError`` or ``AttributeError``. The command was still
    stopped by the user, and says so.
    """
    return stop_requested()


def _stop_on_signals() -> None:
    """SIGINT, SIGTERM and SIGHUP stop a command like Ctrl-C does (``timeout``, systemd, Docker, a closed terminal).

    Each command's own clean-up then runs: a training aborts at its next step
    (its job ends Aborted, last snapshot kept), the server stops its workers.
    SIGINT is set explicitly too: Python leaves it ignored when the parent
    started the process with it ignored (a job started with ``&`` by a
    non-interactive shell, some CI runners), and Ctrl-C must still stop it.
    """
    import signal

    clear_stop_signals()  # a new command (main() may run several in one process)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, _raise_interrupt)
        except (ValueError, OSError):  # not the main thread (embedded use)
            pass


_argv: list[str] = []


def current_argv() -> list[str]:
    """The arguments :func:`main` is running (a command's options may depend on them, e.g. ``infer --model``)."""
    return list(_argv)


#: Commands that end their process with ``os._exit`` once their work is done and written (see :func:`_end_process`).
FAST_EXIT_COMMANDS = {"train"}


def _is_process_entry(argv: list[str] | None) -> bool:
    """Whether :func:`main` runs as the process's own command (the ``digits`` script or ``python -m digits_core``)."""
    import os

    script = sys.argv[0]
    if os.path.basename(script) == "__main__.py":  # python -m digits_core, not another package's (python -m pytest)
        return argv is None and os.path.basename(os.path.dirname(os.path.abspath(script))) == "digits_core"
    return argv is None and os.path.basename(script) in ("digits", "-m")


def _end_process(code: int) -> None:
    """End the process now: atexit handlers run and output is flushed, interpreter finalization is skipped.

    After a training, finalizing the interpreter (TensorFlow's thread pools,
    graphs and thousands of modules torn down one by one) takes longer than
    the job's snapshots: about as long as a validation pass on a 2-core
    machine, for nothing — every job file is closed and published by then.
    """
    import atexit
    import os

    atexit._run_exitfuncs()  # plugins' and logging's handlers, as a normal exit runs them
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    """Run the ``digits`` command and return its exit status."""
    process_entry = _is_process_entry(argv)
    argv = sys.argv[1:] if argv is None else list(argv)
    _argv[:] = argv
    # Plugin-load warnings wait until we know this is not --help/--version (help text only, no noise).
    asks_help = any(arg in ("-h", "--help") for arg in argv)
    held = _HeldWarnings()
    try:
        parser = build_parser(_command_of(argv))
        args = parser.parse_args(argv)
    except SystemExit as exc:
        held.stop(replay=exc.code not in (0, None) and not asks_help)  # a usage error may come from a failed plugin
        raise
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s: %(message)s",
    )
    if not asks_help:  # some commands print their own help later (`dataset create PLUGIN --help`)
        held.stop(replay=False)
        held.replay()
    if not getattr(args, "handler", None):
        parser.print_help()
        return 0
    _stop_on_signals()
    mark("imports")  # the command modules, argument parsing
    try:
        if args.command in TENSORFLOW_COMMANDS:
            if args.command == "train":
                from .zoo_cmd import check_train_weights  # a missing weights file fails before TensorFlow starts

                check_train_weights(args)
            _start_tensorflow(args.verbose)
            mark("tensorflow import")
        code = int(args.handler(args) or 0)
        mark("report")
        if process_entry and args.command in FAST_EXIT_COMMANDS:
            _end_process(code)
        return code
    except DigitsError as exc:
        if args.verbose and exc.__cause__ is not None:
            import traceback

            traceback.print_exception(exc.__cause__, file=sys.stderr)
        if stopped_by_signal():
            return _interrupted()
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return _interrupted()
    except Exception:
        if stopped_by_signal():  # the KeyboardInterrupt, replaced on its way out of compiled code
            return _interrupted()
        raise


def _interrupted() -> int:
    print("interrupted", file=sys.stderr)
    return 130
