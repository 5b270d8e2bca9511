"""Weights resolution, offline first (no TensorFlow): Keras's cache, the zoo, a file, a local origin.

The files here are arbitrary bytes: resolution only finds and hashes them (loading a real Keras
application's file is in test_training.py). The origin is a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from digits_networks_backbones import BACKBONES

from digits_core.engine import weights as w
from digits_core.paths import confined_to

MNV3 = BACKBONES["mobilenet_v3_small"]


@pytest.fixture
def homes(tmp_path, monkeypatch):
    """Empty zoo and Keras cache folders, downloads allowed, no operator URL rules."""
    zoo, keras_home = tmp_path / "zoo", tmp_path / "keras"
    monkeypatch.setenv("DIGITS_ZOO", str(zoo))
    monkeypatch.setenv("KERAS_HOME", str(keras_home))
    monkeypatch.delenv("DIGITS_OFFLINE", raising=False)
    monkeypatch.delenv("DIGITS_ALLOW_URL", raising=False)
    return zoo, keras_home / "models"


@pytest.fixture
def origin(tmp_path):
    """A static HTTP server on 127.0.0.1 serving ``tmp_path / "origin"``: yields (folder, base URL)."""
    folder = tmp_path / "origin"
    folder.mkdir()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(folder), **kwargs)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield folder, f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def table(file: str, content: bytes, origin_url: str = "", algorithm: str = "md5") -> dict:
    digest = hashlib.new(algorithm, content).hexdigest()
    return {"imagenet": {"file": file, "hash": digest, "origin": origin_url + file, "license": "test"}}


def test_none_is_random_weights(homes):
    assert w.resolve_weights(None, "x", {}) is None
    assert w.resolve_weights("none", "x", MNV3.weights_table()) is None


def test_file_in_keras_cache_is_used_and_recorded(homes):
    _, cache = homes
    content = b"weights bytes"
    cache.mkdir(parents=True)
    (cache / MNV3.weights_file).write_bytes(content)
    declared = table(MNV3.weights_file, content, "http://127.0.0.1:9/")  # port 9: nothing listens
    found = w.resolve_weights("imagenet", "mobilenet_v3_small", declared)
    assert Path(found.path) == cache / MNV3.weights_file
    assert found.sha256 == hashlib.sha256(content).hexdigest()
    assert found.source == "http://127.0.0.1:9/" + MNV3.weights_file
    assert found.record()["name"] == "imagenet"


def test_zoo_folder_comes_before_keras_cache(homes):
    zoo, cache = homes
    for folder in (zoo, cache):
        folder.mkdir(parents=True)
        (folder / "f.h5").write_bytes(b"same")
    found = w.resolve_weights("IMAGENET", "n", table("f.h5", b"same", algorithm="sha256"))
    assert Path(found.path) == zoo / "f.h5"


def test_offline_without_file_names_file_hash_and_folders(homes, monkeypatch):
    zoo, cache = homes
    monkeypatch.setenv("DIGITS_OFFLINE", "1")
    with pytest.raises(w.WeightsError) as info:
        w.resolve_weights("imagenet", "mobilenet_v3_small", MNV3.weights_table())
    message = str(info.value)
    assert MNV3.weights_file in message and MNV3.weights_hash in message
    assert str(zoo) in message and str(cache) in message and "DIGITS_OFFLINE" in message
    assert not cache.exists()


def test_tampered_file_is_refused_naming_it(homes):
    _, cache = homes
    cache.mkdir(parents=True)
    (cache / "f.h5").write_bytes(b"tampered")
    with pytest.raises(w.WeightsError, match=r"f\.h5 has md5 .* expected"):
        w.resolve_weights("imagenet", "n", table("f.h5", b"original"))


def test_download_from_origin_checks_hash_and_fills_keras_cache(homes, origin):
    _, cache = homes
    folder, base = origin
    (folder / "f.h5").write_bytes(b"published weights")
    found = w.resolve_weights("imagenet", "n", table("f.h5", b"published weights", base))
    assert Path(found.path) == cache / "f.h5" and (cache / "f.h5").read_bytes() == b"published weights"
    assert [p.name for p in cache.iterdir()] == ["f.h5"]  # no temporary file left


def test_download_with_wrong_hash_is_refused_and_not_kept(homes, origin):
    _, cache = homes
    folder, base = origin
    (folder / "f.h5").write_bytes(b"something else")
    with pytest.raises(w.WeightsError, match="download from .*f.h5.*expected"):
        w.resolve_weights("imagenet", "n", table("f.h5", b"published weights", base))
    assert list(cache.iterdir()) == []


def test_failed_download_says_where_to_put_the_file(homes, origin):
    _, base = origin  # the server has no such file: 404
    with pytest.raises(w.WeightsError, match="copy the file into either folder.*download from .* failed"):
        w.resolve_weights("imagenet", "n", table("missing.h5", b"x", base))


def test_server_downloads_only_where_the_operator_allows(homes, origin, tmp_path, monkeypatch):
    folder, base = origin
    (folder / "f.h5").write_bytes(b"published")
    declared = table("f.h5", b"published", base)
    with confined_to([tmp_path]), pytest.raises(w.WeightsError, match="may not download it.*allow-url"):
        w.resolve_weights("imagenet", "n", declared)
    monkeypatch.setenv("DIGITS_ALLOW_URL", "127.0.0.1")
    with confined_to([tmp_path]):
        assert w.resolve_weights("imagenet", "n", declared).sha256


def test_file_path_goes_through_the_data_root_gate(homes, tmp_path):
    outside = tmp_path / "outside.weights.h5"
    outside.write_bytes(b"mine")
    found = w.resolve_weights(str(outside), "n", MNV3.weights_table())
    assert found.source == "file" and found.sha256 == hashlib.sha256(b"mine").hexdigest()
    roots = tmp_path / "data"
    roots.mkdir()
    with confined_to([roots]), pytest.raises(Exception, match="weights"):
        w.resolve_weights(str(outside), "n", MNV3.weights_table())


def test_zoo_entry_checked_against_manifest(homes):
    zoo, _ = homes
    zoo.mkdir(parents=True)
    (zoo / "lab.weights.h5").write_bytes(b"lab weights")
    entry = {
        "file": "lab.weights.h5",
        "sha256": hashlib.sha256(b"lab weights").hexdigest(),
        "network": "mobilenet_v3_small",
        "source": "job 20260101-000000-abcd",
        "license": "CC-BY-4.0",
        "input_channels": 1,
    }
    (zoo / "manifest.json").write_text(json.dumps({"entries": {"lab": entry}}))
    found = w.resolve_weights("zoo:lab", "mobilenet_v3_small", MNV3.weights_table())
    assert found.channels == 1 and found.source == "job 20260101-000000-abcd" and found.license == "CC-BY-4.0"
    with pytest.raises(w.WeightsError, match='network "mobilenet_v3_small", not "resnet50_v2"'):
        w.resolve_weights("zoo:lab", "resnet50_v2", MNV3.weights_table())
    with pytest.raises(w.WeightsError, match="no such entry.*entries: lab"):
        w.resolve_weights("zoo:other", "mobilenet_v3_small", MNV3.weights_table())
    (zoo / "lab.weights.h5").write_bytes(b"changed")
    with pytest.raises(w.WeightsError, match="lab.weights.h5 has sha256"):
        w.resolve_weights("zoo:lab", "mobilenet_v3_small", MNV3.weights_table())


def test_unknown_value_and_network_without_weights(homes):
    with pytest.raises(w.WeightsError, match="not a weights file, nor one of none, imagenet or zoo:NAME"):
        w.resolve_weights("imagenet21k", "mobilenet_v3_small", MNV3.weights_table())
    with pytest.raises(w.WeightsError, match='network "lenet" takes no pretrained weights'):
        w.resolve_weights("imagenet", "lenet", {})


def test_cli_offline_fails_before_tensorflow_and_leaves_no_job(homes, tmp_path, tiny_dataset, digits_jobs_dir):
    """``digits train --weights imagenet`` offline without the file: refused naming the file, its hash and the
    folders to put it in, before TensorFlow loads and before a job folder exists."""
    zoo, cache = homes
    dataset = tiny_dataset()
    before = sorted(p.name for p in Path(digits_jobs_dir).iterdir())
    env = {**os.environ, "DIGITS_OFFLINE": "1", "DIGITS_JOBS_DIR": str(digits_jobs_dir)}
    code = (
        "import sys\n"
        "from digits_core.cli import main\n"
        "try:\n"
        f"    rc = main(['train', '--dataset', '{dataset.id}', '--network', 'mobilenet_v3_small', "
        "'--weights', 'imagenet', '--epochs', '1'])\n"
        "finally:\n"
        "    print('TF-LOADED' if 'tensorflow' in sys.modules else 'TF-NOT-LOADED')\n"
        "sys.exit(rc)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    said = run.stderr + run.stdout
    assert MNV3.weights_file in said and MNV3.weights_hash in said
    assert str(cache) in said and str(zoo) in said and "weights" in said  # where to put the file
    assert "TF-NOT-LOADED" in run.stdout
    assert sorted(p.name for p in Path(digits_jobs_dir).iterdir()) == before
