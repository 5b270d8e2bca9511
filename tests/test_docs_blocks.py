"""Every code block of README.md and docs/*.md runs as written (with small data), or says why not.

Each fenced block carries a tag on the line above it::

    <!-- docs-test: run -->              bash or Python, executed (see below)
    <!-- docs-test: text -->             not a command: a file layout, output, config or format excerpt
    <!-- docs-test: skip REASON -->      cannot run here (a server, the network, another machine...);
                                         the reason is shown in the Markdown source

docs/writing-plugins.md and docs/porting-digits6.md have walkthrough tests of
their own (tests/test_plugin_guide.py, tests/test_compat_digits6*.py) and
their own tags.

How ``run`` blocks run (the slow tests): one sandbox per document, blocks in
document order, like a reader going down the page; the pages of the manual
split from the README (:data:`MANUAL`) share one sandbox, in reading order. ``HOME`` and
``DIGITS_JOBS_DIR`` point into the sandbox; the working folder holds small
data the blocks name (``~/data/train`` class folders, ``~/data/blobs`` with
``targets.csv``, ``noisy/``/``clean/``, ``cat.png``, ``val.txt``...), built by
:func:`make_sandbox`. Rewrites, so the examples stay small: ``--epochs N`` and
``epochs=N`` become 1 (a ``digits train`` without ``--epochs`` gets
``--epochs 1``; ``--epoch N`` of inference becomes 1), the synthetic Sunnybrook set has 3 cases of 32×32, ``image-pairs``
draws 64 + 16 pairs, ``/tmp/``
and ``/data/`` point into the sandbox, and the example DICOM file
``IM-0001-0048.dcm`` is image 48 of the first synthetic case.
Placeholders (``DATASET_ID``, ``MODEL_ID``, ...) become the id of the newest
job of the kind and name listed in :data:`PLACEHOLDERS`, looked up when the
line runs (so a block that creates a job and then uses it works). Bash
blocks run with ``bash -euo pipefail``; Python blocks run in a fresh
interpreter after :data:`PRELUDE` (the objects the snippets assume: a
``MyIngestion`` plugin class, ``features``/``labels`` arrays, ``images``, a
Keras callback, ``job``). A block fails the test when it exits non-zero.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
#: The manual's pages that run in one sandbox, in this reading order (a later page uses the jobs an earlier
#: one made, as the single README they were split from did).
MANUAL = [
    "README.md",
    "docs/index.md",
    "docs/getting-started.md",
    "docs/source-layout.md",
    "docs/plugins.md",
    "docs/datasets.md",
    "docs/medical-imaging.md",
    "docs/training.md",
    "docs/sweeps.md",
    "docs/benchmarks.md",
    "docs/scaling-out.md",
    "docs/web-ui.md",
    "docs/export.md",
    "docs/cli.md",
]
#: Documents whose blocks this module checks.
DOCUMENTS = [
    *MANUAL,
    "docs/security.md",
    "docs/annotation-formats.md",
    "docs/backbones.md",
    "docs/api.md",
    "docs/custom-networks.md",
    "docs/formats.md",
    "docs/architecture.md",
    "docs/backbones.md",
    "docs/evaluation.md",
    "docs/accounts.md",
    "docs/active-learning.md",
]
#: Guides whose code blocks a walkthrough test of their own runs (with its own tags).
OWN_TESTS = {
    "docs/writing-plugins.md": "tests/test_plugin_guide.py",
    "docs/porting-digits6.md": "tests/test_compat_digits6_guide.py",
    "docs/python-api.md": "tests/test_python_api_guide.py",
}
TAG = re.compile(r"^<!--\s*docs-test:\s*(run|text|skip)\b\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(`{3,})(\w*)\s*$")
BIN = Path(sys.executable).parent

#: placeholder -> (job kind, job name), per document; resolved to the newest such job when a line runs.
PLACEHOLDERS = {
    "manual": {
        "LV_DATASET_ID": ("dataset", "sunnybrook64"),
        "DATASET_ID": ("dataset", "digits"),
        "SUNNYBROOK_MODEL": ("model", "lv"),
        "SEG_ID": ("model", "lv"),
        "MODEL_ID": ("model", "mnist-lenet"),
        "CENTRES_DATASET_ID": ("dataset", "centres"),
        "CENTRES_MODEL_ID": ("model", "centres"),
        "DENOISE_DATASET_ID": ("dataset", "denoise"),
        "DENOISE_MODEL_ID": ("model", "denoise"),
    },
    "docs/custom-networks.md": {
        "REGRESSION_DATASET_ID": ("dataset", "blob-centres"),
        "PAIRS_DATASET_ID": ("dataset", "pairs"),
        "MODEL_ID": ("model", "blob-centres"),
    },
    "docs/formats.md": {"<job>": ("dataset", "digits")},
}

#: Python run before every Python block (objects the snippets take as given).
PRELUDE = """
import numpy as _np
from digits_core import DataIngestion as _DataIngestion
from wtforms import Form as _Form, IntegerField as _IntegerField

class MyIngestion(_DataIngestion):
    plugin_id = "my-ingestion"
    title = "Docs test plugin"

    @staticmethod
    def get_dataset_form():
        class _F(_Form):
            count = _IntegerField("Count", default=4)
        return _F

    @staticmethod
    def get_dataset_template(form):
        return "{{ form.count }}", {"form": form}

    def itemize_entries(self, stage):
        return list(range(int(self.count))) if stage == "train" else []

    def encode_entry(self, entry):
        return _np.full((4, 4, 1), entry, _np.uint8), int(entry % 2)

features = _np.random.default_rng(0).integers(0, 256, (20, 8, 8, 1), dtype=_np.uint8)
labels = _np.arange(20) % 2
"""
#: Extra prelude per document, after the placeholders are known (``_ids``: placeholder -> id).
PRELUDE_EXTRA = {
    "manual": "import keras\nmy_keras_callback = keras.callbacks.Callback()\n"
    "images = _np.zeros((2, 28, 28, 1), _np.uint8)\n",
    "docs/custom-networks.md": "from digits_core.jobs import JobStore as _JobStore\n"
    "job = _JobStore().get(_ids['MODEL_ID'])\n"
    "images = _np.zeros((2, 32, 32, 1), _np.uint8)\n"
    "def build_model(input_shape, num_outputs, **params):\n    raise NotImplementedError\n",
}


@dataclass
class Block:
    """One fenced block and its tag."""

    document: str
    line: int
    lang: str
    text: str
    kind: str | None
    note: str


def parse(document: str) -> list[Block]:
    """Return the fenced blocks of a document with the tag of the line above each."""
    lines = (REPO / document).read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, lang = match.groups()
        end = i + 1
        while end < len(lines) and not lines[end].startswith(fence):
            end += 1
        tag = TAG.match(lines[i - 1]) if i else None
        blocks.append(
            Block(
                document,
                i + 1,
                lang,
                "\n".join(lines[i + 1 : end]),
                tag.group(1) if tag else None,
                tag.group(2) if tag else "",
            )
        )
        i = end + 1
    return blocks


ALL_BLOCKS = [block for document in DOCUMENTS for block in parse(document)]


def test_every_block_is_tagged_and_skips_say_why():
    untagged = [f"{b.document}:{b.line}" for b in ALL_BLOCKS if b.kind is None]
    assert not untagged, f"code blocks without a <!-- docs-test: run|text|skip REASON --> tag: {untagged}"
    silent = [f"{b.document}:{b.line}" for b in ALL_BLOCKS if b.kind == "skip" and len(b.note) < 10]
    assert not silent, f"skip tags need a reason: {silent}"
    odd = [f"{b.document}:{b.line}" for b in ALL_BLOCKS if b.kind == "run" and b.lang not in ("bash", "python")]
    assert not odd, f"only bash and python blocks can run: {odd}"
    assert sum(b.kind == "run" for b in ALL_BLOCKS) >= 15


def test_every_document_is_checked_here_or_by_its_own_test():
    for path in sorted((REPO / "docs").glob("*.md")):
        name = f"docs/{path.name}"
        assert name in DOCUMENTS or name in OWN_TESTS, f"{name}: add it to DOCUMENTS (and tag its blocks)"


def test_text_blocks_in_json_csv_and_ini_parse():
    import configparser
    import csv
    import io

    for block in ALL_BLOCKS:
        if block.kind != "text":
            continue
        if block.lang == "csv":
            rows = list(csv.reader(io.StringIO(block.text)))
            assert len({len(r) for r in rows}) == 1, block.line
        elif block.lang == "ini":
            configparser.ConfigParser().read_string(block.text)
        elif block.lang == "json" and "..." not in block.text:
            json.loads(block.text)


# -- running the blocks ------------------------------------------------------------------------


def _save(path: Path, array: np.ndarray) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


def make_sandbox(root: Path) -> dict:
    """Small data under ``root`` for every path the documents name; returns the environment."""
    from sklearn.datasets import load_digits

    home, work = root / "home", root / "work"
    digits = load_digits()
    for i, (image, label) in enumerate(zip(digits.images[:120], digits.target[:120])):
        pixels = (image * 16).clip(0, 255).astype(np.uint8)
        _save(home / "data" / "train" / str(label) / f"{i:04d}.png", pixels)
        _save(root / "data" / "train" / str(label) / f"{i:04d}.png", pixels)
    for name in ("cat.png", "dog.jpg", "x.png", "images/a.png", "images/b.png"):
        _save(work / name, (digits.images[3] * 16).astype(np.uint8))
    (work / "val.txt").write_text("cat.png 3\nx.png 5\n")
    (work / "masks.txt").write_text("cat.png mask.png\n")
    _save(work / "mask.png", np.zeros((8, 8), np.uint8))
    rng = np.random.default_rng(0)
    for base in (home / "data" / "blobs", work / "blobs"):
        rows = ["path,cx,cy"]
        for i in range(24):
            y, x = rng.integers(4, 28, 2)
            canvas = np.zeros((32, 32), np.uint8)
            canvas[y - 3 : y + 3, x - 3 : x + 3] = 255
            _save(base / f"{i:04d}.png", canvas)
            rows.append(f"{i:04d}.png,{x / 32:.4f},{y / 32:.4f}")
        (base / "targets.csv").write_text("\n".join(rows) + "\n")
        (base / "val.csv").write_text("\n".join(rows[:5]) + "\n")
    for pair in (("noisy", "clean"), ("noisy-test", "clean-test")):
        for i in range(8):
            clean = np.zeros((16, 16, 3), np.uint8)
            clean[2 + i : 8 + i, 4:12] = 200
            _save(work / pair[1] / f"{i}.png", clean)
            _save(work / pair[0] / f"{i}.png", np.clip(clean + rng.normal(0, 20, clean.shape), 0, 255).astype(np.uint8))
    for i, image in enumerate(digits.images[:60]):
        _save(work / "classes" / str(digits.target[i] % 3) / f"{i}.png", (image * 16).astype(np.uint8))
    (work / "my_net.py").write_text(
        (REPO / "examples" / "networks" / "regression_mse.py")
        .read_text()
        .replace('return model, "mse", ["mae"]', "return model")
        .replace(
            'outputs = keras.layers.Dense(num_outputs, name="output")(x)',
            'outputs = keras.layers.Dense(num_outputs, activation="softmax", name="output")(x)',
        )
    )
    (work / "examples").symlink_to(REPO / "examples")
    (root / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIGITS_")}
    env.update(
        HOME=str(home),
        DIGITS_JOBS_DIR=str(root / "jobs"),
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        TF_CPP_MIN_LOG_LEVEL="3",
        PYTHONPATH=str(REPO),
    )
    return {"root": root, "work": work, "env": env}


def job_id(jobs_dir: Path, kind: str, name: str) -> str:
    """The newest job of ``kind`` named ``name`` (job folders sort by creation time)."""
    for folder in sorted(jobs_dir.glob("*"), reverse=True):
        try:
            data = json.loads((folder / "job.json").read_text())
        except (OSError, ValueError):
            continue
        if data.get("kind") == kind and data.get("name") == name:
            return folder.name
    raise AssertionError(f"no {kind} job named {name!r} yet (a placeholder refers to it)")


def rewrite(text: str, root: Path) -> str:
    """The small-data rewrites listed in the module docstring."""
    text = re.sub(r"--epochs? \d+", lambda m: m.group(0).split()[0] + " 1", text)
    text = re.sub(r"^(\s*digits train )(?!.*(--epochs|--resume))", r"\1--epochs 1 ", text, flags=re.M)
    text = re.sub(r"(digits_data_sunnybrook\.synth \S+) --cases \d+ --size \d+", r"\1 --cases 3 --size 32", text)
    text = re.sub(r"--train-pairs \d+ --val-pairs \d+", "--train-pairs 64 --val-pairs 16", text)
    text = re.sub(r"\bepochs=\d+", "epochs=1", text)
    text = text.replace("/tmp/", f"{root}/tmp/").replace('"/data/', f'"{root}/data/')
    return text


def _run_bash(block: Block, sandbox: dict, placeholders: dict) -> subprocess.CompletedProcess:
    root = sandbox["root"]
    text = rewrite(block.text, root)
    for name, (kind, job_name) in sorted(placeholders.items(), key=lambda item: -len(item[0])):
        text = re.sub(
            rf"(?<![\w<]){re.escape(name)}(?![\w>])" if name[0] != "<" else re.escape(name),
            f'"$(job_id {kind} {job_name})"',
            text,
        )
    dicom = f"{root}/tmp/sunnybrook/challenge_training/*/IM-*-0048.dcm"
    text = text.replace("IM-0001-0048.dcm", f'"$(ls {dicom} | head -1)"')
    script = (
        "job_id() { "
        f'"{sys.executable}" -c "import sys; sys.path.insert(0, \'{REPO / "tests"}\'); '
        "from test_docs_blocks import job_id; from pathlib import Path; "
        f'print(job_id(Path(\'{root / "jobs"}\'), sys.argv[1], sys.argv[2]))" "$1" "$2"; }}\n' + text
    )
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=sandbox["work"],
        env=sandbox["env"],
        capture_output=True,
        text=True,
        timeout=600,
    )


def _run_python(block: Block, sandbox: dict, placeholders: dict) -> subprocess.CompletedProcess:
    root = sandbox["root"]
    text = rewrite(block.text, root)
    ids = {}
    prelude_extra = PRELUDE_EXTRA.get(_group(block.document), "")
    for name, (kind, job_name) in placeholders.items():
        if name in text or name in prelude_extra:
            ids[name] = job_id(root / "jobs", kind, job_name)
            text = text.replace(name, ids[name] if name[0] != "<" else str(root / "jobs" / ids[name]))
    dicoms = sorted(root.glob("tmp/sunnybrook/challenge_training/*/IM-*-0048.dcm"))
    if dicoms:
        text = text.replace("IM-0001-0048.dcm", str(dicoms[0]))
    code = PRELUDE + f"_ids = {ids!r}\n" + prelude_extra + text
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=sandbox["work"],
        env=sandbox["env"],
        capture_output=True,
        text=True,
        timeout=600,
    )


def _group(document: str) -> str:
    """The key of a document's placeholders and prelude: "manual" for the pages of :data:`MANUAL`."""
    return "manual" if document in MANUAL else document


def run_document(document: str | list[str], tmp_path: Path, before=None) -> None:
    """Run the ``run`` blocks of one document, or of several in order in one sandbox."""
    documents = [document] if isinstance(document, str) else document
    sandbox = make_sandbox(tmp_path)
    if before:
        before(sandbox)
    for block in [block for name in documents for block in parse(name)]:
        if block.kind != "run":
            continue
        runner = _run_bash if block.lang == "bash" else _run_python
        result = runner(block, sandbox, PLACEHOLDERS.get(_group(block.document), {}))
        assert result.returncode == 0, (
            f"{block.document}:{block.line} failed ({result.returncode}):\n{block.text}\n"
            f"--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}"
        )


@pytest.mark.slow
def test_custom_networks_guide_runs(tmp_path):
    run_document("docs/custom-networks.md", tmp_path)


@pytest.mark.slow
def test_formats_reader_decodes_png_records(tmp_path):
    def png_dataset(sandbox):
        subprocess.run(
            [
                str(BIN / "digits"),
                "dataset",
                "create",
                "image-classification",
                "--name",
                "digits",
                "--folder",
                str(sandbox["root"] / "home" / "data" / "train"),
                "--image-type",
                "grayscale",
                "--width",
                "8",
                "--height",
                "8",
            ],
            env=sandbox["env"],
            check=True,
            capture_output=True,
        )

    run_document("docs/formats.md", tmp_path, before=png_dataset)


@pytest.mark.slow
def test_manual_runs(tmp_path):
    run_document(MANUAL, tmp_path)
