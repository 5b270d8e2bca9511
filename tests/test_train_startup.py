"""What `digits train` imports before its first step (issue 44: fixed costs out of small jobs).

Asserted by what is imported, never by time: `digits train --help` loads no TensorFlow or its heavy
optional companions, and the TensorFlow the CLI loads for a training command comes without matplotlib,
pandas, SciPy or scikit-learn (about a fifth of ``import tensorflow``), which stay importable after it.
And the training thread's own fixed cost: the heartbeat file is written at most once a second, however
often a log window closes.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("tensorflow", "keras", "matplotlib", "pandas", "scipy", "sklearn", "pyarrow")


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_train_help_imports_no_tensorflow_nor_its_companions():
    code = (
        "import sys, contextlib, io\nfrom digits_core.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    try:\n        main(['train', '--help'])\n    except SystemExit:\n        pass\n"
        "assert '--network' in out.getvalue()\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = _run(code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_the_cli_loads_a_lean_tensorflow_and_the_packages_stay_importable():
    code = (
        "import sys\nfrom digits_core.cli import _start_tensorflow\n_start_tensorflow(False)\n"
        "import tensorflow as tf, keras\n"
        f"print(sorted(m for m in {HEAVY[2:]!r} if m in sys.modules))\n"
        "import pandas, scipy.sparse, sklearn.base\n"
        "print(float(tf.reduce_sum(tf.ones((2, 2)))))\n"
    )
    done = _run(code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["[]", "4.0"]


def test_the_heartbeat_is_written_at_most_once_a_second(tmp_path, monkeypatch):
    import types

    import digits_core.engine.trainer as trainer

    now = [1000.0]
    monkeypatch.setattr(trainer.time, "time", lambda: now[0])
    state = types.SimpleNamespace(strat=types.SimpleNamespace(is_chief=True), folder=tmp_path)
    beat = trainer._heartbeat(state)  # noqa: SLF001 - the engine's own liveness writer
    for step in range(50):  # a log window every step, 10 ms apart
        now[0] = 1000.0 + step * 0.01
        beat()
    assert (tmp_path / "heartbeat").read_text() == "1000.0"  # every later write would have left its own time
    now[0] = 1001.0
    beat()
    assert (tmp_path / "heartbeat").read_text() == "1001.0"
