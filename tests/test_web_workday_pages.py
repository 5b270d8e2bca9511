"""Small things a DIGITS user notices on the pages (issue 27), through the Flask test client (no TensorFlow)."""

from __future__ import annotations

import json
import os
import re

import pytest

from digits_core.jobs import Job, JobStatus
from digits_core.web.helpers import format_shape


def test_a_free_dimension_reads_any_not_none():
    assert format_shape([None, 5]) == "any × 5"
    assert format_shape([32, 32, 1]) == "32 × 32 × 1"
    assert format_shape(None) == ""


def test_the_general_image_plugins_come_first_in_the_new_dataset_menu(client):
    page = client.get("/").get_data(as_text=True)
    menu = re.findall(r'href="/datasets/new/([^"]+)"', page)
    assert menu[0] == "image-classification", menu
    if "dicomweb-segmentation" in menu:
        assert menu.index("dicomweb-segmentation") > menu.index("object-detection")


@pytest.mark.parametrize(
    ("task", "view"),
    [
        ("detection", "bounding-boxes"),
        ("segmentation", "image-segmentation"),
        ("regression", "regression"),
        ("classification", "image-classification"),
    ],
)
def test_the_model_page_preselects_the_view_of_its_task(app, client, task, view):
    jobs = app.extensions["digits"]["jobs_dir"]
    job = Job.create("model", "m", jobs_dir=jobs, dataset_id="gone", train_options={"network": "lenet"})
    job.set_status(JobStatus.RUNNING)
    job.set_status(JobStatus.DONE)
    (job.path / "model.json").write_text(json.dumps({"task": task}))
    (job.path / "snapshots").mkdir()
    (job.path / "snapshots" / "epoch-001.keras").write_bytes(b"k")
    page = client.get(f"/models/{job.id}").get_data(as_text=True)
    assert re.search(rf'<option value="{view}"\s+selected>', page), re.findall(
        r'<option value="[^"]+"\s+selected>', page
    )


def test_job_pages_show_durations_run_time_folder_and_size(app, client):
    jobs = app.extensions["digits"]["jobs_dir"]
    job = Job.create("model", "m", jobs_dir=jobs, dataset_id="gone", train_options={"network": "lenet"})
    job.set_status(JobStatus.RUNNING)
    job.set_status(JobStatus.DONE)
    history = job.data["status_history"]
    history[1][1] = history[0][1] + 65  # Running for 1 min 5 s... (Initialized lasted until then)
    history[2][1] = history[1][1] + 3725  # ... then Done after 1 h 2 min 5 s
    job.save()
    (job.path / "big.bin").write_bytes(b"x" * 3000)
    page = client.get(f"/models/{job.id}").get_data(as_text=True)
    rows = re.findall(r'<td class="num">([^<]*)</td></tr>', page.split('id="status-history"')[1].split("</table>")[0])
    assert [r.strip() for r in rows] == ["1m 05s", "1h 02m 05s", ""]
    facts = page.split('id="job-facts"')[1].split("</table>")[0]
    assert "1h 02m 05s" in facts and str(job.path) in facts and "KB" in facts


def test_notes_are_kept_with_the_job_and_shown_on_its_page(app, client, token):
    jobs = app.extensions["digits"]["jobs_dir"]
    model = Job.create("model", "m", jobs_dir=jobs, dataset_id="gone", train_options={"network": "lenet"})
    dataset = Job.create("dataset", "d", jobs_dir=jobs, plugin_id="image-classification")
    for job, page in ((model, f"/models/{model.id}"), (dataset, f"/datasets/{dataset.id}")):
        resp = client.post(page + "/notes", data={"csrf_token": token, "notes": "lr 0.05 <b>diverged</b>\r\n"})
        assert resp.status_code == 302 and resp.headers["Location"].endswith(page + "#notes")
        assert Job.load(job.path).data["notes"] == "lr 0.05 <b>diverged</b>"
        html = client.get(page).get_data(as_text=True)
        assert "lr 0.05 &lt;b&gt;diverged&lt;/b&gt;</textarea>" in html and "Notes saved." in html
    resp = client.post(f"/models/{model.id}/notes", data={"csrf_token": token, "notes": "x" * 10_001})
    assert "Notes not saved: 10001 characters" in client.get(resp.headers["Location"]).get_data(as_text=True)
    assert Job.load(model.path).data["notes"] == "lr 0.05 <b>diverged</b>"


def test_stored_results_are_listed_newest_first_served_and_deleted(app, client, token):
    """What *Test the model* stores (the worker's answer is written here by hand: no TensorFlow)."""
    from digits_core.web.inference_results import results_dir, store_result

    jobs = app.extensions["digits"]["jobs_dir"]
    job = Job.create("model", "m", jobs_dir=jobs, dataset_id="gone", train_options={"network": "lenet"})
    (job.path / "snapshots").mkdir()
    (job.path / "snapshots" / "epoch-001.keras").write_bytes(b"k")
    record = {
        "view_id": "image-classification",
        "view_title": "Classification",
        "info": {"epoch": 1},
        "fragments": {
            "header": "",
            "summary": "<p>acc</p>",
            "samples": ['<div>first <script nonce="digits-csp-nonce">1</script></div>'],
        },
        "json": {"errors": [{"input": "bad.png", "error": "unreadable"}]},
        "inputs": "a.png",
        "samples": 1,
    }
    older = store_result(job, record)
    newer = store_result(job, {**record, "inputs": "b.png"})
    (results_dir(job) / ".writing-20990101-000000-abcdef").mkdir()  # a write in progress is never listed
    assert sorted(p.name for p in results_dir(job).iterdir() if not p.name.startswith(".")) == sorted([older, newer])
    listed = client.get(f"/models/{job.id}.json").get_json()["inference_results"]
    assert [r["id"] for r in listed] == [newer, older]  # stored within one second too
    page = client.get(f"/models/{job.id}").get_data(as_text=True)
    assert page.index(f'data-result-id="{listed[0]["id"]}"') < page.index(f'data-result-id="{listed[1]["id"]}"')
    shown = client.get(f"/models/{job.id}/inference/{older}")
    html = shown.get_data(as_text=True)
    assert shown.status_code == 200 and "first" in html and "bad.png" in html and "a.png" in html
    nonce = re.search(r'<script nonce="([^"]+)">1</script>', html).group(1)
    assert nonce != "digits-csp-nonce"  # a stored fragment's inline script gets the nonce of the page showing it
    assert (
        client.get(f"/models/{job.id}/inference/{older}", headers={"Accept": "application/json"}).get_json()["html"][
            "summary"
        ]
        == "<p>acc</p>"
    )
    for bad in ("nope", "../../job", ".writing-20990101-000000-abcdef"):
        assert client.get(f"/models/{job.id}/inference/{bad}").status_code == 404, bad
    gone = client.post(f"/models/{job.id}/inference/{older}/delete", data={"csrf_token": token})
    assert gone.status_code == 303 and not (results_dir(job) / older).exists()
    assert client.get(f"/models/{job.id}/inference/{older}").status_code == 404


def test_a_model_keeps_its_newest_results_and_prunes_the_rest(app, client):
    """Storing past ``DIGITS_KEEP_RESULTS`` deletes the oldest; 0 keeps all; a dead server's leftovers go."""
    from digits_core.web.inference_results import results_dir, store_result

    jobs = app.extensions["digits"]["jobs_dir"]
    job = Job.create("model", "m", jobs_dir=jobs, dataset_id="gone", train_options={"network": "lenet"})
    record = {"view_id": "image-classification", "view_title": "Classification", "fragments": {}, "samples": 0}
    app.config["DIGITS_KEEP_RESULTS"] = 3
    with app.app_context():
        made = [store_result(job, {**record, "inputs": f"{i}.png"}) for i in range(5)]
    stored = sorted(p.name for p in results_dir(job).iterdir() if not p.name.startswith("."))
    assert stored == sorted(made[-3:])  # the newest three stay
    listed = client.get(f"/models/{job.id}.json").get_json()["inference_results"]
    assert [r["inputs"] for r in listed] == ["4.png", "3.png", "2.png"]
    stale = results_dir(job) / ".writing-20000101-000000-abcdef"
    stale.mkdir()
    os.utime(stale, (0, 0))  # left by a server that died mid-write, long ago
    fresh = results_dir(job) / ".writing-20990101-000000-abcdef"
    fresh.mkdir()  # a write in progress right now
    app.config["DIGITS_KEEP_RESULTS"] = 0
    with app.app_context():
        made.append(store_result(job, record))
    assert len([p for p in results_dir(job).iterdir() if not p.name.startswith(".")]) == 4
    assert not stale.exists() and fresh.exists()
    assert "keeps the newest" not in client.get(f"/models/{job.id}").get_data(as_text=True)
    app.config["DIGITS_KEEP_RESULTS"] = 4
    assert "keeps the newest 4" in client.get(f"/models/{job.id}").get_data(as_text=True)
