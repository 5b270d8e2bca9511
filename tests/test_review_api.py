"""The review page's JSON API on a folder pool (issue 46 item 3), through the Flask app with a real pool record.

Claim the next proposal, store a corrected label (run-length and PNG), every version kept with the reviewer's
name; a stale save (two reviewers on one version) answers 409 and leaves the first version as it was; a mask
whose shape or counts do not fit the image is refused before anything is allocated.
"""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest

from digits_core.labeling import create_pool
from digits_core.labeling.masks import encode_mask, read_mask
from digits_core.web.app import create_app
from digits_core.web.review_data import encode_runs

H, W = 24, 32


@pytest.fixture
def pool(tmp_path):
    from PIL import Image

    data = tmp_path / "unlabelled"
    data.mkdir()
    for name, level in (("a.png", 90), ("b.png", 140)):
        Image.fromarray(np.full((H, W), level, np.uint8), mode="L").save(data / name)
    pool = create_pool(
        "hearts",
        {"kind": "folder", "root": str(data)},
        [{"path": "a.png"}, {"path": "b.png"}],
        class_labels=["background", "lv", "myo"],
        jobs_dir=tmp_path / "jobs",
    )
    proposal = np.zeros((H, W), np.uint8)
    proposal[5:10, 6:12] = 1
    for score, cand in zip((0.9, 0.2), pool.candidates()):
        (pool.path / "proposals" / f"{cand['id']}.png").write_bytes(encode_mask(proposal))
        pool.record_proposal(cand["id"], {"file": f"proposals/{cand['id']}.png", "model_id": "m1"})
        pool.record_scores({cand["id"]: score}, "entropy")
    return pool, proposal


@pytest.fixture
def client(pool, tmp_path):
    app = create_app(
        tmp_path / "jobs", start_scheduler=False, testing=True, secret_key="k", data_roots=[tmp_path / "unlabelled"]
    )
    client = app.test_client()
    client.environ_base["HTTP_X_CSRFTOKEN"] = client.get("/api/csrf-token").get_json()["csrf_token"]
    return client


def _next(client, pool, skip=()):
    answer = client.post(f"/api/pools/{pool.id}/review/next", json={"skip": list(skip)})
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return answer.get_json()


def _decoded(item):
    runs = item["label"]["runs"]
    return np.repeat(np.array(runs[0::2], np.uint8), runs[1::2]).reshape(item["shape"])


def test_review_page_and_the_queue_highest_score_first(client, pool):
    pool, proposal = pool
    page = client.get(f"/pools/{pool.id}/review")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert "review.js" in html and "Keyboard" in html and 'aria-label="Drawing tool"' in html
    first = _next(client, pool)
    top = max(pool.candidates(), key=lambda c: c["score"])
    assert first["candidate"] == top["id"] and first["shape"] == [H, W] and first["version"] == 0
    assert first["classes"] == ["background", "lv", "myo"] and first["remaining"] == 1
    assert (_decoded(first) == proposal).all()
    assert pool.candidate(top["id"])["state"] == "in review"
    assert pool.candidate(top["id"])["claimed_by"] == "local"
    image = client.get(first["image_url"])
    assert image.status_code == 200 and image.mimetype == "image/png"
    second = _next(client, pool, skip=[first["candidate"]])
    assert second["candidate"] != first["candidate"]
    assert _next(client, pool, skip=[first["candidate"], second["candidate"]])["done"] is True


def test_accept_stores_versions_with_the_reviewer_and_a_stale_save_is_409(client, pool):
    pool, proposal = pool
    item = _next(client, pool)
    cid = item["candidate"]
    edited = proposal.copy()
    edited[15:20, 20:30] = 2
    mask = {"encoding": "rle", "shape": [H, W], "runs": encode_runs(edited)}
    saved = client.post(item["save_url"], json={"action": "accept", "base_version": 0, "mask": mask})
    assert saved.status_code == 201, saved.get_data(as_text=True)
    assert saved.get_json()["version"] == 1
    stored = read_mask(pool.label_file(cid, 1))
    assert (stored == edited).all()
    cand = pool.candidate(cid)
    assert cand["state"] == "accepted" and cand["labels"][0]["by"] == "local"

    # a second reviewer who loaded version 0 saves later: refused, version 1 untouched, no version 2
    other = np.ones((H, W), np.uint8)
    stale = client.post(
        item["save_url"],
        json={
            "action": "accept",
            "base_version": 0,
            "mask": {"encoding": "rle", "shape": [H, W], "runs": encode_runs(other)},
        },
    )
    assert stale.status_code == 409
    assert "version 1 was saved meanwhile by local" in stale.get_json()["error"]["message"]
    assert (read_mask(pool.label_file(cid, 1)) == edited).all()
    assert pool.candidate(cid)["version"] == 1 and pool.label_file(cid, 2) is None

    # a PNG save over the newest version is version 2; version 1 is kept
    buffer = io.BytesIO()
    from PIL import Image

    Image.fromarray(other, mode="L").save(buffer, format="PNG")
    png = {"encoding": "png", "data": base64.b64encode(buffer.getvalue()).decode()}
    assert client.post(item["save_url"], json={"action": "accept", "base_version": 1, "mask": png}).status_code == 201
    assert (read_mask(pool.label_file(cid, 2)) == other).all() and (read_mask(pool.label_file(cid, 1)) == edited).all()


@pytest.mark.parametrize(
    ("mask", "said"),
    [
        ({"encoding": "rle", "shape": [H, W + 1], "runs": [0, H * (W + 1)]}, "mask.shape"),
        ({"encoding": "rle", "shape": [H, W], "runs": [0, 10**12]}, "covers"),
        ({"encoding": "rle", "shape": [H, W], "runs": [7, H * W]}, "classes 0..2"),
        ({"encoding": "rle", "shape": [H, W], "runs": [0, -1]}, "pairs of whole numbers"),
        ({"encoding": "png", "data": "not base64!"}, "base64"),
        ({"encoding": "gif"}, "mask.encoding"),
    ],
)
def test_a_mask_that_does_not_fit_is_refused_and_nothing_is_stored(client, pool, mask, said):
    pool, _ = pool
    item = _next(client, pool)
    answer = client.post(item["save_url"], json={"action": "accept", "base_version": 0, "mask": mask})
    assert answer.status_code == 400 and said in answer.get_json()["error"]["message"]
    assert pool.candidate(item["candidate"])["version"] == 0


def test_a_png_mask_of_another_size_is_refused_from_its_header(client, pool):
    from PIL import Image

    pool, _ = pool
    item = _next(client, pool)
    buffer = io.BytesIO()
    Image.fromarray(np.zeros((H * 2, W), np.uint8), mode="L").save(buffer, format="PNG")
    png = {"encoding": "png", "data": base64.b64encode(buffer.getvalue()).decode()}
    answer = client.post(item["save_url"], json={"action": "accept", "base_version": 0, "mask": png})
    assert answer.status_code == 400 and f"is {H * 2}x{W}" in answer.get_json()["error"]["message"]


def test_reject_and_skip(client, pool):
    pool, _ = pool
    item = _next(client, pool)
    answer = client.post(item["save_url"], json={"action": "reject"})
    assert answer.status_code == 200 and pool.candidate(item["candidate"])["state"] == "rejected"
    item = _next(client, pool)
    assert client.post(item["save_url"], json={"action": "skip"}).status_code == 200
    assert pool.candidate(item["candidate"])["state"] == "proposed"
    assert client.post(item["save_url"], json={"action": "sing"}).status_code == 400


def test_a_volume_candidate_is_reviewed_slice_by_slice_and_stored_whole(tmp_path):
    from PIL import Image

    data = tmp_path / "unlabelled"
    data.mkdir()
    volume = np.arange(4 * H * W, dtype=np.int16).reshape(4, H, W)
    np.save(data / "case.npy", volume)
    pool = create_pool(
        "volumes",
        {"kind": "folder", "root": str(data)},
        [{"path": "case.npy"}],
        dimensions=3,
        class_labels=["background", "lv"],
        jobs_dir=tmp_path / "jobs",
    )
    (cand,) = pool.candidates()
    proposal = np.zeros((4, H, W), np.uint8)
    proposal[2, 3:6, 4:9] = 1
    (pool.path / "proposals" / f"{cand['id']}.npy").write_bytes(encode_mask(proposal))
    pool.record_proposal(cand["id"], {"file": f"proposals/{cand['id']}.npy", "model_id": "m1"})
    app = create_app(tmp_path / "jobs", start_scheduler=False, testing=True, secret_key="k", data_roots=[data])
    client = app.test_client()
    client.environ_base["HTTP_X_CSRFTOKEN"] = client.get("/api/csrf-token").get_json()["csrf_token"]
    item = _next(client, pool)
    assert item["kind"] == "volume" and item["shape"] == [4, H, W] and (_decoded(item) == proposal).all()
    top = client.get(item["image_url"] + "?slice=3")
    with Image.open(io.BytesIO(top.get_data())) as image:
        assert image.size == (W, H) and np.asarray(image)[-1, -1] == 255  # the volume's brightest voxel
    assert client.get(item["image_url"] + "?slice=4").status_code == 400
    edited = proposal.copy()
    edited[0, 0, :] = 1
    mask = {"encoding": "rle", "shape": [4, H, W], "runs": encode_runs(edited)}
    assert client.post(item["save_url"], json={"action": "accept", "base_version": 0, "mask": mask}).status_code == 201
    assert (read_mask(pool.label_file(cand["id"], 1)) == edited).all()


def test_with_accounts_the_annotator_reviews_under_its_name_and_a_viewer_may_not(pool, tmp_path):
    from digits_core.accounts import AccountStore

    pool, proposal = pool
    store = AccountStore(tmp_path / "jobs")
    store.add_user("ann", "annotator", "password-ann")
    store.add_user("vic", "viewer", "password-vic")
    tokens = {name: store.create_token(name, "t") for name in ("ann", "vic")}
    app = create_app(
        tmp_path / "jobs", start_scheduler=False, testing=True, secret_key="k", data_roots=[tmp_path / "unlabelled"]
    )
    client = app.test_client()

    def call(name, path, **kw):
        return client.post(path, headers={"Authorization": f"Bearer {tokens[name]}"}, **kw)

    assert call("vic", f"/api/pools/{pool.id}/review/next", json={}).status_code == 403
    item = call("ann", f"/api/pools/{pool.id}/review/next", json={}).get_json()
    assert pool.candidate(item["candidate"])["claimed_by"] == "ann"
    mask = {"encoding": "rle", "shape": [H, W], "runs": encode_runs(proposal)}
    saved = call("ann", item["save_url"], json={"action": "accept", "base_version": 0, "mask": mask})
    assert saved.status_code == 201 and saved.get_json()["by"] == "ann"
    assert pool.candidate(item["candidate"])["labels"][-1]["by"] == "ann"


def test_a_2d_pool_of_16_bit_arrays_shows_them_scaled_to_8_bits(tmp_path):
    from PIL import Image

    data = tmp_path / "unlabelled"
    data.mkdir()
    np.save(data / "slice.npy", np.linspace(0, 4000, H * W).reshape(H, W).astype(np.uint16))
    pool = create_pool(
        "arrays", {"kind": "folder", "root": str(data)}, [{"path": "slice.npy"}], jobs_dir=tmp_path / "jobs"
    )
    (cand,) = pool.candidates()
    (pool.path / "proposals" / f"{cand['id']}.png").write_bytes(encode_mask(np.zeros((H, W), np.uint8)))
    pool.record_proposal(cand["id"], {"file": f"proposals/{cand['id']}.png", "model_id": "m1"})
    app = create_app(tmp_path / "jobs", start_scheduler=False, testing=True, secret_key="k", data_roots=[data])
    client = app.test_client()
    client.environ_base["HTTP_X_CSRFTOKEN"] = client.get("/api/csrf-token").get_json()["csrf_token"]
    item = _next(client, pool)
    assert item["kind"] == "image" and item["shape"] == [H, W]
    with Image.open(io.BytesIO(client.get(item["image_url"]).get_data())) as image:
        pixels = np.asarray(image)
    assert image.size == (W, H) and pixels[0, 0] == 0 and pixels[-1, -1] == 255


def test_an_unreachable_pacs_is_named_and_the_candidate_stays_in_the_queue(tmp_path, monkeypatch):
    from live_server import free_port

    from digits_core.labeling import create_pool

    url = f"http://127.0.0.1:{free_port()}/dicom-web"  # nothing listens there
    monkeypatch.setenv("DIGITS_DICOMWEB_SERVERS", f"pacs={url}")
    pool = create_pool(
        "pacs",
        {"kind": "dicomweb", "named_server": "pacs", "cache_folder": str(tmp_path / "cache")},
        [{"study": "1.2.3", "series": "1.2.3.4", "sop": "1.2.3.4.5"}],
        class_labels=["background", "lv"],
        jobs_dir=tmp_path / "jobs",
    )
    (cand,) = pool.candidates()
    pool.record_proposal(cand["id"], {"study": "1.2.3", "series": "1.2.3.9", "sop": "1.2.3.9.1", "model_id": "m"})
    app = create_app(tmp_path / "jobs", start_scheduler=False, testing=True, secret_key="k")
    client = app.test_client()
    client.environ_base["HTTP_X_CSRFTOKEN"] = client.get("/api/csrf-token").get_json()["csrf_token"]
    answer = client.post(f"/api/pools/{pool.id}/review/next", json={})
    assert answer.status_code == 502
    message = answer.get_json()["error"]["message"]
    assert cand["id"] in message and "1.2.3.4.5" in message and "127.0.0.1" in message
    after = pool.candidate(cand["id"])
    assert after["state"] == "proposed" and after["claimed_by"] is None and after["version"] == 0
