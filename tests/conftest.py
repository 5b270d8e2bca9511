"""Shared fixtures of the core tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLE_PLUGINS = Path(__file__).resolve().parent / "sample_plugins"

# Helper modules of the suite (``import live_server`` in a test) live next to this file.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from browser_support import chromium  # noqa: E402,F401  (the fixture: one headless Chromium per module)
from live_server import live_server  # noqa: E402,F401  (the fixture: a real `digits serve` subprocess)
from web_client_support import app, client, token  # noqa: E402,F401  (Flask test client; modules may override)


def pip_install_target(source: Path, target: Path) -> Path:
    """Really pip-install the distribution in ``source`` into folder ``target``."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "--target",
            str(target),
            str(source),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return target


@pytest.fixture(scope="session")
def sample_plugin_paths(tmp_path_factory):
    """Folders holding real pip installs of the sample plugin distributions.

    Returns a dict: ``basic``, ``broken`` and ``basic_copy`` (a second
    install of the same distribution, to test de-duplication). Put a folder
    on ``PYTHONPATH`` to make its plugins discoverable.
    """
    root = tmp_path_factory.mktemp("sample-plugins")
    return {
        "basic": pip_install_target(SAMPLE_PLUGINS / "basic", root / "basic"),
        "broken": pip_install_target(SAMPLE_PLUGINS / "broken", root / "broken"),
        "basic_copy": pip_install_target(SAMPLE_PLUGINS / "basic", root / "basic_copy"),
    }


def run_digits(*args: str, pythonpath=(), env=None, check_tf=False, timeout=120):
    """Run the ``digits`` command in a fresh interpreter.

    Args:
        *args: Command-line arguments.
        pythonpath: Extra folders put first on ``PYTHONPATH``.
        env: Extra environment variables.
        check_tf: Also report whether TensorFlow got imported.

    Returns:
        ``subprocess.CompletedProcess``; with ``check_tf`` its ``tf_imported`` attribute is set.
    """
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("DIGITS_")}
    if pythonpath:
        full_env["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), full_env.get("PYTHONPATH", "")])
    full_env.update(env or {})
    code = (
        "import sys\n"
        "from digits_core.cli import main\n"
        "try:\n"
        f"    status = main({list(args)!r})\n"
        "except SystemExit as exc:\n"
        "    status = exc.code or 0\n"
        "heavy = sorted(m for m in ('tensorflow', 'keras', 'pydicom') if m in sys.modules)\n"
        "sys.stderr.write('\\n@@heavy=' + ','.join(heavy) + '\\n')\n"
        "sys.exit(status)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=timeout)
    stderr, marker, heavy = result.stderr.rpartition("@@heavy=")
    if not marker:  # the interpreter died before reporting
        stderr, heavy = result.stderr, ""
    result.stderr = stderr.rstrip("\n")
    result.heavy_modules = [m for m in heavy.strip().split(",") if m]
    return result


def plugins_json(*, pythonpath=(), env=None, all_=True):
    """Return ``digits plugins --json [--all]`` as parsed JSON (asserting success)."""
    args = ["plugins", "--json"] + (["--all"] if all_ else [])
    result = run_digits(*args, pythonpath=pythonpath, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def jobs_dir(tmp_path, monkeypatch):
    """An empty jobs folder, also set as ``DIGITS_JOBS_DIR``."""
    path = tmp_path / "jobs"
    monkeypatch.setenv("DIGITS_JOBS_DIR", str(path))
    return path


@pytest.fixture
def digits_cli():
    """The :func:`run_digits` helper: run ``digits`` in a fresh interpreter."""
    return run_digits


@pytest.fixture
def list_plugins():
    """The :func:`plugins_json` helper: ``digits plugins --json`` as data."""
    return plugins_json


# -- the inner loop stays light ------------------------------------------------------------------

HEAVY_MODULES = ("tensorflow", "keras")


def pytest_runtest_setup(item):
    item.heavy_before = {m for m in HEAVY_MODULES if m in sys.modules}


def pytest_runtest_teardown(item, nextitem):
    """Fail a test not marked ``slow`` that imported TensorFlow (``make test-fast`` must stay fast)."""
    before = getattr(item, "heavy_before", None)
    if before is None or item.get_closest_marker("slow") is not None:
        return
    imported = sorted(m for m in HEAVY_MODULES if m in sys.modules and m not in before)
    if imported:
        pytest.fail(
            f"{item.nodeid} imported {', '.join(imported)} (in the test or a fixture) but is not "
            "marked @pytest.mark.slow; `make test-fast` runs only light tests.",
            pytrace=False,
        )
