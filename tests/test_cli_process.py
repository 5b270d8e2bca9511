"""The ``digits`` process: quiet --help, signals stop commands cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_failed_plugin_warning_is_not_printed_on_help(sample_plugin_paths, digits_cli):
    broken = [sample_plugin_paths["broken"]]
    for args in (["--help"], ["dataset", "create", "--help"], ["--version"]):
        result = digits_cli(*args, pythonpath=broken)
        assert result.returncode == 0 and "failed to load" not in result.stderr, (args, result.stderr)
    listed = digits_cli("dataset", "list", pythonpath=broken)
    assert listed.returncode == 0 and "failed to load and is skipped" in listed.stderr


def test_sigterm_and_sighup_stop_a_command_like_ctrl_c(tmp_path):
    """`timeout`, systemd and Docker send SIGTERM; a closed terminal SIGHUP: the command's clean-up runs."""
    code = (
        "import sys, time\n"
        "from digits_core.cli import _stop_on_signals\n"
        "_stop_on_signals()\n"
        "try:\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(60)\n"
        "except KeyboardInterrupt:\n"
        "    print('cleaned up', flush=True)\n"
        "    sys.exit(130)\n"
    )
    for sig in (signal.SIGTERM, signal.SIGHUP):
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        os.kill(proc.pid, sig)
        assert proc.stdout.read().strip() == "cleaned up" and proc.wait() == 130


def test_a_signal_whose_interrupt_comes_out_as_another_error_still_reads_interrupted():
    """A SIGTERM landing while compiled code calls back into Python comes out as that code's error (CI saw
    TensorFlow's tracing turn it into ``AttributeError``): the command still ends as interrupted, exit 130."""
    code = (
        "import os, signal, sys, time\n"
        "from digits_core import cli\n"
        "def handler(args):\n"
        "    try:\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "        time.sleep(30)\n"
        "    except KeyboardInterrupt:\n"
        "        raise AttributeError(\"'dict' object has no attribute '_type_spec'\") from None\n"
        "cli.build_parser = lambda command: type('P', (), {'parse_args': lambda self, argv: type('A', (), "
        "{'handler': staticmethod(handler), 'command': 'demo-stub', 'verbose': False})()})()\n"
        "sys.exit(cli.main(['demo-stub']))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 130 and result.stderr.strip() == "interrupted", result.stderr
    # Without a signal, the same error is a bug and keeps its traceback.
    unsignalled = code.replace("os.kill(os.getpid(), signal.SIGTERM)", "raise KeyboardInterrupt")
    result = subprocess.run([sys.executable, "-c", unsignalled], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "AttributeError" in result.stderr, result.stderr


def test_only_digits_own_entry_points_end_the_process(monkeypatch):
    """``digits train`` ends its process with ``os._exit``; embedded in ``python -m pytest`` (or any other
    package's ``__main__.py``) a ``main()`` call must never take the host process down with it."""
    from digits_core.cli import _is_process_entry

    for script, own in (
        ("/venv/lib/python3.11/site-packages/pytest/__main__.py", False),
        ("/checkout/digits_core/__main__.py", True),
        ("/venv/bin/digits", True),
        ("/home/me/embed.py", False),
    ):
        monkeypatch.setattr(sys, "argv", [script])
        assert _is_process_entry(None) is own, script
    assert _is_process_entry(["train"]) is False  # arguments given: an embedded call
