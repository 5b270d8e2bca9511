"""scripts/demo.py options: the jobs folder follows $DIGITS_JOBS_DIR, the port $DIGITS_DEMO_PORT."""

from __future__ import annotations

import runpy
from pathlib import Path

DEMO = Path(__file__).resolve().parent.parent / "scripts" / "demo.py"


def _parse(argv, monkeypatch, **env):
    for key in ("DIGITS_JOBS_DIR", "DIGITS_DEMO_PORT"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return runpy.run_path(str(DEMO), run_name="demo_options_test")["parse_args"](argv)


def test_jobs_dir_and_port_defaults_follow_the_environment(monkeypatch, tmp_path):
    args = _parse([], monkeypatch)
    assert args.jobs_dir.endswith("demo-data/jobs") and args.port == 5000 and args.host == "127.0.0.1"
    args = _parse([], monkeypatch, DIGITS_JOBS_DIR=str(tmp_path), DIGITS_DEMO_PORT="8123")
    assert args.jobs_dir == str(tmp_path) and args.port == 8123
    args = _parse(["--jobs-dir", "elsewhere", "--port", "9"], monkeypatch, DIGITS_JOBS_DIR=str(tmp_path))
    assert args.jobs_dir == "elsewhere" and args.port == 9
