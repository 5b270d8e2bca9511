"""``digits plugin new data|view NAME``: the generated packages are complete, install, list and work.

Fast tests check names, errors and the generated files in process; the slow
test really pip-installs a generated data plugin and view plugin into this
venv (``--no-deps --no-build-isolation`` under ``/tmp/digits-pip.lock``,
uninstalled afterwards), lists them with ``digits plugins --json``, runs
their own generated tests and builds a dataset with the data plugin
(``workers=2``).
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import jinja2
import numpy as np
import pytest
import tomllib

from digits_core.cli import main
from digits_core.errors import ConfigurationError
from digits_core.scaffold import create_plugin, plugin_names

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PIP_LOCK = "/tmp/digits-pip.lock"


def generated_files(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.mark.parametrize(
    "kind, name, expected",
    [
        ("data", "my-dicom", ("digits-data-my-dicom", "digits_data_my_dicom", "MyDicomIngestion", "My dicom")),
        ("view", "lesion_map", ("digits-view-lesion-map", "digits_view_lesion_map", "LesionMapView", "Lesion map")),
        ("data", "3d-ct", ("digits-data-3d-ct", "digits_data_3d_ct", "Plugin3dCtIngestion", "3d ct")),
    ],
)
def test_names_derive_from_the_plugin_id(kind, name, expected):
    names = plugin_names(kind, name)
    assert (names.distribution, names.package, names.class_name, names.title) == expected
    assert names.plugin_id == name and names.package.isidentifier() and names.class_name.isidentifier()


@pytest.mark.parametrize("name", ["My DICOM", "", "-x", "a/b", "café"])
def test_bad_names_are_rejected_with_a_suggestion(name, tmp_path):
    with pytest.raises(ConfigurationError, match="Invalid plugin name.*try"):
        create_plugin("data", name, tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("title", ['say "hi"', "a {{ b }}", "<script>", "two\nlines", " "])
def test_unsafe_titles_are_rejected(title, tmp_path):
    with pytest.raises(ConfigurationError, match="Invalid title"):
        create_plugin("view", "x", tmp_path, title=title)
    assert not any(tmp_path.iterdir())


def test_unknown_kind_is_rejected(tmp_path):
    with pytest.raises(ConfigurationError, match="kind"):
        create_plugin("model", "x", tmp_path)


@pytest.mark.parametrize(
    "kind, entry",
    [
        ("data", ("digits.plugins.data", "digits_data_probe.ingestion:ProbeIngestion")),
        ("view", ("digits.plugins.view", "digits_view_probe.view:ProbeView")),
    ],
)
def test_cli_generates_a_complete_package(kind, entry, tmp_path, capsys):
    assert main(["plugin", "new", kind, "probe", "--dir", str(tmp_path), "--title", "Probe (x) & co's"]) == 0
    out = capsys.readouterr().out
    folder = tmp_path / f"digits-{kind}-probe"
    assert f"in {folder}" in out or f"digits-{kind}-probe" in out
    files = generated_files(folder)
    package = f"digits_{kind}_probe"
    module = "ingestion" if kind == "data" else "view"
    for rel in [
        "pyproject.toml",
        "README.md",
        f"{package}/__init__.py",
        f"{package}/forms.py",
        f"{package}/{module}.py",
        f"tests/test_{package}.py",
    ]:
        assert rel in files, rel
        assert f"  {rel}" in out
    assert any(rel.startswith(f"{package}/templates/") and rel.endswith(".html") for rel in files)
    for rel, text in files.items():
        assert "@@" not in text and "@@" not in rel, rel
        if rel.endswith(".py"):
            compile(text, rel, "exec")
    project = tomllib.loads(files["pyproject.toml"])
    group, value = entry
    assert project["project"]["entry-points"][group] == {"probe": value}
    assert project["project"]["name"] == f"digits-{kind}-probe"
    assert "templates/*" in project["tool"]["setuptools"]["package-data"][package]
    assert any(d.startswith("digits-core>=") for d in project["project"]["dependencies"])


def test_generated_classes_meet_the_contract(tmp_path, monkeypatch):
    """Import the generated classes in process: right base class, id, forms, templates (autoescaped title)."""
    from digits_core import DataIngestion, View, registry

    data = create_plugin("data", "probe-in-process", tmp_path, title="Probe (x) & co's")
    view = create_plugin("view", "probe-in-process", tmp_path)
    monkeypatch.syspath_prepend(str(data))
    monkeypatch.syspath_prepend(str(view))
    from digits_data_probe_in_process import ProbeInProcessIngestion
    from digits_view_probe_in_process import ProbeInProcessView

    assert issubclass(ProbeInProcessIngestion, DataIngestion) and issubclass(ProbeInProcessView, View)
    registry.register(ProbeInProcessIngestion)
    registry.register(ProbeInProcessView)
    try:
        assert registry.get_data_ingestion("probe-in-process") is ProbeInProcessIngestion
        assert registry.get_view("probe-in-process") is ProbeInProcessView
    finally:
        registry.unregister(ProbeInProcessIngestion)
        registry.unregister(ProbeInProcessView)
    form = ProbeInProcessIngestion.get_dataset_form()()
    source, context = ProbeInProcessIngestion.get_dataset_template(form)
    html = jinja2.Environment(autoescape=True).from_string(source).render(**context)
    assert 'name="image_folder"' in html and "<legend>Probe (x) & co's</legend>" in html
    assert (ProbeInProcessView.get_static_folder() / "style.css").is_file()

    # The generated dataset form shows on the real web UI's "new dataset" page.
    from digits_core.web import create_app

    registry.register(ProbeInProcessIngestion)
    try:
        page = (
            create_app(jobs_dir=tmp_path / "jobs", start_scheduler=False, testing=True)
            .test_client()
            .get("/datasets/new/probe-in-process")
        )
    finally:
        registry.unregister(ProbeInProcessIngestion)
    assert page.status_code == 200 and 'name="labels_csv"' in page.get_data(as_text=True)

    # The generated view works with the core's results-page renderer (the one `digits infer` uses).
    from types import SimpleNamespace

    from digits_core.inference.report import render_html, run_view

    view_instance = ProbeInProcessView(SimpleNamespace(class_labels=["cat", "dog"], userdata={}), top_n=2)
    samples = [
        ("a.png", np.zeros((4, 4, 1), np.uint8), np.array([0.9, 0.1]), 0),
        ("b.png", np.zeros((4, 4, 1), np.uint8), np.array([0.3, 0.7]), 0),
    ]
    page = render_html(view_instance, run_view(view_instance, samples))
    assert "Top-1 accuracy: 50.0 %" in page and ".plugin-probe-in-process-sample" in page
    assert page.count('class="plugin-probe-in-process-sample"') == 2


def test_warns_when_the_id_is_already_installed(tmp_path, capsys):
    from digits_core import View, registry

    class ClashProbeView(View):
        plugin_id = "clash-probe"

        def process_data(self, input_id, input_data, output_data, ground_truth=None):
            return None

        def get_view_template(self, data):
            return "", {}

    registry.register(ClashProbeView)
    try:
        assert main(["plugin", "new", "view", "clash-probe", "--dir", str(tmp_path)]) == 0
        assert main(["plugin", "new", "data", "clash-probe", "--dir", str(tmp_path)]) == 0
    finally:
        registry.unregister(ClashProbeView)
    err = capsys.readouterr().err
    assert err.count("already uses the id") == 1 and "ClashProbeView" in err
    assert (tmp_path / "digits-view-clash-probe" / "pyproject.toml").is_file()


def test_existing_folder_is_not_overwritten(tmp_path, capsys):
    assert main(["plugin", "new", "data", "probe", "--dir", str(tmp_path)]) == 0
    marker = tmp_path / "digits-data-probe" / "pyproject.toml"
    marker.write_text("mine")
    assert main(["plugin", "new", "data", "probe", "--dir", str(tmp_path)]) == 1
    assert "already exists" in capsys.readouterr().err and marker.read_text() == "mine"


def test_skeletons_are_package_data():
    """Every skeleton file is matched by digits-core's package-data globs (so wheels ship them)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = project["tool"]["setuptools"]["package-data"]["digits_core"]
    root = REPO / "digits_core"
    shipped = {m for pattern in patterns for m in glob.glob(pattern, root_dir=root, recursive=True)}
    skeletons = [
        p.relative_to(root).as_posix()
        for p in (root / "scaffold" / "skeletons").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    ]
    assert len(skeletons) >= 15
    assert sorted(set(skeletons) - shipped) == []


# -- real installs ------------------------------------------------------------------


@pytest.mark.slow
def test_generated_plugins_install_list_test_and_build(tmp_path):
    from PIL import Image

    from digits_core.datasets import open_dataset

    env = {k: v for k, v in os.environ.items() if not k.startswith("DIGITS_") and k != "PYTHONPATH"}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"

    def run(*command, cwd=tmp_path):
        result = subprocess.run(
            [str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
        return result.stdout

    run(BIN / "digits", "plugin", "new", "data", "scaffold-check", "--dir", "pkgs")
    run(BIN / "digits", "plugin", "new", "view", "scaffold-check", "--dir", "pkgs", "--title", "Scaffold check view")
    data_dir, view_dir = (
        tmp_path / "pkgs" / "digits-data-scaffold-check",
        tmp_path / "pkgs" / "digits-view-scaffold-check",
    )
    distributions = ["digits-data-scaffold-check", "digits-view-scaffold-check"]

    folder = tmp_path / "images"
    folder.mkdir()
    rows = ["file,label"]
    for i in range(12):
        label = ("circle", "square", "blank")[i % 3]
        pixels = np.full((10, 10, 3), 20 * i, np.uint8)
        Image.fromarray(pixels).save(folder / f"{label}-{i}.png")
        rows.append(f"{label}-{i}.png,{label}")
    (folder / "labels.csv").write_text("\n".join(rows) + "\n")
    jobs = tmp_path / "jobs"
    try:
        # Non-editable installs: the wheels must carry the templates and static files.
        run(
            "flock",
            PIP_LOCK,
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            data_dir,
            view_dir,
        )
        records = json.loads(run(BIN / "digits", "plugins", "--json"))
        found = {(r["kind"], r["id"]): r for r in records if r["id"] == "scaffold-check"}
        assert found[("data", "scaffold-check")]["status"] == "loaded", found
        assert found[("data", "scaffold-check")]["title"] == "Scaffold check"
        assert found[("data", "scaffold-check")]["distribution"] == "digits-data-scaffold-check"
        assert found[("view", "scaffold-check")]["status"] == "loaded", found
        assert found[("view", "scaffold-check")]["title"] == "Scaffold check view"
        for package in (data_dir, view_dir):
            assert "4 passed" in run(
                sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", cwd=package
            )
        run(
            BIN / "digits",
            "--jobs-dir",
            jobs,
            "dataset",
            "create",
            "scaffold-check",
            "--image-folder",
            folder,
            "--labels-csv",
            folder / "labels.csv",
            "--percent-val",
            "25",
            "--workers",
            "2",
            "--name",
            "scaffolded",
        )
    finally:
        subprocess.run(
            ["flock", PIP_LOCK, sys.executable, "-m", "pip", "uninstall", "-y", "-q", *distributions],
            capture_output=True,
            text=True,
            timeout=120,
        )
    (job_folder,) = [p for p in jobs.iterdir() if p.is_dir()]
    dataset = open_dataset(job_folder)
    assert dataset.plugin_id == "scaffold-check"
    assert dataset.class_labels == ["blank", "circle", "square"]
    assert (dataset.count("train"), dataset.count("val")) == (9, 3)
    assert str(dataset.feature_dtype("train")) == "uint8" and tuple(dataset.feature_shape("train")) == (10, 10, 3)
    features, labels = dataset.read_batch("train", 0, 9)
    names = {int(f[0, 0, 0]) // 20: dataset.class_labels[int(lbl)] for f, lbl in zip(features, labels)}
    assert all(name == ("circle", "square", "blank")[i % 3] for i, name in names.items())
