"""`make demo` end to end: ``scripts/demo.py`` builds and trains, a second run reuses it all, then it serves.

The detection part of the demo runs too (1 epoch of the 800-image set): only its completion is checked here.

The demo runs as ``make demo`` runs it (``python scripts/demo.py``) in a
subprocess, with fewer epochs, its data under a temporary folder
(``$DIGITS_DEMO_DATA``) and its own jobs folder. The third run is the real
server the demo ends with, queried over HTTP.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from live_server import running_server, server_env

from digits_core.jobs import JobStatus, JobStore

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "scripts" / "demo.py"
EPOCHS = ["--epochs-lenet", "5", "--epochs-unet", "10", "--epochs-detectnet", "1"]
TOKEN = "demo-token"
#: Validation accuracy of the LeNet after 5 epochs: 0.92 in a known-good run (chance: 0.10).
MIN_LENET_ACCURACY = 0.80
#: Margin over the Dice a constant predictor reaches; known-good run: 0.90 against a bound of 0.04.
DICE_MARGIN = 0.3


def run_demo(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, str(DEMO), "--jobs-dir", str(tmp / "jobs"), *EPOCHS, *args],
        cwd=tmp,
        env=server_env({"DIGITS_DEMO_DATA": str(tmp / "demo-data")}),
        capture_output=True,
        text=True,
        timeout=900,
    )
    result.stdout = result.stdout.replace("\r", "\n")
    assert result.returncode == 0, (
        f"demo failed ({result.returncode}):\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    )
    return result


def printed_ids(output: str) -> dict:
    """The job ids the demo prints, by dataset/model name."""
    return dict(re.findall(r"^  (demo [^:]+): (\d{8}-\d{6}-[0-9a-f]+)", output, re.M))


def files_state(*folders: Path) -> dict:
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for folder in folders for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The first demo run (builds everything): its folder, output and job ids."""
    tmp = tmp_path_factory.mktemp("demo")
    result = run_demo(tmp, "--no-serve")
    return {
        "tmp": tmp,
        "jobs": tmp / "jobs",
        "data": tmp / "demo-data",
        "output": result.stdout,
        "ids": printed_ids(result.stdout),
    }


def constant_predictor_dice(dataset_id: str, jobs: Path) -> float:
    """The best validation Dice a constant prediction reaches on the dataset (all foreground)."""
    from digits_core.datasets import open_dataset

    _features, masks = open_dataset(dataset_id, jobs).read_all("val")
    fraction = float(np.mean(np.asarray(masks) > 0))
    return 2 * fraction / (1 + fraction)  # 2|A∩P|/(|A|+|P|) with P = every pixel; all background gives 0


def test_first_run_builds_two_datasets_and_trains_two_useful_models(demo):
    ids, store = demo["ids"], JobStore(demo["jobs"])
    printed = {
        "demo digits (scikit-learn)",
        "demo sunnybrook (synthetic)",
        "demo lenet on digits",
        "demo unet on sunnybrook",
        "demo detectnet on digits",
    }
    assert set(ids) == printed, demo["output"]
    jobs = {job.name: job for job in store.list()}
    assert set(jobs) == printed | {"demo detection (synthetic digits)"}, sorted(jobs)
    assert all(job.status is JobStatus.DONE for job in jobs.values())
    assert {name: jobs[name].id for name in printed} == ids
    assert len(list((demo["data"] / "digits").rglob("*.png"))) == 1797
    assert list((demo["data"] / "sunnybrook").rglob("*.dcm"))

    from digits_core.engine import read_model_info

    lenet = read_model_info(jobs["demo lenet on digits"].path)
    assert lenet["final_metrics"]["val_accuracy"] >= MIN_LENET_ACCURACY, lenet["final_metrics"]
    unet = read_model_info(jobs["demo unet on sunnybrook"].path)
    bound = constant_predictor_dice(ids["demo sunnybrook (synthetic)"], demo["jobs"])
    assert bound < 0.5  # the left ventricle is a small part of each slice
    assert unet["final_metrics"]["val_dice"] >= bound + DICE_MARGIN, (unet["final_metrics"], bound)
    assert f"validation Dice {unet['final_metrics']['val_dice']:.3f}" in demo["output"]


def test_second_run_reuses_data_datasets_and_models(demo):
    before = files_state(demo["jobs"], demo["data"])
    result = run_demo(demo["tmp"], "--no-serve")
    assert printed_ids(result.stdout) == demo["ids"]
    assert "reusing existing files" in result.stdout
    assert "epoch" not in result.stdout  # no training progress
    assert files_state(demo["jobs"], demo["data"]) == before, "the second run rewrote files"


def test_demo_ends_with_a_real_server_that_answers_its_models(demo):
    ids = demo["ids"]

    def command(port):
        return [sys.executable, str(DEMO), "--jobs-dir", str(demo["jobs"]), "--port", str(port), *EPOCHS]

    with running_server(
        demo["jobs"],
        command=command,
        cwd=demo["tmp"],
        auth_token=TOKEN,
        env={"DIGITS_DEMO_DATA": str(demo["data"]), "DIGITS_AUTH_TOKEN": TOKEN},
        log_dir=demo["tmp"],
    ) as server:
        assert "reusing existing files" in server.output()
        index = server.get_json("/index.json")
        listed = {row["name"]: (row["id"], row["status"]) for row in index["datasets"] + index["models"]}
        assert listed == {job.name: (job.id, "Done") for job in JobStore(demo["jobs"]).list()}
        assert {name: listed[name][0] for name in ids} == ids
        # $DIGITS_AUTH_TOKEN reached the server the demo started.
        assert server.get("/index.json", token=False, headers={"Accept": "application/json"}).status == 401
        page = server.get(f"/models/{ids['demo unet on sunnybrook']}")
        assert page.status == 200 and "demo unet on sunnybrook" in page.text

        # The LeNet it trained classifies a scan of each digit through the JSON API.
        lenet = ids["demo lenet on digits"]
        inputs = [str(sorted((demo["data"] / "digits" / str(d)).iterdir())[-1]) for d in range(10)]
        resp = server.request(f"/api/models/{lenet}/infer", method="POST", data={"inputs": inputs}, timeout=300)
        assert resp.status == 200, f"{resp.text[:2000]}\n{server.describe()}"
        results = resp.json()["results"]
        assert results["errors"] == [] and results["model"]["id"] == lenet
        top1 = {Path(s["input_id"]).parent.name: s["top"][0]["label"] for s in results["samples"]}
        assert len(top1) == 10
        assert sum(truth == label for truth, label in top1.items()) >= 7, top1
        assert server.stop() == 0, server.describe()
