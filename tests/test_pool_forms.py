"""The web forms of active learning (issue 46): the pool page's *Run a round* / *Score only* and *New pool*.

Flask app, real pool and model records, no TensorFlow: the forms hand their fields to the functions of the JSON
API, so a bad value is refused by the same gate with a message on the field it names, nothing is queued or made;
a good one queues exactly the run the API queues.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from labeling_support import model_record, three_image_pool

from digits_core.jobs import JobStatus, JobStore
from digits_core.web.app import create_app


@pytest.fixture
def setup(tmp_path):
    pool, jobs, data = three_image_pool(tmp_path)
    models = {}
    for name, record in (
        ("unet", {"task": "segmentation"}),
        ("lenet", {"task": "classification"}),
        ("vnet", {"task": "segmentation", "kind": "volume"}),
        ("untrained", None),
    ):
        models[name] = model_record(jobs, name, record).id
    app = create_app(jobs, start_scheduler=False, testing=True, secret_key="k", data_roots=[tmp_path / "roots"])
    client = app.test_client()
    client.environ_base["HTTP_X_CSRFTOKEN"] = client.get("/api/csrf-token").get_json()["csrf_token"]
    return client, pool, models, jobs, data


def _field_errors(html: str) -> dict[str, str]:
    return dict(re.findall(r'<div class="field-error" data-for="([a-z_]+)">([^<]*)</div>', html))


def test_the_model_picker_lists_only_models_a_run_accepts(setup):
    client, pool, models, _, _ = setup
    html = client.get(f"/pools/{pool.id}").get_data(as_text=True)
    form = html[html.index('id="pool-run-form"') :]
    picker = form[form.index('name="model"') : form.index("</select>")]
    assert f'value="{models["unet"]}"' in picker
    for other in ("lenet", "vnet", "untrained"):
        assert models[other] not in picker
    assert 'value="round"' in form and 'value="score"' in form  # the two buttons


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"strategy": "vibes"}, "strategy", "one of random, entropy, variance, tta"),
        ({"count": "0"}, "count", "an integer from 1 to 100000"),
        ({"passes": "1"}, "passes", "an integer from 2 to 64"),
        ({"top_fraction": "1.5"}, "top_fraction", "a number greater than 0 and at most 1"),
        ({"top_fraction": "nan"}, "top_fraction", "a number greater than 0 and at most 1"),
        ({"top_fraction": "0"}, "top_fraction", "a number greater than 0 and at most 1"),
        ({"model": "lenet"}, "model", "is a classification model; pool"),
        ({"model": ""}, "model", "the model job id is required"),
    ],
)
def test_a_bad_value_is_refused_on_its_field_and_nothing_is_queued(setup, fields, field, message):
    client, pool, models, jobs, _ = setup
    form = {"action": "round", "model": models["unet"], "strategy": "entropy", "count": "2", "retrain": "y"}
    form.update({k: models.get(v, v) if k == "model" else v for k, v in fields.items()})
    answer = client.post(f"/pools/{pool.id}/run", data=form)
    assert answer.status_code == 400
    errors = _field_errors(answer.get_data(as_text=True))
    assert list(errors) == [field] and message in errors[field]
    job = JobStore(jobs).get(pool.id)
    assert job.status is JobStatus.DONE and not job.data.get("pool_run")


def test_the_buttons_queue_the_run_the_api_queues(setup):
    client, pool, models, jobs, _ = setup
    form = {"action": "score", "model": models["unet"], "strategy": "tta", "count": "3", "passes": "4"}
    page = client.get(f"/pools/{pool.id}").get_data(as_text=True)
    more = page[page.index('id="pool-run-more"') :]
    more = more[: more.index("</details>")]
    assert 'name="top_fraction"' in more and 'value="1.0"' in more  # among the details, 1 (the mean) by default
    answer = client.post(f"/pools/{pool.id}/run", data={**form, "top_fraction": "0.05"})
    assert answer.status_code == 302 and answer.headers["Location"].endswith(f"/pools/{pool.id}#pool-run")
    run = JobStore(jobs).get(pool.id).data["pool_run"]
    assert JobStore(jobs).get(pool.id).status is JobStatus.WAITING
    assert {k: run[k] for k in ("action", "model", "strategy", "count", "passes", "top_fraction", "retrain")} == {
        "action": "score",
        "model": models["unet"],
        "strategy": "tta",
        "count": 3,
        "passes": 4,
        "top_fraction": 0.05,
        "retrain": False,  # an unticked box
    }
    page = client.get(f"/pools/{pool.id}").get_data(as_text=True)
    assert 'data-status="Waiting"' in page and 'id="pool-run-progress"' in page
    assert re.search(r'id="pool-run-round"[^>]*disabled', page)  # one run at a time
    again = client.post(f"/pools/{pool.id}/run", data={**form, "action": "round"})
    assert again.status_code == 400 and "wait for its run to end" in again.get_data(as_text=True)
    via_api = client.post(f"/api/pools/{pool.id}/runs", json={"action": "score", "model": models["unet"]})
    assert via_api.status_code == 400  # the same gate: already waiting


def test_new_pool_form_makes_the_pool_the_api_makes_and_names_a_bad_field(setup, tmp_path):
    client, _, _, jobs, data = setup
    before = {j.id for j in JobStore(jobs).list("pool")}
    page = client.get("/pools").get_data(as_text=True)
    assert 'href="/pools/new"' in page and "hearts" in page
    assert client.get("/pools/new").status_code == 200
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    refused = client.post("/pools/new", data={"folder": str(outside)})
    assert refused.status_code == 400 and "data root" in refused.get_data(as_text=True)
    both = client.post("/pools/new", data={"folder": str(data), "dicomweb": "http://pacs.example/dicom-web"})
    assert both.status_code == 400
    assert "a pool is a folder or a DICOMweb server, not both" in _field_errors(both.get_data(as_text=True))["folder"]
    unknown = client.post("/pools/new", data={"dicomweb_server": "nope", "studies": "1.2.3\n1.2.4"})
    assert unknown.status_code == 400 and "&#34;nope&#34; is not a server" in unknown.get_data(as_text=True)
    volumes = client.post("/pools/new", data={"folder": str(data), "volumes": "y"})  # the box reaches the API's check
    assert volumes.status_code == 400
    assert f"{data.resolve()} holds no .npy volume" in volumes.get_data(as_text=True)  # only images: named
    assert {j.id for j in JobStore(jobs).list("pool")} == before  # nothing made by the refusals
    made = client.post("/pools/new", data={"folder": str(data), "name": "lv", "classes": "background, lv"})
    assert made.status_code == 302
    (new_id,) = {j.id for j in JobStore(jobs).list("pool")} - before
    assert made.headers["Location"].endswith(f"/pools/{new_id}")
    shown = client.get(f"/api/pools/{new_id}").get_json()
    assert shown["name"] == "lv" and shown["counts"]["unlabelled"] == 3
    from digits_core.labeling import load_pool

    assert load_pool(new_id, jobs).record()["class_labels"] == ["background", "lv"]
    np.save(data / "v.npy", np.zeros((2, 8, 10), np.float32))  # a folder volume pool through the Volumes box
    made = client.post("/pools/new", data={"folder": str(data), "name": "vols", "volumes": "y"})
    assert made.status_code == 302, made.get_data(as_text=True)
    record = load_pool(made.headers["Location"].rsplit("/", 1)[-1], jobs).record()
    assert record["dimensions"] == 3 and [c["source"]["path"] for c in record["candidates"].values()] == ["v.npy"]


def test_a_model_of_another_modality_is_not_offered_and_is_refused_before_anything_is_queued(setup):
    import json

    from synthetic_plugins import SyntheticLV

    from digits_core import registry
    from digits_core.datasets import create_dataset
    from digits_core.jobs.model import write_model_record
    from digits_core.submit.records import create_job_record

    client, pool, models, jobs, _ = setup
    registry.register(SyntheticLV)
    try:
        lv = create_dataset("synthetic-lv", {"count": 4, "val_count": 1, "size": 16}, workers=1, jobs_dir=jobs)
    finally:
        registry.unregister(SyntheticLV)
    info = jobs / lv.id / "dataset" / "dataset.json"
    data = json.loads(info.read_text())
    data.setdefault("userdata", {})["modality"] = "MR"
    info.write_text(json.dumps(data))
    mr = create_job_record("model", "mr-unet", jobs_dir=jobs)
    write_model_record(mr.path, {"job_id": mr.id, "task": "segmentation", "dataset_id": lv.id})
    with pool.changing() as record:
        record["modality"] = "ct"
    before = (pool.path / "pool.json").read_bytes()
    html = client.get(f"/pools/{pool.id}").get_data(as_text=True)
    picker = html[html.index('name="model"') : html.index("</select>")]
    assert mr.id not in picker and models["unet"] in picker  # a model whose dataset names no modality is offered
    said = f"pool {pool.id} holds ct images; model {mr.id} was trained on MR images"
    answer = client.post(f"/pools/{pool.id}/run", data={"action": "round", "model": mr.id, "count": "2"})
    assert answer.status_code == 400 and said in _field_errors(answer.get_data(as_text=True))["model"]
    api = client.post(f"/api/pools/{pool.id}/runs", json={"action": "score", "model": mr.id})
    assert api.status_code == 400 and f"model: {said}" in api.get_data(as_text=True)
    assert JobStore(jobs).get(pool.id).status is JobStatus.DONE  # nothing queued, nothing rewritten
    assert (pool.path / "pool.json").read_bytes() == before
    with pool.changing() as record:
        record["modality"] = "MR"  # the same modality in another case: offered
    html = client.get(f"/pools/{pool.id}").get_data(as_text=True)
    assert mr.id in html[html.index('name="model"') : html.index("</select>")]
