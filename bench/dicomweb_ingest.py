"""Benchmark: a segmentation dataset built over DICOMweb versus from the same DICOM files on disk.

Writes synthetic cardiac MR studies (real DICOM, :mod:`digits_data_dicomweb.synth`) with DICOM-SEG ground
truth, uploads them to a private Orthanc on 127.0.0.1 (Debian's ``orthanc`` + ``orthanc-dicomweb``), then
builds the same left-ventricle dataset three ways in the same run with
:func:`digits_core.datasets.create_dataset`:

* **disk** (baseline): ``image-sunnybrook`` on the files (DICOM + contour files);
* **dicomweb cold**: ``dicomweb-segmentation`` with an empty cache (QIDO-RS, WADO-RS of every SEG and
  image, at most ``--parallel`` requests in flight);
* **dicomweb cached**: the same again; every instance comes from the local cache, the server answers
  only the searches.

Prints labelled images/s of each and the ratios to the disk build (target: cached >= 0.8x disk).

Usage::

    .venv/bin/python bench/dicomweb_ingest.py                 # 8 patients, 128x128, 4 slices
    .venv/bin/python bench/dicomweb_ingest.py --cases 4 --size 64
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path


def timed_build(plugin: str, form: dict, jobs: Path, workers: int):
    from digits_core.datasets import create_dataset

    start = time.perf_counter()
    job = create_dataset(plugin, form, jobs_dir=jobs, workers=workers)
    seconds = time.perf_counter() - start
    from digits_core.datasets import open_dataset

    dataset = open_dataset(job.id, jobs)
    count = dataset.count("train") + dataset.count("val")
    return count, seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=8, help="patients (default 8)")
    parser.add_argument("--size", type=int, default=128, help="image size (default 128)")
    parser.add_argument("--slices", type=int, default=4, help="slices per patient (default 4)")
    parser.add_argument("--workers", type=int, default=2, help="encoder processes (default 2)")
    parser.add_argument("--parallel", type=int, default=4, help="WADO-RS requests in flight (default 4)")
    args = parser.parse_args(argv)
    logging.getLogger("digits_data_dicomweb").setLevel(logging.ERROR)

    from digits_data_dicomweb.orthanc import OrthancServer
    from digits_data_dicomweb.synth import generate

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        result, segs = generate(root / "data", cases=args.cases, size=args.size, slices=args.slices)
        with OrthancServer(root / "orthanc") as pacs:
            pacs.upload(result.image_folder, *segs)
            jobs = root / "jobs"
            disk_form = {
                "image_folder": str(result.image_folder),
                "contour_folder": str(result.contour_folder),
                "pct_val": 25,
            }
            web_form = {
                "server_url": pacs.dicomweb_url,
                "username": pacs.username,
                "password": pacs.password,
                "cache_folder": str(root / "cache"),
                "pct_val": 25,
                "max_parallel": args.parallel,
            }
            runs = [
                ("disk (image-sunnybrook)", "image-sunnybrook", disk_form),
                ("dicomweb, cold cache", "dicomweb-segmentation", web_form),
                ("dicomweb, cached", "dicomweb-segmentation", web_form),
            ]
            figures = []
            for label, plugin, form in runs:
                count, seconds = timed_build(plugin, form, jobs, args.workers)
                figures.append((label, count, seconds, count / seconds))
    print(
        f"{args.cases} patients, {args.size}x{args.size}, {args.slices} slices, workers={args.workers}, "
        f"parallel requests={args.parallel}"
    )
    base = figures[0][3]
    for label, count, seconds, rate in figures:
        print(
            f"  {label:<24} {count:5d} images in {seconds:6.2f} s = {rate:8.1f} img/s   ratio {rate / base:5.2f}x disk"
        )
    counts = {count for _, count, _, _ in figures}
    if len(counts) != 1:
        print(f"  WARNING: the builds hold different image counts: {sorted(counts)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
