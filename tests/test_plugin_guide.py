"""The plugin guide (docs/writing-plugins.md) runs as written, and its plugin is examples/dicom_csv_plugin.

Every fenced code block of the guide is preceded by a tag comment saying how
it is exercised:

* ``<!-- guide: write PATH -->``: a file of the plugin being built; the
  walkthrough writes it to ``PATH`` (relative to the reader's working
  folder) and it must equal the same file of ``examples/dicom_csv_plugin/``.
* ``<!-- guide: run -->``: shell commands, run with ``bash -euo pipefail``
  in the working folder. ``pip install``/``pip uninstall`` run as
  ``python -m pip`` under ``/tmp/digits-pip.lock``, installs with
  ``--no-deps --no-build-isolation`` (the environment already has the
  dependencies); the test uninstalls the plugin afterwards in any case.
* ``<!-- guide: output -->``: text the previous ``run`` block prints; each
  line (whitespace collapsed) must appear in a line of its output.
* ``<!-- guide: python -->``: a Python script, run in the working folder.
* ``<!-- guide: toml -->``: a ``pyproject.toml`` excerpt; it must parse and
  declare only DIGITS entry-point groups with ``module:attribute`` values.

After changing a file of ``examples/dicom_csv_plugin``, copy it into the
guide with ``python tests/test_plugin_guide.py --sync`` (it rewrites the
guide's ``write`` blocks from the example's files).

The fast tests check tags and file contents; the slow walkthrough does what
a reader does, from ``digits plugin new`` to a built dataset, a trained
LeNet and inference through the plugin's inference form, with real pip
installs. Its training step imports TensorFlow in a subprocess: run this
module under the shared TensorFlow lock (as the whole suite is). A separate slow test pip-installs ``examples/dicom_csv_plugin``
itself and builds a dataset with it (``workers=2``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "writing-plugins.md"
EXAMPLE = REPO / "examples" / "dicom_csv_plugin"
PLUGIN_FOLDER = "digits-data-dicom-csv"  # what `digits plugin new data dicom-csv` creates
DISTRIBUTION = "digits-data-dicom-csv"
BIN = Path(sys.executable).parent
PIP_LOCK = "/tmp/digits-pip.lock"
KINDS = {"write", "run", "output", "python", "toml"}
#: Build and tool leftovers that are not part of a plugin's source.
IGNORED_PARTS = {"__pycache__", ".pytest_cache", "build", "dist"}

TAG = re.compile(r"^<!--\s*guide:\s*([a-z]+)(?:\s+(.*?))?\s*-->\s*$")
FENCE = re.compile(r"^(`{3,})([^`]*)$")


@dataclass
class Block:
    """One fenced code block of the guide and its tag."""

    kind: str | None
    arg: str | None
    lang: str
    text: str
    line: int


def parse_guide(path: Path = GUIDE) -> list[Block]:
    """Return the guide's fenced blocks, each with the tag of the line above it (or None)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        ticks, start = match.group(1), i
        end = next((j for j in range(i + 1, len(lines)) if lines[j] == ticks), None)
        assert end is not None, f"{path.name}:{start + 1}: unclosed code block"
        tag = TAG.match(lines[start - 1]) if start else None
        blocks.append(
            Block(
                kind=tag.group(1) if tag else None,
                arg=tag.group(2) if tag else None,
                lang=match.group(2).strip(),
                text="\n".join(lines[start + 1 : end]) + "\n",
                line=start + 1,
            )
        )
        i = end + 1
    return blocks


def source_files(folder: Path) -> dict[str, str]:
    """Return ``{relative posix path: text}`` of a plugin folder, without build/tool leftovers."""
    files = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if not path.is_file() or IGNORED_PARTS & set(rel.parts) or any(p.endswith(".egg-info") for p in rel.parts):
            continue
        if path.suffix == ".pyc":
            continue
        files[rel.as_posix()] = path.read_text(encoding="utf-8")
    return files


def subprocess_env(jobs_dir: Path) -> dict[str, str]:
    """The environment of a reader's shell: this venv first on PATH, a private jobs folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIGITS_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["DIGITS_JOBS_DIR"] = str(jobs_dir)
    env.pop("PYTHONPATH", None)
    return env


def with_pip_lock(script: str) -> str:
    """Run the guide's pip commands as this venv's pip under the shared lock (see module docstring)."""
    script = re.sub(
        r"(?m)^pip install ", f"flock {PIP_LOCK} python -m pip install -q --no-deps --no-build-isolation ", script
    )
    return re.sub(r"(?m)^pip uninstall ", f"flock {PIP_LOCK} python -m pip uninstall -q ", script)


def pip_uninstall(distribution: str) -> None:
    """Uninstall ``distribution`` from this venv if it is installed (teardown)."""
    subprocess.run(
        ["flock", PIP_LOCK, sys.executable, "-m", "pip", "uninstall", "-y", "-q", distribution],
        capture_output=True,
        text=True,
        timeout=120,
    )


def normalized(text: str) -> str:
    return " ".join(text.split())


def check_output(expected: str, output: str, where: str) -> None:
    """Each non-empty expected line must appear (whitespace collapsed) in some line of ``output``."""
    actual = [normalized(line) for line in output.splitlines()]
    for line in expected.splitlines():
        if line.strip():
            assert any(normalized(line) in a for a in actual), f"{where}: {line.strip()!r} not in output:\n{output}"


def check_toml_excerpt(text: str, where: str) -> None:
    """The excerpt parses and declares DIGITS entry points as ``module:attribute`` or modules."""
    from digits_core.plugins.registry import ENTRY_POINT_GROUPS

    data = tomllib.loads(text)
    groups = data["project"]["entry-points"]
    assert groups, where
    for group, entries in groups.items():
        assert group in ENTRY_POINT_GROUPS.values(), f"{where}: unknown entry-point group {group!r}"
        for name, value in entries.items():
            assert re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name), f"{where}: bad plugin id {name!r}"
            assert re.fullmatch(r"[A-Za-z_][\w.]*(:[A-Za-z_]\w*)?", value), f"{where}: bad object reference {value!r}"


# -- fast checks ----------------------------------------------------------------


def test_every_code_block_is_tagged():
    blocks = parse_guide()
    assert len(blocks) >= 15
    untagged = [b.line for b in blocks if b.kind not in KINDS]
    assert not untagged, f"docs/writing-plugins.md: code blocks without a known guide tag at lines {untagged}"
    for previous, block in zip(blocks, blocks[1:]):
        if block.kind == "output":
            assert previous.kind == "run", f"line {block.line}: an output block must follow a run block"
    for block in blocks:
        if block.kind == "write":
            assert block.arg and block.arg.startswith(PLUGIN_FOLDER + "/"), f"line {block.line}: {block.arg}"


def test_guide_files_are_the_example_plugin(tmp_path):
    """The guide's files plus the untouched scaffold output are exactly examples/dicom_csv_plugin."""
    from digits_core.scaffold import create_plugin

    written = {b.arg.split("/", 1)[1]: b.text for b in parse_guide() if b.kind == "write"}
    example = source_files(EXAMPLE)
    for rel, text in written.items():
        assert rel in example, f"the guide writes {rel}, which examples/dicom_csv_plugin lacks"
        assert text == example[rel], f"docs/writing-plugins.md and examples/dicom_csv_plugin/{rel} differ"
    scaffold = source_files(create_plugin("data", "dicom-csv", tmp_path, title="DICOM images + CSV labels"))
    expected = {**scaffold, **written}
    assert sorted(expected) == sorted(example)
    for rel in set(scaffold) - set(written):
        assert scaffold[rel] == example[rel], f"{rel}: the example changed a scaffold file the guide does not show"


def test_toml_excerpts_declare_digits_entry_points():
    blocks = [b for b in parse_guide() if b.kind == "toml"]
    assert len(blocks) >= 2
    for block in blocks:
        check_toml_excerpt(block.text, f"docs/writing-plugins.md:{block.line}")


def test_example_forms_render_in_the_web_ui(tmp_path, monkeypatch):
    """The example's dataset form and template, as the real web UI's "new dataset" page shows them."""
    from digits_core import registry
    from digits_core.web import create_app

    monkeypatch.syspath_prepend(str(EXAMPLE))
    from digits_data_dicom_csv import DicomCsvIngestion

    registry.register(DicomCsvIngestion, replace=True)
    try:
        app = create_app(jobs_dir=tmp_path, start_scheduler=False, testing=True)
        page = app.test_client().get("/datasets/new/dicom-csv")
    finally:
        registry.unregister(DicomCsvIngestion)
    html = page.get_data(as_text=True)
    assert page.status_code == 200, html
    assert "<legend>DICOM images + CSV labels</legend>" in html
    for field in ("dicom_folder", "labels_csv", "percent_val", "seed"):
        assert f'name="{field}"' in html, field


def test_readme_and_plugins_page_link_the_guide():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    page = (REPO / "docs" / "plugins.md").read_text(encoding="utf-8")
    assert "](docs/writing-plugins.md)" in readme
    assert "## Writing plugins" in page and "](writing-plugins.md)" in page


# -- the walkthrough --------------------------------------------------------------


@pytest.mark.slow
def test_guide_walkthrough(tmp_path):
    """Do what the guide says, in order: scaffold, write files, pip install, list, build, test, uninstall."""
    workspace = tmp_path / "work"
    workspace.mkdir()
    env = subprocess_env(tmp_path / "jobs")
    last_output, ran, uninstalled = None, [], False
    try:
        for number, block in enumerate(parse_guide()):
            where = f"docs/writing-plugins.md:{block.line} ({block.kind})"
            if block.kind == "write":
                target = workspace / block.arg
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.text, encoding="utf-8")
            elif block.kind == "toml":
                check_toml_excerpt(block.text, where)
            elif block.kind == "output":
                check_output(block.text, last_output, where)
            else:
                if block.kind == "run":
                    command = ["bash", "-euo", "pipefail", "-c", with_pip_lock(block.text)]
                else:
                    script = tmp_path / f"block-{number}.py"
                    script.write_text(block.text, encoding="utf-8")
                    command = [str(BIN / "python"), str(script)]
                result = subprocess.run(command, cwd=workspace, env=env, capture_output=True, text=True, timeout=300)
                assert result.returncode == 0, f"{where} failed:\n{block.text}\n{result.stdout}\n{result.stderr}"
                last_output = result.stdout
                ran.append(block.kind)
                uninstalled = block.kind == "run" and f"pip uninstall -y {DISTRIBUTION}" in block.text
    finally:
        if not uninstalled:  # the guide ends by uninstalling; otherwise (a failure) clean up here
            pip_uninstall(DISTRIBUTION)
    assert ran.count("run") >= 5 and ran.count("python") >= 3
    built, example = source_files(workspace / PLUGIN_FOLDER), source_files(EXAMPLE)
    assert sorted(built) == sorted(example)
    assert all(built[rel] == example[rel] for rel in example)


@pytest.mark.slow
def test_example_plugin_installs_and_builds_a_dataset(tmp_path):
    """CI check: pip-install examples/dicom_csv_plugin, list it, build a dataset with 2 workers, read it."""
    from digits_core.datasets import open_dataset

    source = tmp_path / "src"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns(*IGNORED_PARTS, "*.egg-info"))
    env = subprocess_env(tmp_path / "jobs")

    def run(*command):
        result = subprocess.run(list(command), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
        return result.stdout

    try:
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
            str(source),
        )
        records = json.loads(run(str(BIN / "digits"), "plugins", "--json"))
        mine = [r for r in records if r["kind"] == "data" and r["id"] == "dicom-csv"]
        assert len(mine) == 1, records
        assert (mine[0]["status"], mine[0]["distribution"]) == ("loaded", DISTRIBUTION), mine[0]
        run(
            str(BIN / "python"),
            "-m",
            "digits_data_dicom_csv.toy",
            "toy",
            "--patients",
            "5",
            "--images",
            "4",
            "--size",
            "24",
        )
        (tmp_path / "toy" / "P003" / "IM-0002.dcm").write_text("not DICOM")  # one bad file: reported, skipped
        run(
            str(BIN / "digits"),
            "--jobs-dir",
            str(tmp_path / "jobs"),
            "dataset",
            "create",
            "dicom-csv",
            "--dicom-folder",
            "toy",
            "--labels-csv",
            "toy/labels.csv",
            "--percent-val",
            "20",
            "--workers",
            "2",
            "--max-errors",
            "1",
            "--name",
            "example-ct",
        )
    finally:
        pip_uninstall(DISTRIBUTION)
    (job_folder,) = [p for p in (tmp_path / "jobs").iterdir() if p.is_dir()]
    dataset = open_dataset(job_folder)
    assert dataset.plugin_id == "dicom-csv" and dataset.class_labels == ["lesion", "normal"]
    assert dataset.count("train") + dataset.count("val") == 19 and dataset.count("val") >= 3
    split = dataset.userdata["split"]
    assert split["train"]["images"] + split["val"]["images"] == 20
    assert str(dataset.feature_dtype("train")) == "int16" and tuple(dataset.feature_shape("train")) == (24, 24, 1)
    features, labels = dataset.read_batch("val", 0, dataset.count("val"))
    assert features.min() >= -1024 and features.max() <= 3071 and set(labels.tolist()) <= {0, 1}
    errors = "".join(p.read_text() for p in job_folder.rglob("errors*") if p.is_file())
    assert "P003" in errors and "IM-0002.dcm" in errors


def sync_guide(path: Path = GUIDE) -> int:
    """Rewrite the guide's ``write`` blocks from the example plugin's files; return how many changed."""
    lines = path.read_text(encoding="utf-8").splitlines()
    changed = 0
    for block in reversed(parse_guide(path)):
        if block.kind != "write":
            continue
        text = (EXAMPLE / block.arg.split("/", 1)[1]).read_text(encoding="utf-8")
        if text != block.text:
            end = block.line + len(block.text.splitlines())  # index of the closing fence
            lines[block.line : end] = text.splitlines()
            changed += 1
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return changed


if __name__ == "__main__":
    if sys.argv[1:] != ["--sync"]:
        sys.exit("usage: python tests/test_plugin_guide.py --sync")
    print(f"{sync_guide()} block(s) of {GUIDE.relative_to(REPO)} updated from {EXAMPLE.relative_to(REPO)}")
