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

#: Modules (relative to this package) that each add sub-commands.
COMMAND_MODULES = [
    "infer_cmd",
    "export_cmd",
    "plugins_cmd",
    "dataset_cmd",
    "serve_cmd",
    "download_cmd",
    "upload_s3_cmd",
    "plugin_cmd",
    "train_cmd",
]


def build_parser() -> argparse.ArgumentParser:
    """Return the ``digits`` argument parser with every sub-command."""
    parser = argparse.ArgumentParser(
        prog="digits",
        description="DIGITS Core: build datasets, train and use deep networks from plugins.",
    )
    parser.add_argument("--version", action="version", version=f"digits-core {__version__}")
    parser.add_argument(
        "--jobs-dir", metavar="DIR", default=None,
        help="jobs folder (default: $DIGITS_JOBS_DIR or ~/.digits/jobs)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log more detail")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{module_name}").register(subparsers)
    return parser


def _raise_interrupt(_signum, _frame):
    raise KeyboardInterrupt


def _stop_on_signals() -> None:
    """SIGTERM and SIGHUP stop a command like Ctrl-C does (``timeout``, systemd, Docker, a closed terminal).

    Each command's own clean-up then runs: a training aborts at its next step
    (its job ends Aborted, last snapshot kept), the server stops its workers.
    """
    import signal

    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, _raise_interrupt)
        except (ValueError, OSError):  # not the main thread (embedded use)
            pass


def main(argv: list[str] | None = None) -> int:
    """Run the ``digits`` command and return its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s: %(message)s",
    )
    if not getattr(args, "handler", None):
        parser.print_help()
        return 0
    _stop_on_signals()
    try:
        return int(args.handler(args) or 0)
    except DigitsError as exc:
        if args.verbose and exc.__cause__ is not None:
            import traceback

            traceback.print_exception(exc.__cause__, file=sys.stderr)
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
