"""Generic datasets end to end (issue 19): dataset → train 1 epoch on tiny data → inference through the view.

Each workflow goes through the CLI (``digits dataset create`` and ``digits
infer``, in process) and the Python API on real files, a real LMDB and real
TensorFlow training.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from digits_core.cli import main as digits

pytestmark = pytest.mark.slow


def _brightness_images(folder, n=24, size=8):
    """Gray images of uniform brightness b; targets (b/255, 1 - b/255)."""
    folder.mkdir(parents=True)
    rows = ["path,bright,dark"]
    for i in range(n):
        level = int(i * 255 / (n - 1))
        Image.fromarray(np.full((size, size), level, np.uint8)).save(folder / f"b{i:02d}.png")
        rows.append(f"b{i:02d}.png,{level / 255:.6f},{1 - level / 255:.6f}")
    return rows


def test_image_regression_cli_and_api_to_regression_view(tmp_path, capsys):
    from digits_core import infer, open_dataset, train

    jobs = str(tmp_path / "jobs")
    rows = _brightness_images(tmp_path / "imgs")
    (tmp_path / "targets.csv").write_text("\n".join(rows) + "\n")
    assert digits(["--jobs-dir", jobs, "dataset", "create", "image-regression", "--name", "bright", "--json",
                   "--image-folder", str(tmp_path / "imgs"), "--targets-file", str(tmp_path / "targets.csv"),
                   "--image-type", "grayscale", "--width", "8", "--height", "8", "--val-percent", "25"]) == 0
    dataset_id = json.loads(capsys.readouterr().out)["id"]
    with open_dataset(dataset_id, jobs_dir=jobs) as ds:
        assert ds.label_kind == "regression" and ds.userdata["target_names"] == ["bright", "dark"]
    model = train(dataset_id, "regression", name="r", epochs=1, batch_size=8, jobs_dir=jobs, seed=1)
    # CLI inference on a list file with true values: the regression view's JSON
    (tmp_path / "val.txt").write_text("imgs/b03.png 0.3913,0.6087\nimgs/b20.png 0.8696,0.1304\n")
    assert digits(["--jobs-dir", jobs, "infer", "--model", model.id, str(tmp_path / "val.txt"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["view"] == "regression"
    targets = report["samples"][0]["view"]["targets"]
    assert [t["name"] for t in targets] == ["bright", "dark"] and targets[0]["true"] == pytest.approx(0.3913)
    assert targets[0]["error"] == pytest.approx(targets[0]["predicted"] - 0.3913)
    assert report["view_summary"]["summary"]["labelled"] == 2
    # API through the plugin's own inference form (a targets file = labelled inputs), HTML report
    result = infer(model.id, form_data={"targets_file": str(tmp_path / "targets.csv"),
                                                       "list_root": str(tmp_path / "imgs")}, jobs_dir=jobs)
    assert len(result.samples) == 24 and result.samples[0].input_id.endswith("b00.png")
    html = result.to_html()
    assert html.count('class="dvg-sample"') == 24 and html.count("<circle") == 48
    assert "dvg-mae" in html
