"""Two trainers, a viewer and an admin walk a real ``digits serve`` with accounts in headless Chromium (issue 47).

Ada (trainer) signs in through the sign-in page, builds a tiny dataset and trains a
tiny private model; Bob (another trainer) signs in and tries every page and API
that names her model with the ids taken from her URLs: each answers 404, as for a
job that does not exist, and shows nothing of it. Ada shares the model with Bob's
group through the form on its page: Bob may now open it and name files in its
folder (her inference upload: outside the data roots for him until then), still
not delete it. A viewer cannot create; the admin opens and deletes it and finds
the Accounts page; an API token made and revoked on the tokens page is refused
at once. The demo without accounts is walked by tests/test_ui_browser.py.
"""

from __future__ import annotations

import re

import pytest

from digits_core.accounts import AccountStore

pytestmark = [pytest.mark.slow, pytest.mark.browser]

USERS = {"root": "admin", "ada": "trainer", "bob": "trainer", "vic": "viewer"}
#: fetch() from the signed-in page: the session cookie and its CSRF token, as the UI sends them.
CALL = """async ([method, url, body]) => {
    const token = (await (await fetch('/api/csrf-token')).json()).csrf_token;
    const r = await fetch(url, {method, headers: {'Content-Type': 'application/json', 'X-CSRFToken': token},
                                body: body === null ? undefined : JSON.stringify(body)});
    return {status: r.status, text: await r.text()};
}"""


def _password(name):
    return f"the password of {name}"


def _sign_in(browser, server, name):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(server.url + "/")
    assert "/account/login" in page.url  # every page asks for a sign-in first
    page.fill("#name", name)
    page.fill("#password", _password(name))
    page.click("button[type=submit]")
    page.wait_for_selector("#nav-user")
    assert page.locator("#nav-user").inner_text().strip() == f"{name} ({USERS[name]})"
    return page


def _call(page, method, url, body=None):
    return page.evaluate(CALL, [method, url, body])


def _tiny_images(root):
    from PIL import Image

    for label, value in (("dark", 30), ("light", 220)):
        (root / label).mkdir(parents=True)
        for i in range(6):
            Image.new("L", (16, 16), value + i).save(root / label / f"{i}.png")


def _wait_done(server, token, path, timeout_s=180):
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = server.get_json(path, token=token)["job"]["status"]
        if status in ("Done", "Error", "Aborted"):
            return status
        time.sleep(0.5)
    raise AssertionError(f"{path} not done in {timeout_s} s:\n{server.describe()}")


def test_two_trainers_a_viewer_and_an_admin_in_a_real_browser(live_server, chromium, tmp_path):
    jobs = tmp_path / "jobs"
    store = AccountStore(jobs)
    for name, role in USERS.items():
        store.add_user(name, role, _password(name))
    store.add_to_group("cardiac", ["bob"])
    poll = store.create_token("root", "poll")
    _tiny_images(tmp_path / "shapes")
    server = live_server(jobs)

    # Ada builds a dataset and trains a private model from her signed-in page.
    ada = _sign_in(chromium, server, "ada")
    made = _call(
        ada,
        "POST",
        "/api/datasets",
        {"plugin_id": "image-classification", "name": "adas-shapes", "form_data": {"folder": str(tmp_path / "shapes")}},
    )
    assert made["status"] == 202, made["text"]
    dataset = re.search(r'"id": ?"([^"]+)"', made["text"]).group(1)
    assert _wait_done(server, poll, f"/datasets/{dataset}.json") == "Done", server.describe()
    options = {"epochs": 1, "batch_size": 4, "lr_policy": "fixed"}
    body = {"name": "adas-net", "dataset": dataset, "network": "lenet", "options": options}
    made = _call(ada, "POST", "/api/models", body)
    assert made["status"] == 202, made["text"]
    model = re.search(r'"id": ?"([^"]+)"', made["text"]).group(1)
    assert _wait_done(server, poll, f"/models/{model}.json") == "Done", server.describe()
    ada.goto(server.url + f"/models/{model}")
    assert "adas-net" in ada.content() and ada.locator("#sharing").count() == 1

    # Bob: the same URLs, guessed from hers, answer as for jobs that do not exist.
    bob = _sign_in(chromium, server, "bob")
    assert "adas-net" not in bob.content() and model not in bob.content()  # not listed on his home page
    for path in (f"/models/{model}", f"/jobs/{model}", f"/datasets/{dataset}"):
        answer = bob.goto(server.url + path)
        assert answer.status == 404 and "adas-net" not in bob.content() and "adas-shapes" not in bob.content(), path
    for method, path, data in (
        ("GET", f"/models/{model}.json", None),
        ("GET", f"/models/{model}/metrics.json", None),
        ("GET", f"/models/{model}/download", None),
        ("POST", f"/models/{model}/export", {}),
        ("POST", f"/api/models/{model}/infer", {}),
        ("POST", f"/v1/models/{model}:predict", {"instances": [[[[0.0]]]]}),
        ("POST", "/v1/models/adas-net:predict", {"instances": [[[[0.0]]]]}),
        ("GET", "/v1/models/adas-net", None),
        ("GET", f"/compare.json?jobs={model}", None),
        ("GET", f"/api/leaderboard?dataset={dataset}", None),
        ("POST", f"/api/jobs/{model}/visibility", {"visibility": "public"}),
        ("POST", "/api/models", {"name": "from hers", "dataset": dataset, "network": "lenet"}),
        ("DELETE", f"/api/jobs/{model}", None),
        ("DELETE", f"/api/jobs/{dataset}", None),
    ):
        answer = _call(bob, method, path, data)
        assert answer["status"] == 404, (method, path, answer)
        assert "adas-shapes" not in answer["text"] and ("adas-net" not in answer["text"] or "adas-net" in path)

    # Ada runs her model on an upload: saved in its job folder, read by the inference worker inside the jobs folder,
    # which accounts fence (only the jobs one may read). Bob naming that file gets the answer for any path outside
    # the data roots.
    ada.goto(server.url + f"/models/{model}")
    ada.check("input[name=input_mode][value=upload]")
    ada.set_input_files("#infer-images", str(tmp_path / "shapes" / "dark" / "0.png"))
    ada.click("#infer-button")
    ada.wait_for_selector("#results", timeout=120000)
    upload = next((jobs / model / "inference").glob("upload-*/*.png"))
    form = {"folder": str(upload.parent.parent)}
    refused = _call(bob, "POST", "/api/datasets", {"plugin_id": "image-classification", "name": "x", "form_data": form})
    assert refused["status"] == 400 and "outside the server's data roots" in refused["text"], refused

    # Ada shares the model with Bob's group through the form on its page: he may read it, not delete it.
    ada.goto(server.url + f"/models/{model}")
    ada.fill("#share-group", "cardiac")
    ada.click("#share-button")
    ada.wait_for_selector("#sharing-state:has-text('shared with')")
    assert bob.goto(server.url + f"/models/{model}").status == 200 and "adas-net" in bob.content()
    assert bob.locator("#sharing").count() == 0  # readable, not his to share
    assert _call(bob, "DELETE", f"/api/jobs/{model}")["status"] == 403
    inferred = _call(bob, "POST", f"/api/models/{model}/infer", {"inputs": [str(upload)]})  # her upload, by path
    assert inferred["status"] == 200 and "dark" in inferred["text"], inferred

    # Vic (viewer) cannot create anything.
    vic = _sign_in(chromium, server, "vic")
    assert _call(vic, "POST", "/api/models", {"name": "v", "network": "lenet", "options": options})["status"] == 403
    assert _call(vic, "POST", "/api/datasets", {"plugin_id": "image-classification"})["status"] == 403

    # Ada makes an API token on her tokens page, then revokes it there: refused on its very next request.
    ada.click("#nav-user")
    ada.fill("#token_name", "laptop")
    ada.click("text=Create")
    token = ada.locator("#new-token").inner_text().strip()
    assert server.get("/api/jobs", token=token).status == 200
    ada.click("button[name=revoke][value=laptop]")
    ada.wait_for_selector("text=revoked")
    assert server.get("/api/jobs", token=token).status == 401

    # The admin opens her model, finds the Accounts and Audit pages, and deletes the model.
    root = _sign_in(chromium, server, "root")
    assert root.goto(server.url + f"/models/{model}").status == 200
    root.click("#nav-accounts")
    assert "cardiac" in root.locator("#groups").inner_text() and "vic" in root.locator("#users").inner_text()
    assert _call(root, "DELETE", f"/api/jobs/{model}")["status"] in (200, 202, 204)
    assert ada.goto(server.url + f"/models/{model}").status == 404  # gone for its owner too

    # Signing out is a POST from the header: the next page asks for a sign-in again.
    bob.goto(server.url + "/")
    bob.click("#sign-out button")
    bob.wait_for_url(re.compile(r".*/account/login.*"))
    bob.goto(server.url + "/")
    assert "/account/login" in bob.url
    for page in (ada, bob, vic, root):
        page.context.close()
    assert "the password of" not in server.output()
    assert "the password of" not in (jobs / "audit.jsonl").read_text()
