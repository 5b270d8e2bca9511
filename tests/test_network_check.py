"""``digits plugin new network`` and ``digits plugin check`` on network plugins (issue 41).

The generated package's network passes the contract in process (and through the CLI); hand-made
networks that lie about themselves fail the checks that name the lie: a ``min_size`` they cannot build
at, no ``min_size`` while needing one, unknown tasks and option names, a weights table without hashes,
an output that is not the task's.
"""

from __future__ import annotations

import json
import sys

import pytest
import tomllib

from digits_core import hookimpl, registry
from digits_core.cli import main
from digits_core.scaffold import create_plugin


class _Networks:
    def __init__(self, networks):
        self.networks = networks

    @hookimpl
    def digits_register_networks(self):
        return self.networks


@pytest.fixture
def register():
    added = []

    def add(plugin):
        added.append(registry.register(plugin))
        return plugin

    yield add
    for plugin in added:
        registry.unregister(plugin)


def _pooled(min_input=0, activation="softmax", extra_pool=False):
    def build_model(input_shape, num_outputs, task="classification", **params):
        import keras

        inputs = keras.Input(input_shape)
        x = keras.layers.Conv2D(4, 3)(inputs)  # valid padding: needs 3x3
        if extra_pool:
            x = keras.layers.Conv2D(4, min_input - 2)(x)  # fails below min_input
        x = keras.layers.GlobalAveragePooling2D()(x)
        return keras.Model(inputs, keras.layers.Dense(num_outputs, activation=activation)(x))

    build_model.tasks = ("classification",)
    return build_model


def test_cli_generates_a_network_plugin_package(tmp_path, capsys):
    assert main(["plugin", "new", "network", "probe-net", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    folder = tmp_path / "digits-network-probe-net"
    files = {p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*") if p.is_file()}
    for rel in (
        "pyproject.toml",
        "README.md",
        "digits_network_probe_net/hooks.py",
        "digits_network_probe_net/network.py",
    ):
        assert rel in files and f"  {rel}" in out, rel
    assert "digits plugin check network:probe_net" in out
    for rel, text in files.items():
        assert "@@" not in text and "@@" not in rel, rel
        if rel.endswith(".py"):
            compile(text, rel, "exec")
    project = tomllib.loads(files["pyproject.toml"])
    assert project["project"]["entry-points"]["digits.plugins.hooks"] == {"probe-net": "digits_network_probe_net.hooks"}
    assert '{"probe_net": build_model}' in files["digits_network_probe_net/hooks.py"]


def _by_name(report):
    return {c.name: c for c in report.checks}


@pytest.mark.slow
def test_generated_network_plugin_passes_the_check(tmp_path, monkeypatch, register, capsys):
    from digits_core.engine.network_check import check_network

    folder = create_plugin("network", "probe-net", tmp_path)
    monkeypatch.syspath_prepend(str(folder))
    import digits_network_probe_net.hooks as hooks

    register(hooks)
    report = check_network("probe_net")
    assert report.ok, str(report)
    names = [c.name for c in report.checks]
    assert "builds for segmentation at 32x32x3" in names and "builds at its declared minimum 8x8" in names
    assert _by_name(report)["resizes a smaller input with input_size"].status == "ok"
    assert main(["plugin", "check", "network:probe_net", "--json", "--task", "regression"]) == 0
    (printed,) = json.loads(capsys.readouterr().out)
    assert printed["kind"] == "network" and printed["ok"]
    sys.modules.pop("digits_network_probe_net.hooks", None)


@pytest.mark.slow
def test_networks_that_misdeclare_themselves_fail_naming_it(register, capsys):
    from digits_core.engine.network_check import check_network

    liar = _pooled(min_input=24, extra_pool=True)
    liar.min_size = 16  # builds only from 24x24
    undeclared = _pooled(min_input=24, extra_pool=True)  # no min_size at all
    confused = _pooled(activation=None)
    confused.tasks = ("classification", "colouring")
    confused.defaults = {"solver": "adam", "learnig_rate": 0.1}
    confused.weights = {"imagenet": {"file": "w.h5"}}
    wrong_output = _pooled()
    wrong_output.tasks = ("segmentation",)
    register(_Networks({"liar": liar, "undeclared": undeclared, "confused": confused, "wrong_output": wrong_output}))

    report = _by_name(check_network("liar"))
    assert report["builds at its declared minimum 16x16"].status == "failed"
    assert report["builds for classification at 32x32x3"].status == "ok"
    report = _by_name(check_network("undeclared"))
    assert report["builds at 8x8 (no min_size declared)"].status == "failed"
    assert "build_model.min_size" in report["builds at 8x8 (no min_size declared)"].message
    report = _by_name(check_network("confused"))
    assert report["tasks"].status == "failed" and "colouring" in report["tasks"].message
    assert report["defaults"].status == "failed" and "learnig_rate" in report["defaults"].message
    assert report["weights table"].status == "failed" and "imagenet" in report["weights table"].message
    report = _by_name(check_network("wrong_output"))
    failed = report["builds for segmentation at 32x32x3"]
    assert failed.status == "failed" and "(32, 32, 3)" in failed.message  # expected per-pixel classes
    assert main(["plugin", "check", "wrong_output"]) == 1  # a name only a network has: no network: needed
    assert "1 check(s) failed" in capsys.readouterr().out
