"""``digits download``: real MNIST IDX and CIFAR pickle archives served by a local HTTP server.

The archives are generated here in the published formats (gzip IDX files;
tar.gz of Python-2-style pickles holding numpy arrays). The server runs on
127.0.0.1 in a thread and honours HTTP ``Range``; nothing touches the internet.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import os
import pickle
import socket
import tarfile
import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from digits_core.cli import main
from digits_core.download import ChecksumError, DownloadError, NetworkError, download_dataset
from digits_core.download.formats import write_idx

# -- archives in the published formats -------------------------------------------------


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def make_mnist(folder: Path, n_train=30, n_test=12, seed=0):
    rng = np.random.default_rng(seed)
    data = {}
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        rng.shuffle(labels)
        write_idx(folder / f"{prefix}-images-idx3-ubyte.gz", images)
        write_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", labels)
        data["train" if prefix == "train" else "test"] = (images, labels)
    return data


def _pickle(obj) -> bytes:
    return pickle.dumps(obj, protocol=2)


def _add(tar: tarfile.TarFile, name: str, payload: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(payload)
    tar.addfile(info, io.BytesIO(payload))


def make_cifar10(folder: Path, per_batch=6, seed=1):
    rng = np.random.default_rng(seed)
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    out = {"train": [], "test": []}
    path = folder / "cifar-10-python.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        _add(tar, "cifar-10-batches-py/batches.meta", _pickle({"label_names": names, "num_vis": 3072}))
        for member, stage in [(f"data_batch_{i}", "train") for i in range(1, 6)] + [("test_batch", "test")]:
            data = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
            labels = [int(x) for x in rng.integers(0, 10, per_batch)]
            files = [f"{names[l]}_s_{member}_{i:03d}.png" for i, l in enumerate(labels)]
            batch = {"batch_label": f"{member} of 6", "labels": labels, "data": data, "filenames": files}
            _add(tar, f"cifar-10-batches-py/{member}", _pickle(batch))
            out[stage].append((data, labels, files))
    return path, names, out


def make_cifar100(folder: Path, n_train=24, n_test=8, seed=2):
    rng = np.random.default_rng(seed)
    fine = [f"fine{i:02d}" for i in range(6)]
    coarse = ["c_big", "c_small"]
    fine_to_coarse = [0, 1, 0, 1, 0, 1]
    out = {}
    path = folder / "cifar-100-python.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        _add(tar, "cifar-100-python/meta", _pickle({"fine_label_names": fine, "coarse_label_names": coarse}))
        for stage, n in (("train", n_train), ("test", n_test)):
            data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
            fl = [int(x) for x in rng.integers(0, len(fine), n)]
            cl = [fine_to_coarse[x] for x in fl]
            files = [f"img_{stage}_{i:04d}.png" for i in range(n)]
            batch = {"batch_label": stage, "fine_labels": fl, "coarse_labels": cl, "data": data, "filenames": files}
            _add(tar, f"cifar-100-python/{stage}", _pickle(batch))
            out[stage] = (data, fl, cl, files)
    return path, fine, coarse, out


# -- a local HTTP server with Range support -------------------------------------------


class FileServer:
    """Serve a folder on 127.0.0.1; records requests; can cut the first response short."""

    def __init__(self, root: Path):
        self.root = root
        self.requests: list[tuple[str, str | None]] = []
        self.cut_first_after: int | None = None
        self.ignore_range = False
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                rng = self.headers.get("Range")
                server.requests.append((self.path, rng))
                path = server.root / self.path.lstrip("/")
                if not path.is_file():
                    self.send_error(404)
                    return
                data = path.read_bytes()
                start = 0
                if rng and rng.startswith("bytes=") and not server.ignore_range:
                    start = int(rng[6:].split("-")[0])
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()
                if server.cut_first_after is not None:
                    cut, server.cut_first_after = server.cut_first_after, None
                    self.wfile.write(body[:cut])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    srv = FileServer(root)
    yield srv
    srv.close()


def closed_port_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there any more
    return f"http://127.0.0.1:{port}/"


def read_png(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image)


# -- tests ------------------------------------------------------------------------------


def test_mnist_from_http_server_decodes_images_and_labels(server, tmp_path):
    data = make_mnist(server.root)
    sums = {p.name: md5(p) for p in server.root.iterdir()}
    out = tmp_path / "mnist"
    result = download_dataset("mnist", out, source=server.url, checksums=sums)

    assert (out / "labels.txt").read_text().split() == [str(i) for i in range(10)]
    for stage, (images, labels) in data.items():
        lines = (out / f"{stage}.txt").read_text().splitlines()
        assert len(lines) == len(labels)
        for index, line in enumerate(lines):
            rel, label = line.rsplit(" ", 1)
            assert int(label) == labels[index]
            assert rel == f"{stage}/{labels[index]}/{index:05d}.png"
            pixels = read_png(out / rel)
            assert pixels.dtype == np.uint8 and pixels.shape == (28, 28)
            np.testing.assert_array_equal(pixels, images[index])
        on_disk = sorted(p.name for p in (out / stage).iterdir())
        assert on_disk == [str(i) for i in range(10)]
    assert result.trees[0].counts == {"train": 30, "test": 12}
    assert (out / "downloads" / "train-images-idx3-ubyte.gz").is_file()
    assert not list(out.rglob("*.part")) and not list(out.glob(".*.partial"))
    (command,) = result.next_steps()
    assert command.startswith("digits dataset create image-classification")
    assert str(out / "train") in command


@pytest.mark.slow
def test_printed_next_step_builds_the_dataset(server, tmp_path, capsys):
    import shlex

    from digits_core.datasets import open_dataset
    from digits_core.jobs import JobStore

    data = make_mnist(server.root, n_train=20, n_test=10)
    out = tmp_path / "mnist"
    assert main(["download", "mnist", str(out), "--source", server.url, "--no-verify", "-q"]) == 0
    command = next(line.strip() for line in capsys.readouterr().out.splitlines() if "dataset create" in line)
    jobs = tmp_path / "jobs"
    argv = shlex.split(command)[1:] + ["--workers", "1", "--min-per-class", "1", "--val-percent", "0"]
    assert main(["--jobs-dir", str(jobs), *argv]) == 0, capsys.readouterr()
    (job,) = JobStore(jobs).list()
    dataset = open_dataset(job.id, jobs_dir=jobs)
    assert dataset.class_labels == [str(i) for i in range(10)]
    assert dataset.count("train") == 20 and dataset.count("test") == 10
    features, labels = dataset.read_all("test")
    assert features.shape == (10, 28, 28, 1)
    images, truth = data["test"]
    assert sorted(labels.tolist()) == sorted(truth.tolist())
    # each stored test image is one of the originals, with its label
    originals = {images[i].tobytes(): int(truth[i]) for i in range(len(truth))}
    for feature, label in zip(features, labels):
        assert originals[feature[:, :, 0].tobytes()] == label


def test_mnist_invert_matches_digits6(server, tmp_path):
    data = make_mnist(server.root, n_train=10, n_test=10)
    out = tmp_path / "inv"
    download_dataset("mnist", out, source=server.url, verify=False, invert=True)
    images, _ = data["train"]
    np.testing.assert_array_equal(read_png(out / (out / "train.txt").read_text().split()[0]), 255 - images[0])


def test_cifar10_from_http_server(server, tmp_path):
    path, names, batches = make_cifar10(server.root)
    out = tmp_path / "cifar10"
    result = download_dataset("cifar10", out, source=server.url + path.name, checksums={path.name: md5(path)})
    assert (out / "labels.txt").read_text().splitlines() == names
    for stage in ("train", "test"):
        data = np.concatenate([b[0] for b in batches[stage]])
        labels = [label for b in batches[stage] for label in b[1]]
        files = [f for b in batches[stage] for f in b[2]]
        lines = (out / f"{stage}.txt").read_text().splitlines()
        assert len(lines) == len(labels) == result.trees[0].counts[stage]
        for index, line in enumerate(lines):
            rel, label = line.rsplit(" ", 1)
            assert int(label) == labels[index]
            assert rel == f"{stage}/{names[labels[index]]}/{files[index]}"
            expected = data[index].reshape(3, 32, 32).transpose(1, 2, 0)
            np.testing.assert_array_equal(read_png(out / rel), expected)


def test_cifar100_fine_and_coarse_trees(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    path, fine, coarse, data = make_cifar100(src)
    out = tmp_path / "cifar100"
    # a local archive file as --source: no network at all
    result = download_dataset("cifar100", out, source=str(path), checksums={path.name: md5(path)})
    assert [t.folder for t in result.trees] == [out / "fine", out / "coarse"]
    assert (out / "fine" / "labels.txt").read_text().splitlines() == fine
    assert (out / "coarse" / "labels.txt").read_text().splitlines() == coarse
    for stage in ("train", "test"):
        pixels, fl, cl, files = data[stage]
        fine_lines = (out / "fine" / f"{stage}.txt").read_text().splitlines()
        coarse_lines = (out / "coarse" / f"{stage}.txt").read_text().splitlines()
        assert len(fine_lines) == len(coarse_lines) == len(fl)
        for i, (fline, cline) in enumerate(zip(fine_lines, coarse_lines)):
            frel, flabel = fline.rsplit(" ", 1)
            crel, clabel = cline.rsplit(" ", 1)
            assert (int(flabel), int(clabel)) == (fl[i], cl[i])
            assert frel == f"{stage}/{fine[fl[i]]}/{files[i]}"
            assert crel == f"{stage}/{coarse[cl[i]]}/{files[i]}"
            expected = pixels[i].reshape(3, 32, 32).transpose(1, 2, 0)
            np.testing.assert_array_equal(read_png(out / "fine" / frel), expected)
            np.testing.assert_array_equal(read_png(out / "coarse" / crel), expected)
    assert not (out / "downloads").exists()  # the local archive was used in place


def test_checksum_failure_removes_the_bad_file(server, tmp_path):
    make_mnist(server.root, n_train=10, n_test=10)
    out = tmp_path / "bad"
    sums = {p.name: md5(p) for p in server.root.iterdir()}
    sums["t10k-images-idx3-ubyte.gz"] = "0" * 32
    with pytest.raises(ChecksumError) as info:
        download_dataset("mnist", out, source=server.url, checksums=sums)
    message = str(info.value)
    assert "t10k-images-idx3-ubyte.gz" in message and "0" * 32 in message and "--source" in message
    assert not (out / "downloads" / "t10k-images-idx3-ubyte.gz").exists()
    assert not list((out / "downloads").glob("*.part"))
    assert not (out / "train").exists()


def test_official_checksum_rejects_a_lookalike(server, tmp_path):
    make_mnist(server.root, n_train=10, n_test=10)
    with pytest.raises(ChecksumError, match="f68b3c2dcbeaaa9fbdd348bbdeb94873"):
        download_dataset("mnist", tmp_path / "x", source=server.url)


def test_interrupted_download_resumes_with_range(server, tmp_path):
    path, _, _ = make_cifar10(server.root, per_batch=40)
    size = path.stat().st_size
    out = tmp_path / "resume"
    server.cut_first_after = size // 2
    with pytest.raises(DownloadError, match="run the same command again to resume"):
        download_dataset("cifar10", out, source=server.url, checksums={path.name: md5(path)}, timeout=5)
    part = out / "downloads" / (path.name + ".part")
    assert part.stat().st_size == size // 2
    result = download_dataset("cifar10", out, source=server.url, checksums={path.name: md5(path)}, timeout=5)
    assert server.requests[-1] == (f"/{path.name}", f"bytes={size // 2}-")
    assert md5(out / "downloads" / path.name) == md5(path) and not part.exists()
    assert result.trees[0].counts == {"train": 200, "test": 40}


def test_server_without_range_support_restarts_cleanly(server, tmp_path):
    path, _, _ = make_cifar10(server.root, per_batch=10)
    out = tmp_path / "norange"
    part = out / "downloads" / (path.name + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(path.read_bytes()[:1000])  # a partial file from an earlier run
    server.ignore_range = True  # answers 200 with the whole file
    download_dataset("cifar10", out, source=server.url, checksums={path.name: md5(path)})
    assert server.requests[-1][1] == "bytes=1000-"
    assert md5(out / "downloads" / path.name) == md5(path)


def test_offline_error_names_the_url_and_the_way_out(tmp_path):
    url = closed_port_url()
    with pytest.raises(NetworkError) as info:
        download_dataset("cifar10", tmp_path / "off", source=url, timeout=5)
    message = str(info.value)
    assert url + "cifar-10-python.tar.gz" in message
    assert "--source" in message and "cifar-10-python.tar.gz" in message


def test_second_run_skips_finished_work(server, tmp_path):
    make_mnist(server.root, n_train=10, n_test=10)
    out = tmp_path / "again"
    download_dataset("mnist", out, source=server.url, verify=False)
    count = len(server.requests)
    stamp = (out / "train.txt").stat().st_mtime_ns
    result = download_dataset("mnist", out, source=server.url, verify=False)
    assert len(server.requests) == count  # nothing fetched
    assert (out / "train.txt").stat().st_mtime_ns == stamp  # nothing rewritten
    assert set(result.skipped) == {"train", "test"}
    # a stage lost since is rebuilt from the kept archives, without the network
    import shutil

    shutil.rmtree(out / "test")
    result = download_dataset("mnist", out, source=closed_port_url(), verify=False)
    assert result.skipped == ["train"] and (out / "test").is_dir()


def test_refuses_pickles_that_run_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    path = tmp_path / "cifar-10-python.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        _add(tar, "cifar-10-batches-py/batches.meta", pickle.dumps({"label_names": Evil()}, protocol=2))
    with pytest.raises(DownloadError, match="refusing to load"):
        download_dataset("cifar10", tmp_path / "out", source=str(path), verify=False)


def test_cli_prints_next_step_and_offline_message(server, tmp_path, capsys):
    make_mnist(server.root, n_train=10, n_test=10)
    out = tmp_path / "cli"
    assert main(["download", "mnist", str(out), "--source", server.url, "--no-verify"]) == 0
    printed = capsys.readouterr().out
    assert "digits dataset create image-classification" in printed and str(out / "test") in printed
    assert main(["download", "cifar10", str(tmp_path / "off"), "--source", closed_port_url(), "--timeout", "5"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: Cannot download cifar-10-python.tar.gz") and "--source" in err
