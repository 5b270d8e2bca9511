"""``digits zoo``: add, list, remove and export weights with their provenance (no TensorFlow here;
publishing a trained model's encoder is tested in test_training.py)."""

from __future__ import annotations

import hashlib
import json

import pytest
from digits_networks_backbones import BACKBONES

from digits_core.cli import main
from digits_core.engine.weights import resolve_weights


@pytest.fixture
def zoo(tmp_path, monkeypatch):
    folder = tmp_path / "zoo"
    monkeypatch.setenv("DIGITS_ZOO", str(folder))
    return folder


def manifest(folder):
    return json.loads((folder / "manifest.json").read_text())["entries"]


def test_add_list_use_export_remove(zoo, tmp_path, capsys):
    weights = tmp_path / "encoder.weights.h5"
    weights.write_bytes(b"lab encoder")
    argv = ["zoo", "add", str(weights), "--name", "lab-v1", "--network", "mobilenet_v3_small", "--channels", "1"]
    assert main([*argv, "--source", "https://lab.example/encoder", "--license", "CC-BY-4.0"]) == 0
    entry = manifest(zoo)["lab-v1"]
    assert entry["file"] == "lab-v1.weights.h5" and (zoo / entry["file"]).read_bytes() == b"lab encoder"
    assert entry["sha256"] == hashlib.sha256(b"lab encoder").hexdigest()
    assert (entry["network"], entry["input_channels"], entry["license"]) == ("mobilenet_v3_small", 1, "CC-BY-4.0")
    assert entry["source"] == "https://lab.example/encoder"
    found = resolve_weights("zoo:lab-v1", "mobilenet_v3_small", BACKBONES["mobilenet_v3_small"].weights_table())
    assert found.path == str(zoo / "lab-v1.weights.h5") and found.channels == 1

    capsys.readouterr()
    assert main(["zoo", "list", "--json"]) == 0
    assert [e["name"] for e in json.loads(capsys.readouterr().out)] == ["lab-v1"]

    assert main(["zoo", "add", str(weights), "--name", "lab-v1"]) != 0  # the name is taken
    assert "already has" in capsys.readouterr().err

    other = tmp_path / "other-lab"
    assert main(["zoo", "export", "lab-v1", str(other)]) == 0
    assert manifest(other)["lab-v1"] == entry and (other / "lab-v1.weights.h5").read_bytes() == b"lab encoder"

    assert main(["zoo", "remove", "lab-v1"]) == 0
    assert manifest(zoo) == {} and not (zoo / "lab-v1.weights.h5").exists()
    assert main(["zoo", "remove", "lab-v1"]) != 0


def test_bad_names_and_missing_files_are_refused(zoo, tmp_path, capsys):
    assert main(["zoo", "add", str(tmp_path / "missing.h5"), "--name", "x"]) != 0
    assert "is not a file" in capsys.readouterr().err
    (tmp_path / "w.h5").write_bytes(b"w")
    assert main(["zoo", "add", str(tmp_path / "w.h5"), "--name", "../escape"]) != 0
    assert "use letters, digits" in capsys.readouterr().err
    assert not (zoo / "manifest.json").exists()
