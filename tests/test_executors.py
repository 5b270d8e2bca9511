"""Choosing an executor, without a cluster: the local one needs no Ray, the Ray one explains what it needs."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from digits_core.errors import ConfigurationError
from digits_core.executors import Scheduler, make_scheduler


def test_the_local_executor_is_the_scheduler_and_imports_neither_ray_nor_tensorflow(tmp_path):
    code = (
        "import sys; import digits_core.scheduler, digits_core.executors, digits_core.cli.serve_cmd; "
        "print(sorted(m for m in ('ray', 'tensorflow') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    sched = make_scheduler("local", tmp_path, max_dataset_jobs=3)
    assert type(sched) is Scheduler and sched.max_dataset_jobs == 3


def test_ray_executor_without_an_address_names_the_flag_and_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("DIGITS_RAY_ADDRESS", raising=False)
    with pytest.raises(ConfigurationError, match=r"--ray-address HOST:PORT or \$DIGITS_RAY_ADDRESS"):
        make_scheduler("ray", tmp_path)


def test_ray_executor_with_nothing_listening_says_so_before_starting_ray(tmp_path, monkeypatch):
    with socket.socket() as s:  # a port that was free a moment ago: nothing answers there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("DIGITS_RAY_ADDRESS", f"127.0.0.1:{port}")
    with pytest.raises(ConfigurationError, match=f"No Ray cluster answers at 127.0.0.1:{port}.*ray start --head"):
        make_scheduler("ray", tmp_path)


def test_unknown_executor_is_refused(tmp_path):
    with pytest.raises(ConfigurationError, match="'spark' is not one of local, ray"):
        make_scheduler("spark", tmp_path)


def test_digits_serve_executor_ray_without_address_exits_with_the_message(tmp_path, monkeypatch, capsys):
    from digits_core.cli import main

    monkeypatch.delenv("DIGITS_RAY_ADDRESS", raising=False)
    assert main(["--jobs-dir", str(tmp_path), "serve", "--executor", "ray"]) != 0
    assert "--executor ray needs the cluster's address" in capsys.readouterr().err


def test_ray_encoding_deals_chunks_to_the_nodes_in_turn_by_their_cpus():
    from digits_core.executors.ray_encode import node_cycle

    class Cluster:  # what ray.nodes() reports
        @staticmethod
        def nodes():
            return [
                {"NodeID": "b", "Alive": True, "Resources": {"CPU": 1.0}},
                {"NodeID": "a", "Alive": True, "Resources": {"CPU": 3.0, "GPU": 1.0}},
                {"NodeID": "dead", "Alive": False, "Resources": {"CPU": 8.0}},
                {"NodeID": "no-cpu", "Alive": True, "Resources": {"memory": 1e9}},
            ]

    assert node_cycle(Cluster) == ["a", "b", "a", "a"]


def test_dataset_create_ray_address_with_no_cluster_fails_before_creating_a_job(tmp_path):
    with socket.socket() as s:  # a port that was free a moment ago: nothing answers there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "x" / "a").mkdir(parents=True)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "digits_core",
            "--jobs-dir",
            str(tmp_path / "jobs"),
            "dataset",
            "create",
            "image-classification",
            "--ray-address",
            f"127.0.0.1:{port}",
            "--folder",
            str(tmp_path / "x"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0 and f"No Ray cluster answers at 127.0.0.1:{port}" in run.stderr
    assert not (tmp_path / "jobs").exists() or not any((tmp_path / "jobs").iterdir())
