"""Networks offered and accepted by dataset kind (issue 43): one rule in the network registry, the same at every door.

On a 3-D (volume) dataset only ``unet3d`` / ``unet2.5d`` are offered and accepted; on a 2-D dataset the volume
networks are neither. The New Model form preselects the kind's default network; the JSON API, the Python API and
the CLI refuse a network of the wrong kind on field ``network``, naming the dataset's kind, before any job exists.
"""

from __future__ import annotations

import html
import json
import re

import numpy as np
import pytest
from conftest import run_digits

from digits_core.engine.networks import default_network_for, network_kind_problem, networks_for_kind
from digits_core.errors import FormValidationError
from digits_core.jobs import JobStore
from digits_core.web.app import create_app


@pytest.fixture(scope="module")
def kinds(tmp_path_factory):
    """A web app over a jobs folder holding a tiny real volume dataset and a tiny real classification dataset."""
    from digits_core.datasets import create_dataset
    from digits_data_volumes.synth import generate

    root = tmp_path_factory.mktemp("network-kinds")
    synth = generate(root / "synth", cases=4, shape=(8, 16, 16), dicom=False)
    volume = create_dataset(
        "msd-volumes", {"data_folder": str(synth.task), "pct_val": 25}, jobs_dir=root / "jobs", workers=1
    )
    labels = np.arange(16) % 2
    np.save(root / "x.npy", (np.arange(16 * 8 * 8).reshape(16, 8, 8) % 255).astype(np.uint8))
    np.save(root / "y.npy", labels.astype(np.int64))
    classes = create_dataset(
        "numpy-arrays",
        {"features_file": str(root / "x.npy"), "labels_file": str(root / "y.npy"), "val_percent": 25},
        jobs_dir=root / "jobs",
        workers=1,
    )
    app = create_app(root / "jobs", start_scheduler=False, testing=True)
    client = app.test_client()
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    return root / "jobs", client, token, volume.id, classes.id


def test_the_rule_offers_volume_networks_on_volumes_only():
    assert networks_for_kind("volume") == ["unet3d", "unet2.5d"]
    for kind in ("classification", "segmentation", "detection", None):
        assert not {"unet3d", "unet2.5d"} & set(networks_for_kind(kind))
    assert default_network_for("volume") == "unet3d" and default_network_for("segmentation") == "unet"
    assert network_kind_problem("unet3d", "volume", "x") is None and network_kind_problem("lenet", "mask", "x") is None
    assert "classification dataset" in network_kind_problem("unet2.5d", "classification", "D1")


def _form_page(client, dataset_id):
    page = client.get(f"/models/new?dataset={dataset_id}").get_data(as_text=True)
    selected = re.search(r'<select[^>]*name="network"[^>]*>.*?</select>', page, re.S).group(0)
    chosen = re.search(r'<option selected value="([^"]+)"|<option value="([^"]+)" selected', selected)
    data = json.loads(html.unescape(re.search(r'data-options="([^"]*)"', page).group(1)))
    return [g for g in chosen.groups() if g][0], data


def test_the_form_preselects_and_offers_the_kinds_networks(kinds):
    _, client, _, volume_id, classes_id = kinds
    chosen, data = _form_page(client, volume_id)
    assert chosen == "unet3d"
    assert data["dataset_tasks"][volume_id] == "volume"
    offered = sorted(n for n, ks in data["network_tasks"].items() if "volume" in ks)
    assert offered == ["unet2.5d", "unet3d"]  # lenet, unet, custom code: not for a volume
    chosen, data = _form_page(client, classes_id)
    assert chosen == "lenet" and data["dataset_tasks"][classes_id] == "classification"
    assert "classification" not in data["network_tasks"]["unet3d"] + data["network_tasks"]["unet2.5d"]


@pytest.mark.parametrize(("which", "network", "kind"), [(3, "lenet", "volume"), (4, "unet3d", "classification")])
def test_the_json_api_refuses_the_wrong_kind_before_a_job_exists(kinds, which, network, kind):
    jobs_dir, client, token, *_ = kinds
    dataset_id = kinds[which]
    resp = client.post(
        "/api/models",
        json={"name": "m", "dataset": dataset_id, "network": network, "options": {}},
        headers={"X-CSRFToken": token},
    )
    assert resp.status_code == 400, resp.get_json()
    message = " ".join(resp.get_json()["error"]["fields"]["network"])
    assert network in message and f"{kind}" in message and "Unknown network" not in message
    assert JobStore(jobs_dir).list("model") == []


@pytest.mark.parametrize(("which", "network", "kind"), [(3, "lenet", "volume"), (4, "unet3d", "classification")])
def test_the_python_api_refuses_the_wrong_kind_before_a_job_exists(kinds, which, network, kind):
    from digits_core.engine import train

    jobs_dir = kinds[0]
    with pytest.raises(FormValidationError) as caught:
        train(kinds[which], network, "m", jobs_dir=jobs_dir, epochs=1)
    assert kind in caught.value.errors["network"][0]
    assert JobStore(jobs_dir).list("model") == []


def test_the_cli_refuses_a_2d_network_on_a_volume_dataset(kinds):
    jobs_dir, _, _, volume_id, _ = kinds
    result = run_digits("--jobs-dir", str(jobs_dir), "train", "--dataset", volume_id, "--network", "lenet")
    assert result.returncode == 2, result.stderr
    assert "network" in result.stderr and "volume" in result.stderr and "unet3d" in result.stderr
    assert JobStore(jobs_dir).list("model") == []


def test_the_form_explains_a_kind_no_network_is_made_for(tmp_path):
    from digits_core.jobs import Job, JobStatus

    app = create_app(tmp_path, start_scheduler=False, testing=True)
    raw = Job.create("dataset", "raw arrays", jobs_dir=tmp_path, plugin_id="numpy-arrays")
    raw.update(dataset={"label": {"kind": "raw"}})
    raw.set_status(JobStatus.DONE)
    chosen, data = _form_page(app.test_client(), raw.id)
    assert chosen == "__custom__" and data["dataset_tasks"][raw.id] == "raw"
    page = app.test_client().get(f"/models/new?dataset={raw.id}").get_data(as_text=True)
    assert "No built-in or plugin network is made for raw datasets" in page
