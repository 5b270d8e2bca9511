"""A stop signal whose interrupt was lost still keeps an export from being published.

The ``KeyboardInterrupt`` a SIGTERM raises can be swallowed when it lands while TensorFlow's compiled
code calls back into Python (a clean-clone CI run saw ``digits export`` finish and write its archive,
exit 0, after the test had signalled it mid-build). The command line notes every stop signal in
:mod:`digits_core.faults`; the export asks before it publishes its build and before it publishes the
archive. Real files, no TensorFlow.
"""

from __future__ import annotations

import os
import signal

import pytest

from digits_core import faults
from digits_core.inference.export import _build_cached, _write_archive


@pytest.fixture
def stop_noted():
    faults.clear_stop_signals()
    yield lambda: faults.note_stop_signal(signal.SIGTERM)
    faults.clear_stop_signals()


def _build(staged):
    staged.mkdir(parents=True)
    (staged / "saved_model.pb").write_bytes(b"\0" * 1024)
    return staged


def test_a_noted_stop_publishes_neither_the_build_nor_the_archive(tmp_path, stop_noted):
    cached = tmp_path / "export" / "m-epoch-1-savedmodel"
    stop_noted()
    with pytest.raises(KeyboardInterrupt):
        _build_cached(cached, "m-epoch-1", _build, allow_mismatch=True)
    assert not cached.exists() and os.listdir(cached.parent) == []  # no staging folder left either

    faults.clear_stop_signals()
    _build_cached(cached, "m-epoch-1", _build, allow_mismatch=True)  # without a stop: published
    assert (cached / "saved_model.pb").is_file()
    out = tmp_path / "model.tar.gz"
    stop_noted()
    with pytest.raises(KeyboardInterrupt):
        _write_archive(cached, "m-epoch-1", out)
    assert sorted(os.listdir(tmp_path)) == ["export"]  # no archive, no temporary one

    faults.clear_stop_signals()
    assert _write_archive(cached, "m-epoch-1", out).is_file()


def test_the_command_lines_signal_handler_notes_the_stop_it_raises(stop_noted):
    from digits_core.cli import _raise_interrupt, stopped_by_signal

    assert not faults.stop_requested() and not stopped_by_signal()
    with pytest.raises(KeyboardInterrupt):
        _raise_interrupt(signal.SIGTERM, None)
    assert faults.stop_requested() and stopped_by_signal()
