"""Hostile job files never take the server, the listings or the CLI down (issue 39, finding 2).

A jobs folder holds a good dataset job, a good model job and a victim model job. Each case
damages one of the victim's records (``job.json``, ``model.json``, ``metrics.jsonl``,
``dataset.json``): bytes that are not UTF-8, wrong types, ``1e999``, ``NaN``, huge integers,
nesting 100,000 deep, an empty, cut-short or oversized file, and random byte edits drawn with a
fixed seed. Then a fresh app starts on the folder (``create_app`` with its scheduler, as ``digits
serve`` starts) and ``/``, ``/index.json``, ``/api/jobs``, the victim's pages and ``digits model
list`` / ``digits dataset list`` must all answer (no 500, no traceback) and name the victim's
folder, with the damaged file and "Unreadable" where the record cannot be read; the good jobs keep
working and the damaged file is left byte for byte as it was.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from digits_core.cli import main as digits_main
from digits_core.jobs import Job, JobStatus
from digits_core.jobs.model import record_metrics, write_model_record
from digits_core.web.app import create_app

SEED = 39
DEEP = 100_000


def _record(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _make_jobs(root: Path) -> dict[str, Job]:
    dataset = Job.create("dataset", "good dataset", jobs_dir=root, plugin_id="image-classification")
    dataset.set_status(JobStatus.RUNNING)
    dataset.finish(JobStatus.DONE, dataset={"stages": {"train": 4, "val": 2}, "skipped": 0})
    jobs = {"dataset": dataset}
    for key in ("model", "victim"):
        job = Job.create("model", f"{key} model", jobs_dir=root, dataset_id=dataset.id, network="lenet")
        job.set_status(JobStatus.RUNNING)
        write_model_record(
            job.path,
            {
                "job_id": job.id,
                "network": "lenet",
                "dataset_id": dataset.id,
                "task": "classification",
                "options": {"epochs": 2},
                "snapshots": [],
                "best_metric": 0.5,
                "best_metric_name": "val_loss",
                "last_epoch": 2.0,
            },
        )
        record_metrics(job.path, 1.0, 10, {"loss": 0.9, "val_loss": 0.7})
        record_metrics(job.path, 2.0, 20, {"loss": 0.6, "val_loss": 0.5})
        job.finish(JobStatus.DONE)
        jobs[key] = job
    return jobs


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# -- the damage: each case turns the file's bytes (and a seeded Random) into new bytes ------------


def _set(key, value):
    def damage(raw: bytes, _rng) -> bytes:
        record = json.loads(raw)
        record[key] = value
        return json.dumps(record).encode()

    return damage


def _raw_value(key: str, text: str):
    """Put ``text`` verbatim as ``key``'s JSON value (for what json.dumps would not write)."""

    def damage(raw: bytes, _rng) -> bytes:
        record = json.loads(raw)
        record[key] = "@@"
        return json.dumps(record).encode().replace(b'"@@"', text.encode())

    return damage


def _non_utf8(raw: bytes, _rng) -> bytes:
    return raw.replace(b'"', b'"\xff\xfe', 1)


def _random_edit(raw: bytes, rng: random.Random) -> bytes:
    data = bytearray(raw)
    for _ in range(rng.randint(1, 8)):
        op, pos = rng.choice(("flip", "cut", "insert")), rng.randrange(max(1, len(data)))
        if op == "flip" and data:
            data[pos] = rng.randrange(256)
        elif op == "cut":
            del data[pos : pos + rng.randint(1, 20)]
        else:
            data[pos:pos] = bytes(rng.choice((b"\x00", b"\xc3", b"[", b"{", b'"', b"9e999", b"NaN", b"\xed\xa0\x80")))
    return bytes(data)


BYTE_CASES = {
    "non-utf8": _non_utf8,
    "empty": lambda raw, rng: b"",
    "truncated": lambda raw, rng: raw[: len(raw) // 2],
    "oversize": lambda raw, rng: raw.rstrip()[:-1] + b', "pad": "' + b"x" * (300 * 1024) + b'"}',
    "deep": lambda raw, rng: raw.rstrip()[:-1] + b', "deep": ' + _nested(DEEP).encode() + b"}",
    "deep-but-parses": lambda raw, rng: raw.rstrip()[:-1] + b', "deep": ' + _nested(500).encode() + b"}",
    "a list": lambda raw, rng: b"[1, 2, 3]",
    "nan": _raw_value("zz", "NaN"),
    "infinity": _raw_value("zz", "-Infinity"),
    "1e999": _raw_value("zz", "1e999"),
    "huge int": _raw_value("zz", "9" * 5000),
}

JOB_CASES = {
    **BYTE_CASES,
    "created string": _set("created", "yesterday"),
    "created 1e999": _raw_value("created", "1e999"),
    "created 1e300": _set("created", 1e300),
    "created negative": _set("created", -5),
    "created true": _set("created", True),
    "status time string": _set("status_history", [["Done", "noon"]]),
    "status time huge": _set("status_history", [["Done", 1e300]]),
    "unknown status": _set("status_history", [["Exploded", 1.0]]),
    "name number": _set("name", 5),
    "name 5000": _set("name", "n" * 5000),
    "form_data text": _set("form_data", "x"),
    "train_options list": _set("train_options", [1]),
    "sweep number": _set("sweep", 3),
    "group list": _set("group", ["a"]),
    "dataset summary stages text": _set("dataset", {"stages": "many"}),
    "error object": _set("error", {"x": 1}),
    "kind unknown": _set("kind", "experiment"),
}

MODEL_CASES = {
    **BYTE_CASES,
    "snapshots text": _set("snapshots", "x"),
    "snapshot entry number": _set("snapshots", [3]),
    "best_metric text": _set("best_metric", "high"),
    "last_epoch 1e300 ok": _set("last_epoch", 1e300),
    "options list": _set("options", [1]),
    "options epochs text": _set("options", {"epochs": "two"}),
}


def _seeded_edit(seed: int):
    return lambda raw, _rng: _random_edit(raw, random.Random(seed))


def _cases(named: dict, rounds: int) -> list:
    rng = random.Random(SEED)
    cases = [pytest.param(damage, id=name) for name, damage in named.items()]
    # each random case gets its own seed, drawn from SEED, so one can be re-run alone by its id
    cases += [pytest.param(_seeded_edit(rng.randrange(2**32)), id=f"random-{i}") for i in range(rounds)]
    return cases


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("DIGITS_MAX_RECORD_BYTES", str(256 * 1024))  # oversize stays small; 100k deep fits
    root = tmp_path / "jobs"
    root.mkdir()
    return root, _make_jobs(root)


def _damage(path: Path, damage) -> bytes:
    raw = damage(path.read_bytes(), None)
    path.write_bytes(raw)
    return raw


def _check_everything(root: Path, jobs: dict[str, Job], capsys, *, damaged: Path, unreadable: bool | None) -> dict:
    """Start an app on ``root`` and go through every listing; returns /index.json."""
    victim = jobs["victim"]
    before = damaged.read_bytes()
    app = create_app(root, testing=True)  # starts its scheduler: its recovery reads every job.json
    try:
        client = app.test_client()
        home = client.get("/")
        assert home.status_code == 200, home.get_data(as_text=True)[-500:]
        page = home.get_data(as_text=True)
        assert victim.id in page
        index = client.get("/index.json")
        assert index.status_code == 200
        data = index.get_json()
        rows = {r["id"]: r for r in data["datasets"] + data["models"]}
        broken = {r["id"]: r for r in data["unreadable"]}
        assert victim.id in rows or victim.id in broken
        assert jobs["model"].id in rows and jobs["dataset"].id in rows  # the others work
        assert rows[jobs["model"].id]["unreadable"] is None
        flagged = broken.get(victim.id) or (rows.get(victim.id) or {}).get("unreadable")
        if unreadable:
            assert flagged, f"{damaged.name} not reported"
        if flagged:
            assert flagged["file"] == str(damaged) and flagged["reason"]
            assert "Unreadable" in page and damaged.name in page
        listed = client.get("/api/jobs")
        assert listed.status_code == 200
        assert victim.id in {r["id"] for r in listed.get_json()}
        for url in (
            f"/jobs/{victim.id}",
            f"/models/{victim.id}",
            f"/models/{victim.id}.json",
            f"/models/{victim.id}/metrics.json",
        ):
            answer = client.get(url)
            assert answer.status_code in (200, 302, 409), (url, answer.status_code)
            if answer.status_code == 409:
                assert damaged.name in answer.get_data(as_text=True)
        assert client.get(f"/models/{jobs['model'].id}").status_code == 200
        assert client.get(f"/datasets/{jobs['dataset'].id}").status_code == 200
    finally:
        app.extensions["digits"]["scheduler"].shutdown()
    capsys.readouterr()
    for command in (["model", "list"], ["model", "list", "--json"], ["dataset", "list"]):
        assert digits_main(["--jobs-dir", str(root), *command]) == 0, command
        out = capsys.readouterr().out
        if command[0] == "model" or flagged and broken:
            assert victim.id in out, command
        if command == ["model", "list", "--json"]:
            json.loads(out)
    assert damaged.read_bytes() == before  # reading never rewrites a file it could not parse
    return data


@pytest.mark.parametrize("damage", _cases(JOB_CASES, 12))
def test_a_damaged_job_json_is_listed_unreadable_never_fatal(folder, damage, capsys):
    root, jobs = folder
    path = jobs["victim"].path / "job.json"
    _damage(path, damage)
    try:
        Job.load(path.parent)
        readable = True
    except Exception:  # noqa: BLE001 - whatever the loader says, the listings must cope
        readable = False
    _check_everything(root, jobs, capsys, damaged=path, unreadable=not readable)


@pytest.mark.parametrize("damage", _cases(MODEL_CASES, 8))
def test_a_damaged_model_json_is_reported_never_fatal(folder, damage, capsys):
    root, jobs = folder
    path = jobs["victim"].path / "model.json"
    _damage(path, damage)
    from digits_core.jobs.model import model_record_problem

    _check_everything(root, jobs, capsys, damaged=path, unreadable=model_record_problem(path.parent) is not None)


METRIC_LINES = [
    b'{"epoch": 3, "step": 30, "name": "loss", "value": \xff}\n',
    b'{"epoch": 3, "step": 30, "name": "loss", "value": 1e999}\n',
    b'{"epoch": 3, "step": 30, "name": "loss", "value": NaN}\n',
    b'{"epoch": ' + _nested(10_000).encode() + b"}\n",  # under the line limit: the nesting is what fails
    b'{"epoch": 3, "name": "' + b"x" * (200 * 1024) + b'"}\n',
    b"[1, 2]\n",
    b"\x00\x00\x00\n",
    b'{"epoch": 3, "step": 30}\n',  # no name
    b'{"epoch": 3, "step": 30, "name": "loss"}\n',  # no value
    b'{"step": 30, "name": "loss", "value": 1.0}\n',  # no epoch
    b'{"epoch": "three", "step": 30, "name": "loss", "value": 1.0}\n',
    b'{"epoch": 3, "step": 30, "name": "loss", "value": {"a": 1}}\n',
    b'{"epoch": 4, "step": 40, "na',  # a run killed mid-write
]


def test_bad_metrics_lines_are_skipped_and_counted(folder, capsys):
    root, jobs = folder
    path = jobs["victim"].path / "metrics.jsonl"
    with open(path, "ab") as handle:
        handle.write(b"".join(METRIC_LINES))
    from digits_core.engine.jobio import read_metrics
    from digits_core.jobs.model import read_metric_points

    read = read_metric_points(path.parent)
    assert read.skipped == len(METRIC_LINES) and len(read.points) == 4
    assert read_metrics(jobs["victim"]) == read.points  # the reader /compare and `digits model show` use
    _check_everything(root, jobs, capsys, damaged=path, unreadable=False)
    assert digits_main(["--jobs-dir", str(root), "model", "show", jobs["victim"].id]) == 0
    assert "val_loss" in capsys.readouterr().out


LABEL = {"kind": "class", "dtype": "int64", "shape": []}
DATASET_CASES = {
    **BYTE_CASES,
    "no feature shape": _set("feature", {"dtype": "uint8"}),
    "stages list": _set("stages", []),
}


@pytest.mark.parametrize("damage", _cases(DATASET_CASES, 4))
def test_a_damaged_dataset_json_is_reported_never_fatal(folder, damage, capsys):
    root, jobs = folder
    path = jobs["dataset"].path / "dataset" / "dataset.json"
    path.parent.mkdir()
    record = {"id": jobs["dataset"].id, "stages": {"train": {"count": 4}}, "workers": 1, "label": LABEL}
    path.write_text(json.dumps({**record, "feature": {"shape": [4, 4, 1], "dtype": "uint8"}}, indent=2))
    _damage(path, damage)
    from digits_core.jobs.health import dataset_record_problem

    problem = dataset_record_problem(jobs["dataset"].path)
    app = create_app(root, testing=True, start_scheduler=False)
    client = app.test_client()
    data = client.get("/index.json").get_json()
    row = next(r for r in data["datasets"] if r["id"] == jobs["dataset"].id)
    assert (row["unreadable"] is not None) == (problem is not None)
    if problem:
        assert row["unreadable"]["file"] == str(path)
    assert client.get(f"/datasets/{jobs['dataset'].id}").status_code in (200, 409)
    assert client.get("/").status_code == 200
    assert digits_main(["--jobs-dir", str(root), "dataset", "list"]) == 0
    out = capsys.readouterr().out
    assert jobs["dataset"].id in out and (problem is None or "Unreadable" in out)


def test_compare_reads_a_non_utf8_metrics_file(folder):
    root, jobs = folder
    with open(jobs["victim"].path / "metrics.jsonl", "ab") as handle:
        handle.write(METRIC_LINES[0] + METRIC_LINES[3])
    app = create_app(root, testing=True, start_scheduler=False)
    answer = app.test_client().get(f"/compare.json?jobs={jobs['model'].id},{jobs['victim'].id}&metric=val_loss")
    assert answer.status_code == 200
    assert {row["job_id"] for row in answer.get_json()["trials"]} == {jobs["model"].id, jobs["victim"].id}


SWEEP_CASES = {
    **{name: BYTE_CASES[name] for name in ("non-utf8", "empty", "truncated", "oversize", "deep", "a list", "1e999")},
    "settings text": _set("settings", "fast"),
    "created string": _set("created", "noon"),
    "no mode": _set("settings", {"metric": "val_loss", "max_epochs": 2, "scheduler": "asha"}),  # 500 before
    "no group": _set("group", None),
}


def _sweep_record(sweep_id: str, name: str) -> dict:
    """A whole ``sweep.json`` as tune() writes it (what the sweep pages read)."""
    return {
        "id": sweep_id,
        "name": name,
        "group": name,
        "dataset": "20261206-000000-0001",
        "network": "lenet",
        "status": "Done",
        "settings": {"scheduler": "asha", "metric": "val_loss", "mode": "min", "max_epochs": 2},
        "search": ["learning_rate=choice(0.1,0.01)"],
        "trials": [{"learning_rate": 0.1}, {"learning_rate": 0.01}],  # the sampled points, as tune() writes them
        "created": 1.0,
    }


@pytest.mark.parametrize("damage", [pytest.param(d, id=name) for name, d in SWEEP_CASES.items()])
def test_a_damaged_sweep_json_is_reported_never_fatal(folder, damage, capsys):
    from digits_core.jobs.readers import UnreadableRecordError
    from digits_core.sweeps.record import read_sweep_record, write_sweep_record

    root, jobs = folder
    sweep = root / ".sweeps" / "20261206-000000-beef"
    sweep.mkdir(parents=True)
    good = _sweep_record("20261206-000000-cafe", "g")
    (root / ".sweeps" / good["id"]).mkdir()
    write_sweep_record(root / ".sweeps" / good["id"], good)
    write_sweep_record(sweep, _sweep_record(sweep.name, "s"))
    path = sweep / "sweep.json"
    read_sweep_record(sweep)  # whole, it reads
    before = _damage(path, damage)
    with pytest.raises(UnreadableRecordError) as info:
        read_sweep_record(sweep)
    assert info.value.file == path and info.value.reason
    app = create_app(root, testing=True, start_scheduler=False)
    client = app.test_client()
    for url in (f"/sweeps/{sweep.name}", f"/sweeps/{sweep.name}.json"):
        answer = client.get(url)
        assert answer.status_code == 409 and "sweep.json" in answer.get_data(as_text=True)
    assert client.get("/").status_code == 200
    capsys.readouterr()
    assert digits_main(["--jobs-dir", str(root), "sweep", "list"]) == 0
    out = capsys.readouterr().out
    assert sweep.name in out and "Unreadable" in out and str(path) in out
    assert good["id"] in out and "asha" in out  # the other sweep is listed as before
    assert digits_main(["--jobs-dir", str(root), "sweep", "show", sweep.name]) != 0  # an error naming it, no traceback
    assert "sweep.json" in capsys.readouterr().err
    assert path.read_bytes() == before


def test_a_resume_drops_later_and_damaged_metric_lines_without_crashing(tmp_path):
    from digits_core.jobs.model import drop_metric_points_after, read_metric_points

    record_metrics(tmp_path, 1.0, 10, {"loss": 0.9})
    record_metrics(tmp_path, 2.0, 20, {"loss": 0.8})
    with open(tmp_path / "metrics.jsonl", "ab") as handle:
        handle.write(b"".join(METRIC_LINES))
    drop_metric_points_after(tmp_path, 10)
    read = read_metric_points(tmp_path)
    assert [(p["step"], p["value"]) for p in read.points] == [(10, 0.9)] and read.skipped == 0
