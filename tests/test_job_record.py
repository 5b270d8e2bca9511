"""The typed job record: job.json carries a schema version, is checked on load, and every key read is declared."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from digits_core import Job, JobNotFoundError
from digits_core.jobs import JobStore
from digits_core.jobs.record import SCHEMA_VERSION, JobRecord, JobRecordError

ROOT = Path(__file__).resolve().parents[1]
DECLARED = set(JobRecord.__required_keys__) | set(JobRecord.__optional_keys__)


def test_new_job_records_the_schema_version_and_typed_accessors(jobs_dir):
    job = Job.create(
        "dataset", "d", jobs_dir=jobs_dir, plugin_id="image-classification", form_data={"folder": "/x"}, workers=2
    )
    on_disk = json.loads((job.path / "job.json").read_text())
    assert on_disk["schema_version"] == SCHEMA_VERSION
    loaded = Job.load(job.path)
    assert loaded.plugin_id == "image-classification"
    assert loaded.form_data == {"folder": "/x"}
    assert loaded.dataset_id is None
    assert [s for s, _t in loaded.status_history] == ["Initialized"]
    model = Job.create("model", "m", jobs_dir=jobs_dir, train_options={"dataset": job.id, "network": "lenet"})
    assert (model.dataset_id, model.network) == (job.id, "lenet")  # a queued job: from its train options
    model.data.update({"dataset_id": "other", "network": "alexnet"})
    assert (model.dataset_id, model.network) == ("other", "alexnet")


def test_record_without_a_version_reads_as_version_1_and_keeps_unknown_keys(jobs_dir):
    folder = jobs_dir / "20200101-000000-abcd"
    folder.mkdir(parents=True)
    (folder / "job.json").write_text(
        json.dumps(
            {
                "id": folder.name,
                "kind": "model",
                "name": "old",
                "status_history": [["Done", 1.0]],
                "key_from_a_plugin": [1, 2],
            }
        )
    )
    job = JobStore(jobs_dir).get(folder.name)
    assert job.data["schema_version"] == 1 and job.status.value == "Done"
    job.save()
    assert json.loads((folder / "job.json").read_text())["key_from_a_plugin"] == [1, 2]


@pytest.mark.parametrize(
    "record, message",
    [
        ({"schema_version": SCHEMA_VERSION + 1}, "newer DIGITS Core .*upgrade digits-core"),
        ({"status_history": []}, '"status_history" must be a non-empty list'),
        ({"status_history": "Done"}, '"status_history" must be a non-empty list'),
        ({"kind": "experiment"}, 'kind "experiment" is not one of dataset, model'),
        ({"id": None}, '"id" is missing'),
        ({"schema_version": "1"}, '"schema_version" must be a positive integer'),
    ],
)
def test_bad_or_newer_records_are_refused_naming_the_file(jobs_dir, record, message):
    folder = jobs_dir / "20200101-000000-beef"
    folder.mkdir(parents=True)
    base = {"id": folder.name, "kind": "dataset", "status_history": [["Done", 1.0]]}
    (folder / "job.json").write_text(json.dumps({**base, **record}))
    with pytest.raises(JobRecordError, match=message) as info:
        Job.load(folder)
    assert str(folder / "job.json") in str(info.value)
    assert isinstance(info.value, JobNotFoundError)
    assert JobStore(jobs_dir).list() == []  # listed like a folder without a readable job.json: skipped


def test_json_array_is_not_a_job_record(jobs_dir):
    folder = jobs_dir / "20200101-000000-cafe"
    folder.mkdir(parents=True)
    (folder / "job.json").write_text("[]")
    with pytest.raises(JobRecordError, match="not a job record"):
        Job.load(folder)


# Receivers that hold a Job in the core and the bundled plugins (``job``, ``ds_job``, ``self.job``, ...).
_ACCESS = re.compile(
    r"\b(?:job|ds|ds_job|source|model_job|loaded|s\.job|self\.job)\.data"
    r"(?:\[|\.get\(|\.pop\(|\.setdefault\()\s*[\"'](\w+)[\"']"
)
_CREATE = re.compile(r"Job\.create\((?:[^()]|\([^()]*\))*\)", re.S)
# The writer API's keywords are job.json keys too (error/reopen are parameters, not keys).
_WRITE = re.compile(
    r"\b(?:job|ds|ds_job|source|model_job|loaded|s\.job|self\.job|jobs\[0\])"
    r"\.(?:update|finish|set_status|resume)\(((?:[^()]|\([^()]*\))*)\)",
    re.S,
)


def _sources():
    for base in ("digits_core", "plugins", "compat"):
        for path in sorted((ROOT / base).rglob("*.py")):
            if "/tests/" not in str(path) and "/skeletons/" not in str(path):
                yield path, path.read_text(encoding="utf-8")


def test_every_job_json_key_the_code_reads_or_writes_is_declared():
    """Also covers modules mypy does not check yet: a key used anywhere must be in JobRecord."""
    undeclared = set()
    for path, text in _sources():
        for key in _ACCESS.findall(text):
            if key not in DECLARED:
                undeclared.add(f"{path.relative_to(ROOT)}: {key}")
        for call in _WRITE.findall(text):
            for key in re.findall(r"(?<![=\w])(\w+)=(?!=)", call):
                if key not in DECLARED | {"error", "reopen"}:
                    undeclared.add(f"{path.relative_to(ROOT)}: job.<write>(... {key}=)")
        for call in _CREATE.findall(text):
            for key in re.findall(r"\b(\w+)=", call):
                if key not in DECLARED | {"jobs_dir", "hold"}:  # Job.create's own parameters
                    undeclared.add(f"{path.relative_to(ROOT)}: Job.create(... {key}=)")
    assert not undeclared, "declare these keys in digits_core/jobs/record.py: " + ", ".join(sorted(undeclared))
    assert _ACCESS.search('job.data.get("plugin_id")') and _ACCESS.search("ds_job.data['x']")
    assert _WRITE.search("job.update(scratch=scratch)") and _WRITE.search("self.job.finish(s, dataset={...})")


def test_a_built_dataset_writes_only_declared_keys(jobs_dir):
    """job.json and dataset.json of a real (tiny) dataset job hold only keys the typed records declare."""
    from synthetic_plugins import SyntheticShapes

    from digits_core.jobs.record import DatasetRecord
    from digits_core.plugins.testing import build_dataset

    dataset = build_dataset(SyntheticShapes, {"count": 4, "val_count": 2, "size": 8}, jobs_dir=jobs_dir)
    info = json.loads((dataset.path / "dataset.json").read_text())
    job = json.loads((dataset.job_path / "job.json").read_text())
    declared_ds = set(DatasetRecord.__required_keys__) | set(DatasetRecord.__optional_keys__)
    assert set(info) <= declared_ds, set(info) - declared_ds
    assert set(job) <= DECLARED, set(job) - DECLARED
    assert job["schema_version"] == SCHEMA_VERSION and job["plugin_id"] == SyntheticShapes.plugin_id


def test_only_the_job_store_touches_a_jobs_data():
    """The one writer API: outside ``digits_core/jobs/`` no code indexes or mutates ``<job>.data`` (read typed
    properties such as ``job.train_options``, write with ``job.update(...)`` and the other intents)."""
    mutating = re.compile(r"\.data\[|\.data\.(?:update|setdefault|pop|clear)\(")
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path, text in _sources()
        if "digits_core/jobs/" not in path.as_posix()
        for number, line in enumerate(text.splitlines(), 1)
        if mutating.search(line)
    ]
    assert not found, "use the job store's typed properties and intent methods instead:\n" + "\n".join(found)


_WRITES = ("open", "write_bytes", "write_text", "replace", "rename", "unlink", "truncate", "copy", "copyfile", "move")


def _writes_a_file(node: ast.AST) -> bool:
    """A call that may write, replace or remove a file (``open`` counts unless its mode is read-only)."""
    if not isinstance(node, ast.Call):
        return False
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    if name not in _WRITES:
        return False
    if name == "open" and isinstance(node.func, ast.Name):  # builtins.open: its mode says
        mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
        return not (mode is None or (isinstance(mode, ast.Constant) and set(str(mode.value)) <= set("rbt")))
    return True


def metrics_writers(sources) -> list[str]:
    """``file:line`` of each function outside ``digits_core/jobs/`` that names ``metrics.jsonl`` and writes a file."""
    found = []
    for path, text in sources:
        if "digits_core/jobs/" in path.as_posix():
            continue
        for func in ast.walk(ast.parse(text)):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            nodes = list(ast.walk(func))
            names_it = any(
                (isinstance(n, ast.Name) and n.id == "METRICS_FILE")
                or (isinstance(n, ast.Attribute) and n.attr == "METRICS_FILE")
                or (isinstance(n, ast.Constant) and n.value == "metrics.jsonl")
                for n in nodes
            )
            if names_it and any(_writes_a_file(n) for n in nodes):
                found.append(f"{path.relative_to(ROOT)}:{func.lineno} {func.name}")
    return found


def test_only_the_job_store_writes_metrics_jsonl():
    """One writer for metrics.jsonl too: appends and rewrites go through digits_core.jobs.model, under the lock."""
    found = metrics_writers(_sources())
    assert not found, "write metrics.jsonl with digits_core.jobs.model (record_metrics, start_metrics, ...):\n" + (
        "\n".join(found)
    )
    probe = [
        (ROOT / "digits_core" / "engine" / "probe.py", 'def a(f):\n    open(Path(f) / METRICS_FILE, "a").write("x")\n'),
        (ROOT / "digits_core" / "engine" / "probe.py", "def b(p):\n    p.joinpath('metrics.jsonl').write_bytes(b'')\n"),
        (ROOT / "digits_core" / "engine" / "probe.py", 'def c(f):\n    return open(Path(f) / METRICS_FILE, "rb")\n'),
        (ROOT / "digits_core" / "jobs" / "probe.py", 'def d(f):\n    open(Path(f) / METRICS_FILE, "a")\n'),
    ]
    assert metrics_writers(probe) == ["digits_core/engine/probe.py:1 a", "digits_core/engine/probe.py:1 b"]


def test_the_training_metrics_writer_appends_and_rewrites_under_the_record_lock(tmp_path, monkeypatch):
    import contextlib

    from digits_core.engine import jobio
    from digits_core.jobs import model

    held: list[bool] = []
    real_lock, real_open = model.record_lock, model.os.open
    inside = [False]

    @contextlib.contextmanager
    def lock(folder):
        with real_lock(folder):
            inside[0] = True
            try:
                yield
            finally:
                inside[0] = False

    def spy_open(path, *args, **kwargs):
        if str(path).endswith("metrics.jsonl"):
            held.append(inside[0])
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(model, "record_lock", lock)
    monkeypatch.setattr(model.os, "open", spy_open)
    first = jobio.MetricsWriter(tmp_path, tensorboard=False)
    first.write(1.0, 10, {"loss": 0.5})
    first.write(2.0, 20, {"loss": 0.25})
    first.close()
    resumed = jobio.MetricsWriter(tmp_path, tensorboard=False, resume_step=10)
    resumed.write(2.0, 20, {"loss": 0.125})
    resumed.close()
    assert held and all(held), "every open of metrics.jsonl for writing happens under the record lock"
    points = model.read_metric_points(tmp_path).points
    assert [(p["step"], p["value"]) for p in points] == [(10, 0.5), (20, 0.125)]
