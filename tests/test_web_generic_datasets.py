"""Web UI: the generic data plugins' forms render, and posting them builds real datasets (issue 19)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from digits_core.jobs import JobStatus
from digits_core.web import create_app

FIELDS = {
    "image-regression": ("image_folder", "targets_file", "val_targets_file", "resize_mode"),
    "image-processing": ("feature_folder", "label_folder", "val_feature_folder", "image_type"),
    "numpy-arrays": ("features_file", "labels_file", "features_key", "class_labels_file"),
    "image-pairs": ("folder", "train_pairs", "same_percent", "resize_mode"),
}


@pytest.fixture
def app(tmp_path):
    app = create_app(tmp_path / "jobs", testing=True, max_dataset_jobs=2, data_roots=[str(tmp_path)])
    app.extensions["digits"]["scheduler"].poll_interval = 0.1
    yield app
    app.extensions["digits"]["scheduler"].shutdown()


def _token(client):
    return client.get("/api/csrf-token").get_json()["csrf_token"]


@pytest.mark.parametrize("plugin_id", sorted(FIELDS))
def test_forms_render_with_their_fields_and_are_in_the_menu(app, plugin_id):
    client = app.test_client()
    html = client.get(f"/datasets/new/{plugin_id}").get_data(as_text=True)
    for field in FIELDS[plugin_id]:
        assert f'name="{field}"' in html, field
    assert f"/datasets/new/{plugin_id}" in client.get("/").get_data(as_text=True)


def test_form_error_is_shown_next_to_the_field(app, tmp_path):
    client = app.test_client()
    resp = client.post(
        "/datasets/new/image-regression",
        data={"csrf_token": _token(client), "image_folder": str(tmp_path), "job_name": "r"},
    )
    assert resp.status_code == 200 and "targets_file" in resp.get_data(as_text=True)


@pytest.mark.slow
def test_posting_regression_and_processing_forms_builds_datasets(app, tmp_path):
    for i in range(6):
        Image.fromarray(np.full((6, 6, 3), 40 * i, np.uint8)).save(tmp_path / f"{i}.png")
        (tmp_path / "clean").mkdir(exist_ok=True)
        Image.fromarray(np.full((6, 6, 3), 40 * i + 5, np.uint8)).save(tmp_path / "clean" / f"{i}.png")
    (tmp_path / "t.csv").write_text("path,level\n" + "".join(f"{i}.png,{i}\n" for i in range(6)))
    client = app.test_client()
    forms = {
        "image-regression": {"image_folder": str(tmp_path), "targets_file": str(tmp_path / "t.csv")},
        "image-processing": {"feature_folder": str(tmp_path), "label_folder": str(tmp_path / "clean")},
    }
    for plugin_id, values in forms.items():
        resp = client.post(
            f"/datasets/new/{plugin_id}",
            data={
                "csrf_token": _token(client),
                "job_name": plugin_id,
                "job_workers": "1",
                "width": "6",
                "height": "6",
                "val_percent": "0",
                "seed": "0",
                "image_type": "color",
                "resize_mode": "squash",
                "encoding": "png",
                "jpg_quality": "90",
                **values,
            },
        )
        assert resp.status_code == 302, [l for l in resp.get_data(as_text=True).splitlines() if "error" in l.lower()]
        job_id = resp.headers["Location"].rsplit("/", 1)[1]
        job = app.extensions["digits"]["scheduler"].wait(job_id, 120)
        assert job.status is JobStatus.DONE, job.error
        data = client.get(f"/datasets/{job_id}.json").get_json()
        assert (
            data["info"]["label"]["kind"] == {"image-regression": "regression", "image-processing": "image"}[plugin_id]
        ), data
