"""Deletes that know what depends on them (issue 27), through the Flask test client (no TensorFlow).

A dataset that models were trained on is refused deletion with the list of those models, unless
the caller confirms deleting them too (``?cascade=1`` in the API, the dataset page's second
button); the home page's bulk delete refuses a dataset whose models are not ticked with it.
The browser side (a running job deleted from its page) is in ``tests/test_ui_workday.py``.
"""

from __future__ import annotations

import html

import pytest

from digits_core.jobs import Job, JobStatus, JobStore


@pytest.fixture
def jobs(app):
    folder = app.extensions["digits"]["jobs_dir"]
    ds = Job.create("dataset", "digits", jobs_dir=folder, plugin_id="image-classification")
    ds.set_status(JobStatus.RUNNING)
    ds.set_status(JobStatus.DONE)
    other = Job.create("dataset", "other", jobs_dir=folder, plugin_id="image-classification")
    models = []
    for name in ("lenet a", "lenet b"):
        job = Job.create("model", name, jobs_dir=folder, dataset_id=ds.id, train_options={"network": "lenet"})
        job.set_status(JobStatus.RUNNING)
        job.set_status(JobStatus.DONE)
        models.append(job)
    unrelated = Job.create("model", "elsewhere", jobs_dir=folder, dataset_id=other.id)
    return {"store": JobStore(folder), "dataset": ds, "models": models, "unrelated": unrelated}


def _ids(store):
    return {job.id for job in store.list()}


def test_api_refuses_a_dataset_with_models_then_cascades(client, token, jobs):
    store, ds, models = jobs["store"], jobs["dataset"], jobs["models"]
    before = _ids(store)
    resp = client.delete(f"/api/jobs/{ds.id}", headers={"X-CSRFToken": token})
    assert resp.status_code == 409
    error = resp.get_json()["error"]
    assert sorted(d["id"] for d in error["dependents"]) == sorted(m.id for m in models)
    assert "2 models depend on it" in error["message"] and "lenet a" in error["message"]
    assert _ids(store) == before  # nothing deleted
    resp = client.delete(f"/api/jobs/{ds.id}?cascade=1", headers={"X-CSRFToken": token})
    assert resp.status_code == 200, resp.get_json()
    assert sorted(d["id"] for d in resp.get_json()["also_deleted"]) == sorted(m.id for m in models)
    assert _ids(store) == before - {ds.id, *(m.id for m in models)}
    assert jobs["unrelated"].id in _ids(store)


def test_dataset_page_lists_the_models_and_deletes_them_only_when_confirmed(client, token, jobs):
    store, ds, models = jobs["store"], jobs["dataset"], jobs["models"]
    page = html.unescape(client.get(f"/datasets/{ds.id}").get_data(as_text=True))
    assert 'id="dependents"' in page and all(f"/models/{m.id}" in page for m in models)
    assert "Delete the dataset and 2 models" in page
    # A plain delete (a stale page, a script) is refused back on the dataset page, with the list.
    resp = client.post(f"/datasets/{ds.id}/delete", data={"csrf_token": token})
    assert resp.status_code == 302 and resp.headers["Location"].endswith(f"/datasets/{ds.id}")
    flashed = html.unescape(client.get(resp.headers["Location"]).get_data(as_text=True))
    assert "Cannot delete dataset digits" in flashed and "lenet b" in flashed
    assert ds.id in _ids(store)
    resp = client.post(f"/datasets/{ds.id}/delete", data={"csrf_token": token, "cascade": "1"})
    assert resp.status_code == 302
    home = html.unescape(client.get(resp.headers["Location"]).get_data(as_text=True))
    assert "Dataset deleted, and the 2 models trained on it." in home
    assert not {ds.id, *(m.id for m in models)} & _ids(store)
    # Once nothing depends on a dataset, its page has the one-step delete.
    other = next(j for j in store.list("dataset"))
    assert "Delete the dataset and 1 model<" in client.get(f"/datasets/{other.id}").get_data(as_text=True)
    assert client.post(f"/models/{jobs['unrelated'].id}/delete", data={"csrf_token": token}).status_code == 302
    assert 'id="dependents"' not in client.get(f"/datasets/{other.id}").get_data(as_text=True)


def test_bulk_delete_refuses_a_dataset_without_its_models(client, token, jobs):
    store, ds, models = jobs["store"], jobs["dataset"], jobs["models"]
    resp = client.post("/api/jobs/delete", json={"ids": [ds.id, models[0].id]}, headers={"X-CSRFToken": token})
    report = resp.get_json()
    assert [e["id"] for e in report["refused"]] == [ds.id]
    assert "1 model(s) not selected depend on it (lenet b)" in report["refused"][0]["reason"]
    assert [e["id"] for e in report["deleted"]] == [models[0].id]
    resp = client.post("/api/jobs/delete", json={"ids": [ds.id, models[1].id]}, headers={"X-CSRFToken": token})
    assert sorted(e["id"] for e in resp.get_json()["deleted"]) == sorted([ds.id, models[1].id])
    assert ds.id not in _ids(store)
