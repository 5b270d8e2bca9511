"""The porting guide (docs/porting-digits6.md) is true: its API map resolves and its example runs as written.

Every fenced code block of the guide's example is preceded by a tag comment:

* ``<!-- porting: write PATH -->``: a file of the example plugin, written to
  ``PATH`` in the reader's working folder.
* ``<!-- porting: run -->``: shell commands, run with ``bash -euo pipefail``
  there; ``pip install --no-build-isolation ./X`` installs into a
  ``--target`` folder put on ``PYTHONPATH`` (so the test leaves the
  environment as it found it).
* ``<!-- porting: output -->``: what the previous ``run`` block prints; each
  line (whitespace collapsed) must appear in a line of its output.

Blocks before the example (the install commands of the introduction) are
untagged. The fast tests check the tags, that the example's Python parses,
and that every DIGITS 6 name of the API map exists in digits6-compat; the
slow walkthrough writes the plugin, installs it with pip, lists it, builds a
dataset, trains one and renders inference through its view.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "porting-digits6.md"
HELPER = REPO / "digits_core" / "web" / "templates" / "helper.html"
EXAMPLE_HEADING = "## A complete example"
KINDS = {"write", "run", "output"}

TAG = re.compile(r"^<!--\s*porting:\s*([a-z]+)(?:\s+(.*?))?\s*-->\s*$")
FENCE = re.compile(r"^(`{3,})([^`]*)$")
PIP_INSTALL = re.compile(r"^pip install --no-build-isolation (\S+)$", re.M)


@dataclass
class Block:
    """One fenced code block and the tag above it."""

    kind: str | None
    arg: str | None
    text: str
    line: int
    in_example: bool


def parse_guide(path: Path = GUIDE) -> list[Block]:
    """Return the guide's fenced blocks with their tags (``None`` when untagged)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i, in_example = [], 0, False
    while i < len(lines):
        if lines[i].startswith(EXAMPLE_HEADING):
            in_example = True
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, start = match.group(1), i
        body = []
        i += 1
        while i < len(lines) and lines[i] != fence:
            body.append(lines[i])
            i += 1
        previous = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        tag = TAG.match(previous)
        blocks.append(
            Block(
                tag.group(1) if tag else None,
                tag.group(2) if tag else None,
                "\n".join(body) + ("\n" if body else ""),
                start + 1,
                in_example,
            )
        )
        i += 1
    return blocks


def api_names(path: Path = GUIDE) -> list[str]:
    """Return the first-column names of the API map table."""
    text = path.read_text(encoding="utf-8")
    section = text.split("## API map", 1)[1].split("\n## ", 1)[0]
    return [m.group(1) for m in re.finditer(r"^\| `([^`]+)`", section, re.M)]


#: Class names the API map uses unqualified.
SHORT = {
    "DataIngestionInterface": "digits.extensions.data.interface.DataIngestionInterface",
    "VisualizationInterface": "digits.extensions.view.interface.VisualizationInterface",
}


def resolve(name: str):
    """Import the longest module prefix of a dotted name and get the rest as attributes."""
    head, _, rest = name.partition(".")
    parts = (SHORT.get(head, head) + ("." + rest if rest else "")).split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            obj = getattr(obj, attribute)
        return obj
    raise ImportError(name)


def test_every_example_block_is_tagged():
    blocks = parse_guide()
    example = [b for b in blocks if b.in_example]
    assert example, "the guide has no example section"
    for block in example:
        assert block.kind in KINDS, f"line {block.line}: untagged or unknown block kind {block.kind!r}"
    writes = [b.arg for b in example if b.kind == "write"]
    assert len(writes) == len(set(writes)) and "digits6-squares/setup.py" in writes
    for i, block in enumerate(example):
        if block.kind == "output":
            assert example[i - 1].kind == "run", f"line {block.line}: output must follow a run block"


def test_example_python_parses_and_uses_the_digits6_idiom():
    sources = {b.arg: b.text for b in parse_guide() if b.kind == "write" and b.arg.endswith(".py")}
    for path, text in sources.items():
        ast.parse(text, filename=path)
    data = sources["digits6-squares/digits6Squares/data.py"]
    assert "[np.newaxis, ...]" in data and "self.userdata['is_inference_db']" in data
    assert "def get_inference_form(self)" in data
    assert "output_data.keys()[0]" in sources["digits6-squares/digits6Squares/view.py"]
    assert "'class=" in sources["digits6-squares/setup.py"]


def test_every_digits6_name_of_the_api_map_exists():
    names = api_names()
    assert len(names) > 40
    macros = set(re.findall(r"{%-?\s*macro\s+(\w+)", HELPER.read_text(encoding="utf-8")))
    for name in names:
        if name.startswith("helper.html"):
            wanted = set(re.findall(r"`(\w+)`", name + "`")) | {"print_flashes", "print_errors", "mark_errors"}
            assert wanted <= macros, f"helper.html lacks {sorted(wanted - macros)}"
            continue
        resolve(name)  # raises when digits6-compat lacks it


def _bash_env(work: Path, site: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIGITS_")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    env["DIGITS_JOBS_DIR"] = str(work / "jobs")
    env["COLUMNS"] = "100"
    return env


def _install_to(site: Path, script: str) -> str:
    return PIP_INSTALL.sub(
        lambda m: (
            f"python -m pip install -q --no-deps --no-build-isolation --disable-pip-version-check "
            f'--target "{site}" {m.group(1)}'
        ),
        script,
    )


@pytest.mark.slow
def test_example_runs_as_written(tmp_path):
    """Write the plugin, pip-install it, list it, build a dataset, train and infer through its view (TensorFlow)."""
    work, site = tmp_path / "work", tmp_path / "site"
    work.mkdir()
    env = _bash_env(work, site)
    output = None
    for block in (b for b in parse_guide() if b.in_example):
        if block.kind == "write":
            target = work / block.arg
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text, encoding="utf-8")
        elif block.kind == "run":
            result = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", _install_to(site, block.text)],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert result.returncode == 0, f"line {block.line}:\n{block.text}\n{result.stdout}\n{result.stderr}"
            output = [" ".join(line.split()) for line in result.stdout.splitlines()]
        elif block.kind == "output":
            assert output is not None
            for expected in block.text.splitlines():
                wanted = " ".join(expected.split())
                assert any(wanted in line for line in output), f"line {block.line}: {wanted!r} not in {output}"
