"""Model pages with DIGITS 6 parity (issue 15): per-epoch snapshot download and epoch choice, the network page
("Visualize" on the model page and the New Model form), Top N predictions per category.

Fast tests use Flask's test client (no TensorFlow); the browser tests (``slow``, ``browser``) share one real
``digits serve``, one dataset and one 2-epoch LeNet per module, in headless Chromium. Screenshots go to
``test-artifacts/model-pages-*.png``::

    flock /tmp/digits-heavy.lock .venv/bin/python -m pytest tests/test_ui_model_pages.py
"""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

import pytest

from digits_core.jobs import Job, JobStatus

# -- fast: pages and JSON without TensorFlow ----------------------------------------------------------------------


def _model(app, snapshot_tags=("001", "002", "002.5"), task="classification"):
    jobs = app.extensions["digits"]["jobs_dir"]
    ds = Job.create("dataset", "digits", jobs_dir=jobs, plugin_id="image-classification")
    ds.set_status(JobStatus.DONE)
    job = Job.create("model", "lenet", jobs_dir=jobs, dataset_id=ds.id, train_options={"network": "lenet"})
    job.set_status(JobStatus.RUNNING)
    job.set_status(JobStatus.DONE)
    (job.path / "snapshots").mkdir()
    for tag in snapshot_tags:
        (job.path / "snapshots" / f"epoch-{tag}.keras").write_bytes(b"k" * 7)
    (job.path / "model.json").write_text(json.dumps({"task": task}))
    return job


def _token(client):
    return client.get("/api/csrf-token").get_json()["csrf_token"]


def test_every_snapshot_has_its_download_and_its_epoch_as_a_number(app, client):
    job = _model(app)
    html = client.get(f"/models/{job.id}").get_data(as_text=True)
    rows = re.findall(
        r'<tr><td class="num">([^<]*)</td><td>([^<]*)</td>.*?href="([^"]+)" class="snapshot-download"', html, re.DOTALL
    )
    assert rows == [
        ("2.5", "epoch-002.5.keras", f"/models/{job.id}/download?epoch=2.5"),
        ("2", "epoch-002.keras", f"/models/{job.id}/download?epoch=2"),
        ("1", "epoch-001.keras", f"/models/{job.id}/download?epoch=1"),
    ]
    # The inference form's snapshot menu offers the same numbers the CLI's --epoch takes.
    menu = re.search(r'<select class="input" name="snapshot" id="snapshot">(.*?)</select>', html, re.DOTALL).group(1)
    assert re.findall(r'<option value="([^"]*)"', menu) == ["", "2.5", "2", "1"]
    snaps = client.get(f"/models/{job.id}.json").get_json()["snapshots"]
    assert [(s["epoch"], s["download"]) for s in snaps] == [
        (1, f"/models/{job.id}/download?epoch=1"),
        (2, f"/models/{job.id}/download?epoch=2"),
        (2.5, f"/models/{job.id}/download?epoch=2.5"),
    ]


def test_download_of_an_epoch_without_snapshot_names_those_there_are(app, client):
    job = _model(app)
    resp = client.get(f"/models/{job.id}/download?epoch=7", headers={"Accept": "application/json"})
    assert resp.status_code == 400
    assert resp.get_json()["error"]["message"].endswith("has no snapshot at epoch 7 (snapshots: 1, 2, 2.5).")


def test_model_and_form_pages_link_to_the_network_page(app, client):
    job = _model(app)
    html = client.get(f"/models/{job.id}").get_data(as_text=True)
    assert re.search(rf'<a class="btn" href="/models/{job.id}/network" id="visualize"', html)
    form = client.get("/models/new").get_data(as_text=True)
    button = re.search(r'<button [^>]*id="visualize"[^>]*>', form).group(0)
    assert 'formaction="/models/network"' in button and "formnovalidate" in button


def test_network_form_errors_are_shown_before_any_worker_runs(app, client):
    token = _token(client)
    resp = client.post("/models/network", data={"csrf_token": token, "network": "lenet", "dataset": ""})
    assert resp.status_code == 400
    assert "Choose a dataset" in re.search(
        r'id="network-error">(.*?)</div>', resp.get_data(as_text=True), re.DOTALL
    ).group(1)
    resp = client.post(
        "/models/network.json",
        data={"csrf_token": token, "network": "lenet", "dataset": "x", "network_params": "[1]", "crop_size": "-3"},
    )
    fields = resp.get_json()["error"]["fields"]
    assert resp.status_code == 400 and set(fields) == {"network_params", "crop_size"}
    code = "def build_model(input_shape, num_outputs):\n    raise SystemExit"
    resp = client.get(
        "/models/network.json", query_string={"dataset": "x", "network": "__custom__", "custom_network": code}
    )
    assert (
        resp.status_code == 400 and "a GET never runs code" in resp.get_json()["error"]["fields"]["custom_network"][0]
    )
    assert client.application.extensions["digits"]["inference_worker"].starts == 0  # refused before any worker ran


def test_top_n_form_is_for_classification_and_keeps_values_on_error(app, client, tmp_path):
    job = _model(app)
    html = client.get(f"/models/{job.id}").get_data(as_text=True)
    assert 'id="top-n-form"' in html
    seg = _model(app, task="segmentation")
    assert 'id="top-n-form"' not in client.get(f"/models/{seg.id}").get_data(as_text=True)
    resp = client.post(
        f"/models/{job.id}/top-n",
        data={"csrf_token": _token(client), "server_path": str(tmp_path), "top_n": "0", "snapshot": "2"},
    )
    html = resp.get_data(as_text=True)
    assert resp.status_code == 200 and re.search(
        r'id="top-n-errors".*Give a whole number from 1 to 100', html, re.DOTALL
    )
    assert f'id="top-n-path" value="{tmp_path}"' in html
    assert re.search(r'id="top-n-snapshot">.*<option value="2" selected>epoch 2<', html, re.DOTALL)
    resp = client.post(
        f"/models/{job.id}/top-n",
        data={"csrf_token": _token(client), "top_n": "3", "server_path": str(tmp_path / "none")},
    )
    assert resp.status_code == 200 and "does not exist on the server" in resp.get_data(as_text=True)


def test_top_n_results_are_stored_with_a_url_listed_and_deleted(app, client, tmp_path):
    """A Top N run is stored as *Test the model*'s results are: 303 to a GET page, listed, JSON twin, Delete
    (the worker's answer is written here by hand: no TensorFlow; the real POST is in test_top_n_per_category)."""
    from digits_core.web.inference_results import results_dir
    from digits_core.web.top_n_views import store_top_n

    job = _model(app)
    thumb = "data:image/png;base64,iVBORw0KGgo="
    answer = {
        "model": {"epoch": 2},
        "n": 1,
        "inputs": 3,
        "errors": [{"input": "bad.png", "error": "unreadable"}],
        "classes": [
            {
                "index": k,
                "label": label,
                "images": [
                    {"input_id": str(tmp_path / label / "0001.png"), "probability": 0.5 + k / 4, "image": thumb}
                ],
            }
            for k, label in enumerate(("cat", "dog"))
        ],
    }
    with app.test_request_context():
        resp = store_top_n(job, answer, str(tmp_path))
    assert resp.status_code == 303
    url = resp.headers["Location"]
    assert re.fullmatch(rf"/models/{job.id}/inference/\d{{8}}-\d{{6}}-[0-9a-f]{{6}}", url), url
    for _ in range(2):  # a reload shows the same page and stores nothing
        html = client.get(url).get_data(as_text=True)
        assert re.findall(r'class="top-n-class" data-class="([^"]+)"', html) == ["cat", "dog"]
        assert re.findall(r'class="small muted top-n-name"[^>]*>([^<]*)<', html) == ["cat/0001.png", "dog/0001.png"]
        assert "75.00%" in html and thumb in html and "bad.png" in html and "3 images from" in html
        assert f'href="/models/{job.id}#top-n">Test again' in html
    listed = client.get(f"/models/{job.id}.json").get_json()["inference_results"]
    assert [(r["url"], r["view_title"], r["samples"], r["epoch"], r["inputs"]) for r in listed] == [
        (url, "Top N per category", 3, 2, str(tmp_path))
    ]
    assert f'href="{url}" class="result-open"' in client.get(f"/models/{job.id}").get_data(as_text=True)
    twin = client.get(url, headers={"Accept": "application/json"}).get_json()["results"]
    assert [c["images"][0]["input_id"] for c in twin["classes"]] == [
        str(tmp_path / "cat" / "0001.png"),
        str(tmp_path / "dog" / "0001.png"),
    ]
    assert all("image" not in i for c in twin["classes"] for i in c["images"])
    resp = client.post(url + "/delete", data={"csrf_token": _token(client)})
    assert resp.status_code == 303 and not any(results_dir(job).iterdir())


def test_top_per_class_ranks_each_class_highest_first():
    from digits_core.inference.top_per_class import top_per_class

    scores = [[0.9, 0.1, 0.0], [0.2, 0.7, 0.1], [0.9, 0.05, 0.05], [0.1, 0.1, 0.8]]
    assert top_per_class(scores, 2) == [[0, 2], [1, 0], [3, 1]]  # equal scores: input order
    assert top_per_class(scores, 10)[2] == [3, 1, 2, 0]


def test_graph_places_layers_by_depth_and_bends_skip_edges():
    from digits_core.web.network_graph import NODE_W, format_shape, layout, render_svg

    layers = [
        {"name": "in", "type": "InputLayer", "output_shape": [None, 8, 8, 1], "inbound": []},
        {"name": "a", "type": "Conv2D", "output_shape": [None, 8, 8, 4], "params": 40, "inbound": ["in"]},
        {"name": "b", "type": "Conv2D", "output_shape": [None, 8, 8, 4], "params": 148, "inbound": ["a"]},
        {"name": "add", "type": "Add", "output_shape": [None, 8, 8, 4], "inbound": ["b", "a"]},
    ]
    assert layout(layers) == {"in": (0, 0), "a": (1, 0), "b": (2, 0), "add": (3, 0)}
    svg = str(render_svg(layers))
    assert svg.count('<g class="layer"') == 4 and svg.count('class="edge"') == 4
    skip = re.search(r'data-from="a" data-to="add" d="M([\d.]+),[\d.]+ C([\d.]+),', svg)
    box_x = float(re.search(r'data-name="b">.*?<rect x="([\d.]+)"', svg).group(1))
    # Leaves from the right side and bulges out beside box b, which it passes, instead of crossing it.
    assert float(skip.group(1)) == box_x + NODE_W and float(skip.group(2)) > box_x + NODE_W
    assert "Conv2D · 8 × 8 × 4" in svg and "148 parameters" in svg
    assert format_shape([[None, 4], [None, 2, 3]]) == "4, 2 × 3" and format_shape("multiple") == "multiple"


# -- slow: a real server, a real 2-epoch LeNet, headless Chromium --------------------------------------------------

TOKEN = "model-pages-token"  # scripts send it as a Bearer header; the browser logs in with it
LENET_LAYERS = [  # 28x28x1 input, 10 classes: DIGITS's LeNet shapes, parameters counted by hand
    ("image", "InputLayer", "28 × 28 × 1", 0),
    ("conv1", "Conv2D", "24 × 24 × 20", 5 * 5 * 1 * 20 + 20),
    ("pool1", "MaxPooling2D", "12 × 12 × 20", 0),
    ("conv2", "Conv2D", "8 × 8 × 50", 5 * 5 * 20 * 50 + 50),
    ("pool2", "MaxPooling2D", "4 × 4 × 50", 0),
    ("flatten", "Flatten", "800", 0),
    ("fc1", "Dense", "500", 800 * 500 + 500),
    ("fc2", "Dense", "10", 500 * 10 + 10),
    ("probabilities", "Softmax", "10", 0),
]
LENET_TOTAL = sum(row[3] for row in LENET_LAYERS)

SKIP_NET = """
import keras


def build_model(input_shape, num_outputs, **params):
    inputs = keras.Input(shape=input_shape, name="pixels")
    a = keras.layers.Conv2D(4, 3, padding="same", name="conv_a")(inputs)
    b = keras.layers.Conv2D(4, 3, padding="same", name="conv_b")(a)
    x = keras.layers.Add(name="skip_add")([a, b])
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    return keras.Model(inputs, keras.layers.Dense(num_outputs, activation="softmax")(x))  # auto-named
"""


def _finished(server, path: str) -> str:
    """Wait (on the job's state) until the job behind a page's JSON twin ends; return its status."""
    from test_web_live_server import wait_until

    return wait_until(
        lambda: (lambda s: s if s in ("Done", "Error", "Aborted") else None)(server.get_json(path)["job"]["status"]),
        f"{path} to finish",
        server,
        300,
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One real ``digits serve``, a 28x28 digits dataset and a LeNet trained for 2 epochs (a snapshot each)."""
    import sys

    from live_server import running_server

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    from demo import export_sklearn_digits

    root = tmp_path_factory.mktemp("model-pages")
    data = root / "digits"
    export_sklearn_digits(data, per_class=8)
    with running_server(root / "jobs", auth_token=TOKEN, extra_args=["--data-root", str(root)]) as server:
        headers = {"Accept": "application/json"}
        ds = server.request(
            "/api/datasets",
            method="POST",
            headers=headers,
            data={
                "plugin_id": "image-classification",
                "name": "digits",
                "form_data": {"folder": str(data), "image_type": "grayscale", "width": 28, "height": 28},
            },
        ).json()
        assert "id" in ds, ds
        assert _finished(server, f"/datasets/{ds['id']}.json") == "Done"
        model = server.request(
            "/api/models",
            method="POST",
            headers=headers,
            data={
                "name": "lenet 2 epochs",
                "dataset": ds["id"],
                "network": "lenet",
                "options": {"epochs": 2, "batch_size": 16, "seed": 3},
            },
        ).json()
        assert "id" in model, model
        assert _finished(server, f"/models/{model['id']}.json") == "Done", server.get_json(
            f"/models/{model['id']}.json"
        )
        yield {"server": server, "data": data, "dataset": ds["id"], "model": model["id"], "root": root}


@pytest.fixture
def page(chromium, trained):
    """A page logged in to the module's server; JavaScript errors and CSP violations fail the test."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(180_000)  # only the bound after which a wait on page state fails
    page.goto(trained["server"].url + "/login")
    page.fill("#token", TOKEN)
    page.press("#token", "Enter")
    page.wait_for_url(lambda url: "/login" not in url)
    errors: list[str] = []
    context.on("weberror", lambda err: errors.append(str(err.error)))
    context.on("console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None)
    yield page
    context.close()
    assert not errors, f"JavaScript errors: {errors}"


def _shot(page, name):
    from browser_support import ARTIFACTS

    page.screenshot(path=str(ARTIFACTS / f"model-pages-{name}.png"), full_page=True)


def _layer_rows(page):
    return [
        tuple(cell.strip() for cell in row.locator("td").all_inner_texts()[1:5])
        for row in page.locator("#network-layers tbody tr").all()
    ]


@pytest.mark.slow
@pytest.mark.browser
def test_download_any_epoch_and_infer_with_it(trained, page, tmp_path):
    server = trained["server"]
    page.goto(server.url + f"/models/{trained['model']}")
    assert page.locator("#snapshots tbody td.num").all_inner_texts() == ["2", "1"]
    _shot(page, "snapshots")
    with page.expect_download() as info:
        page.locator("#snapshots tbody tr", has_text="epoch-001.keras").locator("a.snapshot-download").click()
    download = info.value
    assert download.suggested_filename == f"lenet 2 epochs-{trained['model']}-epoch-1.tar.gz"
    archive = tmp_path / "epoch1.tar.gz"
    download.save_as(archive)
    with tarfile.open(archive) as tar:
        top = f"{trained['model']}-epoch-001"
        assert f"{top}/saved_model/saved_model.pb" in tar.getnames()
        exported = json.load(tar.extractfile(f"{top}/info.json"))
    assert exported["model"]["epoch"] == 1

    # Inference with the epoch-1 snapshot: the page says which epoch ran, and the API's epoch 1 agrees.
    image = sorted((trained["data"] / "3").glob("*.png"))[0]
    page.check("input[name=input_mode][value=path]")
    page.fill("#infer-path", str(image))
    page.select_option("#snapshot", "1")
    page.click("#infer-button")
    page.wait_for_selector("#results")
    assert re.search(r"Epoch\s*1\b", page.locator("body").inner_text())
    shown = page.locator(".dcv-sample").first.inner_text()
    api = {
        epoch: server.request(
            f"/api/models/{trained['model']}/infer", method="POST", data={"inputs": [str(image)], "epoch": epoch}
        ).json()
        for epoch in (1, 2)
    }
    top1 = {epoch: r["results"]["samples"][0]["top"][0] for epoch, r in api.items()}
    assert top1[1]["probability"] != top1[2]["probability"]  # two different snapshots ran
    assert f"{top1[1]['probability'] * 100:.2f}" in shown, (shown, top1)


@pytest.mark.slow
@pytest.mark.browser
def test_visualize_a_trained_model(trained, page):
    from browser_support import assert_fits_a_phone

    server = trained["server"]
    page.goto(server.url + f"/models/{trained['model']}")
    page.click("#visualize")
    page.wait_for_selector("#network-layers")
    assert _layer_rows(page) == [(n, t, s, f"{p:,}") for n, t, s, p in LENET_LAYERS]
    assert page.locator("#layers-total").inner_text() == f"{LENET_TOTAL:,}" == "431,080"
    assert "snapshot of epoch 2" in page.locator("#network-source").inner_text()
    assert page.locator("#network-graph g.layer").count() == len(LENET_LAYERS)
    assert page.locator("#network-graph path.edge").count() == len(LENET_LAYERS) - 1
    _shot(page, "network-trained")
    assert_fits_a_phone(page, "the network page of a trained model", screenshot="model-pages-network-375")
    summary = server.get_json(f"/models/{trained['model']}/network.json")
    assert summary["total_params"] == LENET_TOTAL and summary["layers"][3]["inbound"] == ["pool1"]
    # Built in the worker: TensorFlow's libraries are mapped in no part of the server process.
    maps = open(f"/proc/{server.process.pid}/maps").read()
    assert "tensorflow" not in maps, "the web server loaded TensorFlow"

    # A model without a snapshot (it failed before its first epoch): the network its options build, 24x24 crops.
    failed = Job.create(
        "model",
        "no snapshot",
        jobs_dir=server.jobs_dir,
        dataset_id=trained["dataset"],
        train_options={"network": "lenet", "dataset": trained["dataset"], "crop_size": 24},
    )
    failed.set_status(JobStatus.ERROR, error="stopped before the first epoch")
    page.goto(server.url + f"/models/{failed.id}")
    page.click("#visualize")
    page.wait_for_selector("#network-layers")
    rows = {row[0]: row for row in _layer_rows(page)}  # under 28 px LeNet pads ('same'): 24 -> 12 -> 6, fc1 6*6*50
    assert rows["conv1"][2] == "24 × 24 × 20" and rows["fc1"][3] == f"{6 * 6 * 50 * 500 + 500:,}"
    assert "untrained" in page.locator("#network-source").inner_text()


@pytest.mark.slow
@pytest.mark.browser
def test_visualize_from_the_new_model_form(trained, page):
    from browser_support import assert_fits_a_phone

    server = trained["server"]
    page.goto(server.url + f"/models/new?dataset={trained['dataset']}")
    page.select_option("[name=network]", "lenet")
    with page.context.expect_page() as popup:
        page.click("#visualize")
    network = popup.value
    network.wait_for_selector("#network-layers")
    assert _layer_rows(network) == [(n, t, s, f"{p:,}") for n, t, s, p in LENET_LAYERS]
    assert "untrained" in network.locator("#network-source").inner_text()
    network.close()
    twin = server.get_json(f"/models/network.json?dataset={trained['dataset']}&network=lenet")
    assert twin["total_params"] == LENET_TOTAL and twin["source"]["kind"] == "network"

    # Custom code with a skip connection: the Add layer is fed by both convolutions, the graph shows both edges.
    page.select_option("[name=network]", "__custom__")
    page.fill("[name=custom_network]", SKIP_NET)
    for attempt in (1, 2):  # the worker builds it twice: auto-named layers are named as training would name them
        with page.context.expect_page() as popup:
            page.click("#visualize")
        network = popup.value
        network.wait_for_selector("#network-layers")
        rows = {row[0]: row for row in _layer_rows(network)}
        assert list(rows)[-1] == "dense", list(rows)
        if attempt == 1:
            network.close()
    assert rows["conv_a"][2:] == ("28 × 28 × 4", f"{3 * 3 * 1 * 4 + 4:,}")
    assert rows["skip_add"][1:3] == ("Add", "28 × 28 × 4")
    assert network.locator("#network-layers tr[data-name=skip_add] td").last.inner_text() == "conv_a, conv_b"
    assert network.locator('#network-graph path.edge[data-to="skip_add"]').count() == 2
    total = (3 * 3 * 1 * 4 + 4) + (3 * 3 * 4 * 4 + 4) + (4 * 10 + 10)
    assert network.locator("#total-params").inner_text() == f"{total:,}"
    _shot(network, "network-custom")
    assert_fits_a_phone(network, "the network page of custom code")
    network.close()

    # Broken custom code: the page says what and where, the form stays as it was.
    page.fill("[name=custom_network]", SKIP_NET.replace('name="gap")(x)', 'name="gap")(x) +'))
    with page.context.expect_page() as popup:
        page.click("#visualize")
    network = popup.value
    network.wait_for_selector("#network-error")
    assert re.search(r"SyntaxError|invalid syntax", network.locator("#network-error").inner_text())
    assert "custom code:10:" in network.locator("#network-error").inner_text()  # its line, no temporary path
    _shot(network, "network-error")
    assert_fits_a_phone(network, "the network page of broken custom code", screenshot="model-pages-network-error-375")


@pytest.mark.slow
@pytest.mark.browser
def test_top_n_per_category(trained, page):
    from browser_support import assert_fits_a_phone

    server = trained["server"]
    login = page.context.browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    login.goto(server.url + "/login")  # this server has a token: the login page, logged out, on a phone
    login.fill("#token", "not the token")
    login.press("#token", "Enter")
    login.wait_for_selector(".field-error")
    assert_fits_a_phone(login, "the login page with its error", screenshot="model-pages-login-375")
    login.context.close()
    page.goto(server.url + f"/models/{trained['model']}")
    page.fill("#top-n-path", str(trained["data"]))
    page.fill("#top-n-count", "3")
    page.click("#top-n-button")
    page.wait_for_selector(".top-n-class")
    sections = page.locator(".top-n-class")
    assert sections.count() == 10
    assert page.locator(".top-n-class h3").all_inner_texts() == [str(d) for d in range(10)]
    assert "80 images" in page.locator("#top-n-info").inner_text()
    _shot(page, "top-n")
    assert_fits_a_phone(page, "the Top N results page", screenshot="model-pages-top-n-375")
    # Stored with a URL (the POST answered 303): a reload shows the same page and runs nothing.
    url = page.url.split("#")[0]
    assert re.fullmatch(re.escape(server.url) + rf"/models/{trained['model']}/inference/[0-9a-f-]+", url), url
    before = page.locator("#results").inner_text()
    page.reload()
    assert page.locator("#results").inner_text() == before
    listed = [
        r
        for r in server.get_json(f"/models/{trained['model']}.json")["inference_results"]
        if r["view_title"] == "Top N per category"
    ]
    assert [(server.url + r["url"], r["samples"]) for r in listed] == [(url, 80)]
    # The same ranking from the per-image probabilities of the inference API (all 10 classes listed).
    listing = server.request(
        f"/api/models/{trained['model']}/infer",
        method="POST",
        data={"inputs": [str(trained["data"])], "view_config": {"top_n": 10}},
    ).json()["results"]["samples"]
    scores = {s["input_id"]: {t["index"]: t["probability"] for t in s["top"]} for s in listing}
    for k in (0, 7):
        section = page.locator(f".top-n-class[data-class='{k}']")
        names = [img.get_attribute("alt") for img in section.locator("img").all()]
        expected = sorted(scores, key=lambda name: -scores[name][k])[:3]
        assert names == expected
        probabilities = section.locator(".top-n-prob").all_inner_texts()
        assert probabilities == [f"{scores[name][k] * 100:.2f}%" for name in expected]
        shown = section.locator(".top-n-name").all_inner_texts()  # relative to the folder: the true class shows
        assert shown == [str(Path(name).relative_to(trained["data"])) for name in expected]
        assert all(section.locator("img").evaluate_all("els => els.map(e => e.naturalWidth > 0)"))
    # The JSON twin: the same ranking, without the thumbnails.
    from urllib.parse import urlencode

    twin = server.request(
        f"/models/{trained['model']}/top-n",
        method="POST",
        headers={"Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded"},
        data=urlencode({"server_path": str(trained["data"]), "top_n": 3}).encode(),
    ).json()
    assert twin["n"] == 3 and twin["inputs"] == 80 and len(twin["classes"]) == 10
    seven = next(c for c in twin["classes"] if c["label"] == "7")
    assert [i["input_id"] for i in seven["images"]] == sorted(scores, key=lambda name: -scores[name][7])[:3]
    assert all("image" not in i for c in twin["classes"] for i in c["images"])


@pytest.mark.slow
@pytest.mark.browser
def test_export_panel_onnx_with_its_parity_report(trained, page, tmp_path):
    """The model page's Export panel: epoch 1 as ONNX, run in onnxruntime; the parity report shown and archived."""
    server = trained["server"]
    page.goto(server.url + f"/models/{trained['model']}")
    page.select_option("#export-format", "onnx")
    page.select_option("#export-snapshot", "1")
    page.click("#export-button")
    row = page.locator("#exports tr#export-latest")
    row.wait_for()
    assert row.get_attribute("data-export") == f"{trained['model']}-epoch-001-onnx"
    assert row.locator(".parity-verdict").inner_text() == "passed"
    figures = row.locator(".parity-figures").inner_text()
    assert "top-1 agreement 100 %" in figures and "(onnxruntime vs digits infer)" in figures
    _shot(page, "export")
    with page.expect_download() as info:
        row.locator("a.export-download").click()
    archive = tmp_path / "onnx.tar.gz"
    info.value.save_as(archive)
    with tarfile.open(archive) as tar:
        top = f"{trained['model']}-epoch-001"
        assert f"{top}/model.onnx" in tar.getnames()
        parity = json.load(tar.extractfile(f"{top}/parity.json"))
        assert json.load(tar.extractfile(f"{top}/info.json"))["model"]["epoch"] == 1
    assert parity["passed"] is True and parity["top1_agreement"] == 1.0 and parity["runtime"] == "onnxruntime"
    assert f"· {parity['inputs']} inputs" in figures and parity["inputs"] == 40  # 20 validation images, each twice


@pytest.mark.slow
@pytest.mark.browser
def test_main_pages_have_no_serious_accessibility_violations_and_fit_a_phone(trained, page):
    """axe-core (npm) on the eight main pages of the real server: 0 serious or critical violations (issue 43)."""
    from axe_support import axe_violations
    from browser_support import assert_fits_a_phone

    server, model = trained["server"], trained["model"]
    found: list[str] = []

    def check(what: str, path: str | None = None) -> None:
        if path is not None:
            page.goto(server.url + path)
        page.wait_for_load_state("networkidle")
        found.extend(axe_violations(page, what))
        assert_fits_a_phone(page, what, screenshot=f"model-pages-375-{what.replace(' ', '-')}")

    check("home", "/")
    assert page.locator("h1").count() == 1  # axe-core's page-has-heading-one (moderate): home had none
    check("new dataset", "/datasets/new/image-classification")
    check("dataset", f"/datasets/{trained['dataset']}")
    check("new model", f"/models/new?dataset={trained['dataset']}")
    page.goto(server.url + f"/models/{model}")
    page.wait_for_selector("#metric-summary")
    check("model")
    check("sweep", f"/compare?jobs={model}")  # the sweep page's template (sweep_compare.html), runs picked by hand
    # Classify one, then many: the classification view's pages of real inference results.
    image = sorted((trained["data"] / "3").glob("*.png"))[0]
    page.goto(server.url + f"/models/{model}")
    page.check("input[name=input_mode][value=path]")
    page.fill("#infer-path", str(image))
    page.click("#infer-button")
    page.wait_for_selector("#results")
    check("classify one")
    page.goto(server.url + f"/models/{model}")
    page.check("input[name=input_mode][value=path]")
    page.fill("#infer-path", str(trained["data"] / "7"))
    page.click("#infer-button")
    page.wait_for_selector("#results")
    check("classify many")
    assert not found, "\n".join(found)
