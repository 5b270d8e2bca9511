"""Generic datasets end to end (issue 19): dataset → train 1 epoch on tiny data → inference through the view.

Each workflow goes through the CLI (``digits dataset create`` and ``digits
infer``, in process) and the Python API on real files, a real LMDB and real
TensorFlow training. The regression and image-output models are module fixtures in one jobs folder:
the browser test runs both from their model pages on one ``digits serve`` and checks their results
pages at 375 px.
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from digits_core.cli import main as digits

pytestmark = pytest.mark.slow
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "networks"


@contextmanager
def _web_client(jobs, root):
    """The Flask test client of an app with its real inference worker (closed after), and a CSRF token."""
    from digits_core.web import create_app

    app = create_app(jobs, start_scheduler=False, testing=True, inference_timeout=300, data_roots=[str(root)])
    client = app.test_client()
    try:
        yield client, client.get("/api/csrf-token").get_json()["csrf_token"]
    finally:
        app.extensions["digits"]["inference_worker"].close()


def _api_infer(client, token, model_id, body):
    """POST /api/models/ID/infer: its JSON answer."""
    resp = client.post(f"/api/models/{model_id}/infer", json=body, headers={"X-CSRFToken": token})
    assert resp.status_code == 200, resp.get_data(as_text=True)[:2000]
    return resp.get_json()


def _infer_on_the_web(jobs, root, model_id, body):
    """POST /api/models/ID/infer through the Flask test client (the app's real inference worker)."""
    with _web_client(jobs, root) as (client, token):
        return _api_infer(client, token, model_id, body)


def _brightness_images(folder, n=24, size=8):
    """Gray images of uniform brightness b; targets (b/255, 1 - b/255)."""
    folder.mkdir(parents=True)
    rows = ["path,bright,dark"]
    for i in range(n):
        level = int(i * 255 / (n - 1))
        Image.fromarray(np.full((size, size), level, np.uint8)).save(folder / f"b{i:02d}.png")
        rows.append(f"b{i:02d}.png,{level / 255:.6f},{1 - level / 255:.6f}")
    return rows


@pytest.fixture(scope="module")
def shared_jobs(tmp_path_factory):
    """One jobs folder for the module's fixtures' jobs, so that one ``digits serve`` shows them all."""
    return str(tmp_path_factory.mktemp("shared") / "jobs")


@pytest.fixture(scope="module")
def regression(tmp_path_factory, shared_jobs):
    """An image-regression dataset made by ``digits dataset create`` and a 1-epoch model of Example 1."""
    import contextlib
    import io

    from digits_core.engine import train

    root = tmp_path_factory.mktemp("regression")
    jobs = shared_jobs
    rows = _brightness_images(root / "imgs")
    (root / "targets.csv").write_text("\n".join(rows) + "\n")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert (
            digits(
                [
                    "--jobs-dir",
                    jobs,
                    "dataset",
                    "create",
                    "image-regression",
                    "--name",
                    "bright",
                    "--json",
                    "--image-folder",
                    str(root / "imgs"),
                    "--targets-file",
                    str(root / "targets.csv"),
                    "--image-type",
                    "grayscale",
                    "--width",
                    "8",
                    "--height",
                    "8",
                    "--val-percent",
                    "25",
                ]
            )
            == 0
        )
    dataset_id = json.loads(out.getvalue())["id"]
    # docs/custom-networks.md Example 1: the regression network file with its MSE loss
    model = train(
        dataset_id,
        str(EXAMPLES / "regression_mse.py"),
        name="r",
        epochs=1,
        batch_size=8,
        jobs_dir=jobs,
        seed=1,
        network_params={"width": 4},
    )
    return {"root": root, "jobs": jobs, "dataset_id": dataset_id, "model": model}


def test_image_regression_cli_and_api_to_regression_view(regression, capsys):
    from digits_core.datasets import open_dataset
    from digits_core.inference import infer

    tmp_path, jobs, model = regression["root"], regression["jobs"], regression["model"]
    with open_dataset(regression["dataset_id"], jobs_dir=jobs) as ds:
        assert ds.label_kind == "regression" and ds.userdata["target_names"] == ["bright", "dark"]
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
    result = infer(
        model.id,
        form_data={"targets_file": str(tmp_path / "targets.csv"), "list_root": str(tmp_path / "imgs")},
        jobs_dir=jobs,
    )
    assert len(result.samples) == 24 and result.samples[0].input_id.endswith("b00.png")
    html = result.to_html()
    assert html.count('class="dvg-sample"') == 24 and html.count("<circle") == 48
    assert "dvg-mae" in html
    form = {"targets_file": str(tmp_path / "targets.csv"), "list_root": str(tmp_path / "imgs")}
    with _web_client(jobs, tmp_path) as (client, token):
        web = _api_infer(client, token, model.id, {"form_data": form})
        assert web["results"]["view"] == "regression" and len(web["html"]["samples"]) == 24
        assert web["html"]["summary"].count("<circle") == 48
        _stored_result_of_the_form(client, token, model.id, form, web)


@pytest.mark.browser
def test_regression_and_image_output_results_pages_fit_a_phone(regression, denoising, shared_jobs, chromium):
    """The regression and image-output views' results pages, run from the model page, fit 375 px (issue 27)."""
    from browser_support import assert_fits_a_phone
    from live_server import running_server

    errors: list[str] = []
    with running_server(
        shared_jobs, extra_args=["--data-root", str(regression["root"]), "--data-root", str(denoising["root"])]
    ) as server:
        page = chromium.new_context(viewport={"width": 1280, "height": 900}).new_page()
        page.set_default_timeout(180_000)  # only the bound after which a wait on page state fails
        page.on("pageerror", lambda exc: errors.append(str(exc)))

        def run(model, fill, view):
            page.goto(f"{server.url}/models/{model.id}")
            assert page.locator("#view-id").input_value() == view  # preselected by the dataset's task
            fill()
            page.click("#infer-button")
            page.wait_for_selector("#results")
            assert re.search(rf"/models/{model.id}/inference/[0-9a-f-]+$", page.url.split("#")[0]), page.url

        def targets_form():  # what a user fills: the image folder and the targets file of those images
            page.check("input[name=input_mode][value=plugin]")
            page.fill("#infer-form [name=image_folder]", str(regression["root"] / "imgs"))
            page.fill("#infer-form [name=targets_file]", str(regression["root"] / "targets.csv"))
            page.fill("#infer-form [name=list_root]", str(regression["root"] / "imgs"))

        run(regression["model"], targets_form, "regression")
        assert page.locator(".dvg-sample").count() == 24  # each image once (it was 48: folder + file)
        assert (
            re.sub(r"\s+", " ", page.locator(".dvg-header").inner_text()).strip()
            == "24 inputs, 2 targets (bright, dark); 24 with known values."
        )
        assert_fits_a_phone(page, "the regression results page", screenshot="regression-results-375")

        def pairs_list():
            page.check("input[name=input_mode][value=path]")
            page.fill("#infer-path", str(denoising["root"] / "pairs.txt"))

        run(denoising["model"], pairs_list, "image-output")
        assert page.locator(".dvg-target").count() == 2
        assert_fits_a_phone(page, "the image-output results page", screenshot="image-output-results-375")
        page.context.close()
    assert not errors, errors


def _stored_result_of_the_form(client, token, model_id, form, api):
    """*Test the model* with the plugin's form: stored, served at its GET URL, a reload runs and stores nothing."""

    def stored():
        return client.get(f"/models/{model_id}.json").get_json()["inference_results"]

    before = len(stored())  # the module's browser test may have stored one already
    resp = client.post(
        f"/models/{model_id}/infer", data={"csrf_token": token, "view_id": "regression", "input_mode": "plugin", **form}
    )
    assert resp.status_code == 303, resp.get_data(as_text=True)[:2000]
    url = resp.headers["Location"]
    assert re.fullmatch(rf"(http://localhost)?/models/{model_id}/inference/[0-9a-f-]+", url), url
    listed = stored()
    assert len(listed) == before + 1 and listed[0]["url"] == url.removeprefix("http://localhost")  # newest first
    assert listed[0]["samples"] == 24
    pages = [re.sub(r'nonce="[^"]+"', 'nonce=""', client.get(url).get_data(as_text=True)) for _ in range(2)]
    assert pages[0] == pages[1]  # a reload shows the same results (each page has its own CSP nonce)
    assert pages[0].count('class="dvg-sample"') == 24 and "dvg-mae" in pages[0]
    assert 'inputs <span class="break">the data plugin&#39;s inference form</span>' in pages[0]
    assert len(stored()) == before + 1  # the reload ran and stored nothing
    stored = client.get(url, headers={"Accept": "application/json"}).get_json()
    assert stored["results"] == api["results"] and stored["html"] == api["html"]  # what the API answers for the same


def test_image_pairs_train_the_siamese_example_and_infer(tmp_path, capsys):
    """docs/custom-networks.md Example 2 on bundled plugins only: image-pairs → siamese.py."""
    from digits_core.engine import load_snapshot, train
    from digits_core.inference import infer

    jobs = str(tmp_path / "jobs")
    for c in range(3):
        folder = tmp_path / "classes" / f"c{c}"
        folder.mkdir(parents=True)
        for i in range(6):
            Image.fromarray(np.full((8, 8), 60 * c + 3 * i, np.uint8)).save(folder / f"{i}.png")
    assert (
        digits(
            [
                "--jobs-dir",
                jobs,
                "dataset",
                "create",
                "image-pairs",
                "--name",
                "pairs",
                "--json",
                "--folder",
                str(tmp_path / "classes"),
                "--train-pairs",
                "32",
                "--val-pairs",
                "8",
                "--val-percent",
                "34",
                "--width",
                "8",
                "--height",
                "8",
            ]
        )
        == 0
    )
    dataset_id = json.loads(capsys.readouterr().out)["id"]
    model = train(
        dataset_id,
        str(EXAMPLES / "siamese.py"),
        name="siamese",
        epochs=1,
        batch_size=8,
        jobs_dir=jobs,
        network_params={"width": 4},
    )
    assert load_snapshot(model).get_layer("tower") is not None
    pair = np.stack([np.full((8, 8), 60, np.uint8), np.full((8, 8), 63, np.uint8)], axis=-1)
    result = infer(model.id, [("same-pair", pair, 1)], jobs_dir=jobs, view_config={"top_n": 1})
    assert result.view_id == "image-classification"
    assert result.samples[0].top[0]["label"] in ("different", "same") and len(result.samples[0].top) == 1
    assert result.to_json()["view_summary"]["summary"]["labelled"] == 1


def test_numpy_arrays_from_memory_train_and_infer(tmp_path):
    from digits_core.engine import train
    from digits_core.inference import infer
    from digits_data_images.numpy_arrays import create_dataset_from_arrays

    rng = np.random.default_rng(0)
    labels = np.arange(40) % 2
    features = (rng.random((40, 8, 8, 1)) * 60 + labels[:, None, None, None] * 150).astype(np.uint8)
    jobs = str(tmp_path / "jobs")
    job = create_dataset_from_arrays(
        features, labels, folder=tmp_path / "arrays", jobs_dir=jobs, workers=1, options={"val_percent": 20}
    )
    model = train(job.id, "lenet", name="np", epochs=1, batch_size=8, jobs_dir=jobs)
    np.save(tmp_path / "x.npy", features[1])
    result = infer(model.id, [str(tmp_path / "x.npy")], jobs_dir=jobs)
    assert result.samples[0].input_data.shape == (8, 8, 1) and result.samples[0].output.shape == (2,)
    assert "x.npy" in result.to_html()


@pytest.fixture(scope="module")
def denoising(tmp_path_factory, shared_jobs):
    """An image-processing dataset of noisy/clean pairs made by ``digits dataset create``, a 2-epoch image2image model."""
    import contextlib
    import io

    from digits_core.engine import train

    root = tmp_path_factory.mktemp("denoising")
    rng = np.random.default_rng(0)
    for folder in ("noisy", "clean"):
        (root / folder).mkdir()
    for i in range(16):
        clean = np.zeros((16, 16, 3), np.uint8)
        clean[4 + i % 6 : 10 + i % 6, 3:12] = (200, 120, 40)
        noisy = np.clip(clean + rng.normal(0, 25, clean.shape), 0, 255).astype(np.uint8)
        Image.fromarray(noisy).save(root / "noisy" / f"{i:02d}.png")
        Image.fromarray(clean).save(root / "clean" / f"{i:02d}.png")
    (root / "pairs.txt").write_text("noisy/00.png clean/00.png\nnoisy/05.png clean/05.png\n")
    jobs = shared_jobs
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert (
            digits(
                [
                    "--jobs-dir",
                    jobs,
                    "dataset",
                    "create",
                    "image-processing",
                    "--name",
                    "denoise",
                    "--json",
                    "--feature-folder",
                    str(root / "noisy"),
                    "--label-folder",
                    str(root / "clean"),
                    "--width",
                    "16",
                    "--height",
                    "16",
                    "--val-percent",
                    "25",
                ]
            )
            == 0
        )
    dataset_id = json.loads(out.getvalue())["id"]
    model = train(dataset_id, None, name="denoise", epochs=2, batch_size=4, jobs_dir=jobs, loss="mae", seed=0)
    return {"root": root, "jobs": jobs, "dataset_id": dataset_id, "model": model}


def test_image_processing_denoising_cli_and_api_to_image_output_view(denoising, capsys):
    from digits_core.datasets import open_dataset
    from digits_core.inference import infer

    tmp_path, jobs, model = denoising["root"], denoising["jobs"], denoising["model"]
    with open_dataset(denoising["dataset_id"], jobs_dir=jobs) as ds:
        assert ds.label_kind == "image" and ds.label_shape == (16, 16, 3) and ds.label_dtype == "float32"
        features, targets = ds.read_all("val")
        assert targets.max() <= 1.0 and features.dtype == np.uint8
    info = json.loads((model.path / "model.json").read_text())
    assert info["task"] == "image-to-image" and info["network"] == "image2image"
    assert digits(["--jobs-dir", jobs, "infer", "--model", model.id, str(tmp_path / "pairs.txt"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["view"] == "image-output" and report["view_summary"]["summary"]["labelled"] == 2
    assert report["samples"][0]["output_shape"] == [16, 16, 3]
    # The scores are of this model's output against the clean target, in [0, 1] (scikit-image as the reference):
    # a target read in 0-255, a swapped pair or an unclipped output gives other numbers.
    from skimage.metrics import peak_signal_noise_ratio, structural_similarity

    api = infer(model.id, [str(tmp_path / "pairs.txt")], jobs_dir=jobs)
    for sample, shown, name in zip(api.samples, report["samples"], ("00.png", "05.png")):
        clean = np.asarray(Image.open(tmp_path / "clean" / name).convert("RGB"), np.float64) / 255
        assert np.allclose(sample.ground_truth, clean, atol=1e-6)
        output = np.clip(np.asarray(sample.output, np.float64), 0, 1)
        ssim = structural_similarity(
            output, clean, channel_axis=2, gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=1
        )
        assert shown["view"]["ssim"] == pytest.approx(ssim, abs=1e-6) and -1 < ssim < 1
        assert shown["view"]["psnr"] == pytest.approx(peak_signal_noise_ratio(clean, output, data_range=1), abs=1e-6)
    assert digits(["--jobs-dir", jobs, "infer", "--model", model.id, str(tmp_path / "pairs.txt")]) == 0
    summary = capsys.readouterr().out
    assert "image 16x16x3" in summary and "MAE" in summary
    result = infer(
        model.id,
        form_data={"image_folder": str(tmp_path / "noisy"), "target_folder": str(tmp_path / "clean")},
        jobs_dir=jobs,
    )
    assert len(result.samples) == 16 and result.samples[3].input_id.endswith("03.png")
    html = result.to_html()
    assert html.count('class="dvg-target"') == 16 and "dvg-mean-psnr" in html
    web = _infer_on_the_web(jobs, tmp_path, model.id, {"inputs": [str(tmp_path / "pairs.txt")]})
    assert web["results"]["view"] == "image-output" and "dvg-mean-ssim" in web["html"]["summary"]
