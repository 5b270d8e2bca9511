"""Benchmark: an `image-classification` dataset built from S3 versus from the same local folder.

Generates N 28×28 grayscale PNGs in 10 class folders, uploads them to a real
S3-compatible server on 127.0.0.1 (moto's standalone server, in a child
process, with signature checking), then builds the same dataset both ways
in the same run with :func:`digits_core.datasets.create_dataset`:

* **local** (baseline): ``folder=...``;
* **s3**: ``s3_path=...`` on the local server: parallel listing, each
  worker process fetching its objects over HTTP.

It also times ``digits upload-s3``'s :func:`upload_tree` (parallel PUTs,
then a second run that skips everything). It prints images/s of each, and
the ratio s3/local.

Read the S3 figure as a lower bound: moto spends about 10 ms of CPU per
request (measured: ~12 ms per GET without signature checks, ~17 ms with;
botocore's own client cost is ~2.5 ms per GET against a trivial server),
and here it shares the 2 CPUs with the dataset builder. Against a real S3 service each worker process waits on network
latency instead, so throughput grows with ``--workers`` well past the CPU
count.

Usage::

    .venv/bin/python bench/s3_ingest.py               # 2,000 images
    .venv/bin/python bench/s3_ingest.py --images 500 --workers 2
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def make_tree(root: Path, count: int) -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    for i in range(count):
        folder = root / "train" / str(i % 10)
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (28, 28), dtype=np.uint8)).save(folder / f"{i:05d}.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    from digits_core.datasets import create_dataset, open_dataset
    from digits_core.plugins.registry import registry
    from digits_core.sources import upload_tree
    from digits_core.sources.s3_testing import local_s3_server

    registry.get_data_ingestion("image-classification")  # plugin discovery before the clock
    common = {"image_type": "grayscale", "width": 28, "height": 28, "encoding": "none", "val_percent": 0}
    with tempfile.TemporaryDirectory() as tmp, local_s3_server() as s3:
        tmp = Path(tmp)
        make_tree(tmp / "data", args.images)
        location = s3.location("bench-bucket", "mnist")
        t0 = time.perf_counter()
        report = upload_tree(tmp / "data", location, workers=8)
        upload_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = upload_tree(tmp / "data", location, workers=8)
        skip_s = time.perf_counter() - t0
        assert len(report.uploaded) == len(again.skipped) == args.images

        t0 = time.perf_counter()
        local = create_dataset(
            "image-classification",
            {**common, "folder": str(tmp / "data" / "train")},
            workers=args.workers,
            jobs_dir=tmp / "jobs",
        )
        local_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        remote = create_dataset(
            "image-classification",
            {
                **common,
                "s3_endpoint_url": s3.endpoint,
                "s3_bucket": "bench-bucket",
                "s3_path": "mnist/train/",
                "s3_accesskey": s3.access_key,
                "s3_secretkey": s3.secret_key,
            },
            workers=args.workers,
            jobs_dir=tmp / "jobs",
        )
        s3_s = time.perf_counter() - t0
        a = open_dataset(local.id, jobs_dir=tmp / "jobs").read_all("train")
        b = open_dataset(remote.id, jobs_dir=tmp / "jobs").read_all("train")
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])

    n = args.images
    print(
        f"upload-s3: {n} files in {upload_s:.2f} s ({n / upload_s:.0f} files/s); "
        f"second run (all skipped) {skip_s:.2f} s ({n / skip_s:.0f} files/s)"
    )
    print(f"dataset from local folder (baseline): {local_s:.2f} s, {n / local_s:.0f} img/s")
    print(f"dataset from S3:                      {s3_s:.2f} s, {n / s3_s:.0f} img/s")
    print(f"ratio s3/local: {local_s / s3_s:.2f}  (workers={args.workers}; identical records checked)")


if __name__ == "__main__":
    main()
