"""Active learning's doors without a model: the JSON API and pool page (Flask app, real pool records) and
``digits label`` on a folder pool (the command's own parser and handlers)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from digits_core.cli import main as digits
from digits_core.jobs import JobStatus, JobStore
from digits_core.web.app import create_app


@pytest.fixture
def folder(tmp_path):
    data = tmp_path / "roots" / "unlabelled"
    (data / "deeper").mkdir(parents=True)
    for i, rel in enumerate(("a.png", "b.png", "deeper/c.png")):
        Image.fromarray(np.full((8, 10), 40 * i, np.uint8), mode="L").save(data / rel)
    (data / "notes.txt").write_text("not an image")
    return data


@pytest.fixture
def client(tmp_path, folder):
    app = create_app(
        tmp_path / "jobs", start_scheduler=False, testing=True, secret_key="k", data_roots=[tmp_path / "roots"]
    )
    client = app.test_client()
    client.environ_base["HTTP_X_CSRFTOKEN"] = client.get("/api/csrf-token").get_json()["csrf_token"]
    return client


def test_api_pools_create_list_show_queue_and_runs(client, folder, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    Image.fromarray(np.zeros((8, 10), np.uint8), mode="L").save(outside / "x.png")
    refused = client.post("/api/pools", json={"folder": str(outside)})
    assert refused.status_code == 400 and "data root" in refused.get_data(as_text=True)
    bad = client.post("/api/pools", json={"folder": str(folder), "classes": "lv", "colour": 1})
    assert bad.status_code == 400
    text = bad.get_data(as_text=True)
    assert "classes" in text and "colour" in text
    assert JobStore(tmp_path / "jobs").list("pool") == []  # nothing was created by the refused requests

    made = client.post("/api/pools", json={"folder": str(folder), "name": "hearts", "classes": ["bg", "lv"]})
    assert made.status_code == 201, made.get_data(as_text=True)
    pool_id = made.get_json()["id"]
    assert made.get_json()["counts"]["unlabelled"] == 3  # the text file is no candidate
    assert [p["id"] for p in client.get("/api/pools").get_json()] == [pool_id]
    shown = client.get(f"/api/pools/{pool_id}").get_json()
    assert shown["source"] == {"kind": "folder", "root": str(folder.resolve())} and shown["queue"] == []
    page = client.get(f"/pools/{pool_id}")
    assert page.status_code == 200 and "hearts" in page.get_data(as_text=True)
    assert client.get(f"/api/pools/{pool_id}/queue").get_json() == []

    # a run naming a model that is not a model job: 404, nothing queued
    other = client.post(f"/api/pools/{pool_id}/runs", json={"action": "round", "model": pool_id})
    assert other.status_code == 404
    assert JobStore(tmp_path / "jobs").get(pool_id).status is JobStatus.DONE

    # files: only proposals/labels of the pool folder
    assert client.get(f"/pools/{pool_id}/files/pool.json").status_code == 404
    assert client.get(f"/pools/{pool_id}/files/labels/../../job.json").status_code == 404
    # another kind of job is no pool
    assert client.get("/api/pools/20990101-000000-abcd").status_code == 404


def test_runs_are_checked_then_queued(client, folder, tmp_path):
    from digits_core.jobs.model import write_model_record
    from digits_core.labeling.jobs import prepare_resume, prepare_run
    from digits_core.labeling.sources import create_folder_pool
    from digits_core.submit.records import create_job_record

    pool = create_folder_pool("p", folder, jobs_dir=tmp_path / "jobs")
    model = create_job_record("model", "m", jobs_dir=tmp_path / "jobs")
    untrained = client.post(f"/api/pools/{pool.id}/runs", json={"action": "score", "model": model.id})
    assert untrained.status_code == 400 and "has not started training" in untrained.get_data(as_text=True)
    classifier = create_job_record("model", "c", jobs_dir=tmp_path / "jobs")
    write_model_record(classifier.path, {"job_id": classifier.id, "task": "classification"})
    other_task = client.post(f"/api/pools/{pool.id}/runs", json={"action": "round", "model": classifier.id})
    assert f"model {classifier.id} is a classification model; pool {pool.id} holds segmentation" in (
        other_task.get_data(as_text=True)
    )
    write_model_record(model.path, {"job_id": model.id, "task": "segmentation"})  # as a trained one's says
    wrong = client.post(
        f"/api/pools/{pool.id}/runs", json={"action": "score", "model": model.id, "strategy": "vibes", "passes": 1}
    )
    assert wrong.status_code == 400
    text = wrong.get_data(as_text=True)
    assert "strategy" in text and "passes" in text
    typed = client.post(f"/api/pools/{pool.id}/runs", json={"action": "round", "model": model.id, "retrain": "no"})
    assert typed.status_code == 400 and "retrain: true or false" in typed.get_data(as_text=True)
    assert JobStore(tmp_path / "jobs").get(pool.id).status is JobStatus.DONE
    queued = client.post(f"/api/pools/{pool.id}/runs", json={"action": "score", "model": model.id, "count": 2})
    assert queued.status_code == 202, queued.get_data(as_text=True)
    job = JobStore(tmp_path / "jobs").get(pool.id)
    assert job.status is JobStatus.WAITING and job.data["pool_run"]["model"] == model.id
    again = client.post(f"/api/pools/{pool.id}/runs", json={"action": "score", "model": model.id})
    assert again.status_code == 400 and "Waiting" in again.get_data(as_text=True)  # one run at a time
    with pytest.raises(Exception, match="only an aborted or failed run is resumed"):
        prepare_resume(pool)
    job.finish(JobStatus.ABORTED, error="stopped")
    assert client.post(f"/api/pools/{pool.id}/resume").status_code == 202
    assert JobStore(tmp_path / "jobs").get(pool.id).status is JobStatus.WAITING
    with pytest.raises(Exception, match="action: one of score, round"):
        prepare_run(pool, "train", {"model": model.id})


def test_digits_label_on_a_folder(folder, tmp_path, capsys):
    jobs = str(tmp_path / "jobs")
    assert digits(["--jobs-dir", jobs, "label", "pool", str(folder), "--name", "hearts", "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["counts"]["unlabelled"] == 3
    assert digits(["--jobs-dir", jobs, "label", "list"]) == 0
    assert made["id"] in capsys.readouterr().out
    assert digits(["--jobs-dir", jobs, "label", "show", made["id"]]) == 0
    assert "unlabelled 3" in capsys.readouterr().out
    assert digits(["--jobs-dir", jobs, "label", "pool", str(tmp_path / "missing")]) == 1
    assert "missing does not exist" in capsys.readouterr().err
    # a label file for a candidate with nothing proposed yet is stored as version 1 (a command-line import)
    from digits_core.labeling import load_pool

    pool = load_pool(made["id"], jobs)
    cand = pool.candidates()[0]
    label = tmp_path / "label.png"
    Image.fromarray(np.ones((8, 10), np.uint8), mode="L").save(label)
    argv = ["--jobs-dir", jobs, "label", "accept", "--pool", pool.id, "--candidate", cand["id"], "--label", str(label)]
    assert digits([*argv, "--user", "ann"]) == 0
    assert pool.candidate(cand["id"])["labels"][0]["by"] == "ann"
    assert digits([*argv, "--base-version", "0"]) == 1  # stale: version 1 exists
    assert "version 1 was saved meanwhile by ann" in capsys.readouterr().err
    small = tmp_path / "small.png"
    Image.fromarray(np.ones((4, 4), np.uint8), mode="L").save(small)
    assert digits([*argv[:-1], str(small)]) == 1
    assert "is 4×4 pixels; its image is 10×8" in capsys.readouterr().err
    assert [e["version"] for e in pool.candidate(cand["id"])["labels"]] == [1]  # nothing stored by the refusals


def test_pool_page_charts_the_rounds_val_dice_against_labels(client, folder, tmp_path):
    from digits_core.labeling.sources import create_folder_pool

    pool = create_folder_pool("p", folder, jobs_dir=tmp_path / "jobs")
    assert "pool-rounds-chart" not in client.get(f"/pools/{pool.id}").get_data(as_text=True)
    for labels, dice in ((0, None), (4, 0.61), (9, 0.74)):
        number = pool.add_round({"strategy": "variance", "model_id": "m", "count": 5, "proposed": [], "labels": labels})
        pool.update_round(number, val_dice=dice)
    html = client.get(f"/pools/{pool.id}").get_data(as_text=True)
    assert 'id="pool-rounds-chart"' in html and html.count("<circle") == 2  # the round without a model is left out
    assert "0.7400" in html and ">variance</text>" in html


@pytest.fixture
def volume_folder(tmp_path):
    data = tmp_path / "roots" / "volumes"
    (data / "deeper").mkdir(parents=True)
    for rel in ("a.npy", "deeper/b.npy"):
        np.save(data / rel, np.zeros((3, 8, 10), np.float32))
    Image.fromarray(np.zeros((8, 10), np.uint8), mode="L").save(data / "slice.png")  # no candidate of a volume pool
    return data


def test_digits_label_pool_volumes_on_a_folder(volume_folder, folder, tmp_path, capsys):
    from digits_core.labeling import load_pool

    jobs = str(tmp_path / "jobs")
    assert digits(["--jobs-dir", jobs, "label", "pool", str(volume_folder), "--volumes", "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    record = load_pool(made["id"], jobs).record()
    assert record["dimensions"] == 3 and record["source"] == {"kind": "folder", "root": str(volume_folder.resolve())}
    assert sorted(c["source"]["path"] for c in record["candidates"].values()) == ["a.npy", "deeper/b.npy"]
    # a folder of 2-D images only: refused naming it, nothing made
    assert digits(["--jobs-dir", jobs, "label", "pool", str(folder), "--volumes"]) == 1
    assert f"{folder.resolve()} holds no .npy volume" in capsys.readouterr().err
    (volume_folder / "flat.npy").write_bytes(np.zeros((8, 10)).tobytes())  # no .npy header: named
    assert digits(["--jobs-dir", jobs, "label", "pool", str(volume_folder), "--volumes"]) == 1
    assert "flat.npy: not a readable .npy volume" in capsys.readouterr().err
    np.save(volume_folder / "flat.npy", np.zeros((8, 10)))  # a 2-D array: named
    assert digits(["--jobs-dir", jobs, "label", "pool", str(volume_folder), "--volumes"]) == 1
    assert "flat.npy: a volume is a D×H×W array, not shape (8, 10)" in capsys.readouterr().err
    assert [j.id for j in JobStore(jobs).list("pool")] == [made["id"]]


def test_api_pools_volumes_on_a_folder(client, volume_folder, folder, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    np.save(outside / "v.npy", np.zeros((3, 8, 10), np.float32))
    refused = client.post("/api/pools", json={"folder": str(outside), "volumes": True})
    assert refused.status_code == 400 and "outside the server's data roots" in refused.get_data(as_text=True)
    images = client.post("/api/pools", json={"folder": str(folder), "volumes": True})
    assert images.status_code == 400
    assert f"{folder.resolve()} holds no .npy volume" in images.get_data(as_text=True)
    assert JobStore(tmp_path / "jobs").list("pool") == []  # nothing was created by the refusals

    made = client.post("/api/pools", json={"folder": str(volume_folder), "volumes": True, "classes": ["bg", "lv"]})
    assert made.status_code == 201, made.get_data(as_text=True)
    assert made.get_json()["counts"]["unlabelled"] == 2  # the PNG is no volume candidate
    from digits_core.labeling import load_pool

    record = load_pool(made.get_json()["id"], tmp_path / "jobs").record()
    assert record["dimensions"] == 3
    assert sorted(c["source"]["path"] for c in record["candidates"].values()) == ["a.npy", "deeper/b.npy"]
