"""Benchmark: `image-classification` dataset jobs versus a naive single-process script.

Generates real image files, then measures in the same run, each in a fresh
process (imports excluded from the timing):

* **naive**: list the class folders, decode every file with Pillow, write
  the raw pixels + label to LMDB, one write transaction per 1,000 records;
* **job**: :func:`digits_core.datasets.create_dataset` with the
  ``image-classification`` plugin (form validation, job folder, itemize,
  worker pool, LMDB, mean image, dataset.json, atomic publish). Plugin
  discovery (it imports the plugin modules) happens before the clock starts,
  as imports do for the naive script.

Workloads (sizes as in issue 3; smaller ones with --png/--jpeg):

* ``png``: N 28×28 grayscale PNGs in 10 class folders; job with encoding
  ``none`` (decodes like the naive script), ``png`` (DIGITS's default: the
  same-size source PNGs are decoded and kept) and ``passthrough``;
* ``jpeg``: M 256×256 colour JPEGs in 10 class folders; job with encoding
  ``passthrough`` (the worker only reads the bytes and parses the header)
  and ``none`` (decodes every image).

It prints images/s for each, the ratio job/naive, the CPU seconds used
(all processes: on a busy shared machine the wall-clock ratio mostly shows
how much CPU the other processes leave), and the peak resident
memory (parent, and the largest worker) of each job; the PNG job is also run
on a quarter of the images to show that peak memory does not grow with the
number of images.

Usage::

    .venv/bin/python bench/dataset_create.py                 # 20,000 PNGs + 2,000 JPEGs
    .venv/bin/python bench/dataset_create.py --png 5000 --jpeg 500 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLASSES = 10


def generate(root: Path, count: int, size: int, kind: str) -> None:
    """Write ``count`` images of ``size``×``size`` into ``root/<class>/``."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for c in range(CLASSES):
        (root / f"class{c}").mkdir(parents=True, exist_ok=True)
    for i in range(count):
        folder = root / f"class{i % CLASSES}"
        if kind == "png":
            arr = rng.integers(0, 256, (size, size), dtype=np.uint8)
            arr[: size // 2] //= 2  # some structure so PNG compresses a little
            Image.fromarray(arr).save(folder / f"{i:06d}.png", compress_level=6)
        else:
            base = rng.integers(0, 256, (size // 16, size // 16, 3), dtype=np.uint8)
            image = Image.fromarray(base).resize((size, size), Image.BILINEAR)
            image.save(folder / f"{i:06d}.jpg", quality=90)


# -- what each measured process runs ---------------------------------------------

def run_naive(root: str, out: str, gray: bool) -> int:
    """The naive script: PIL decode + one LMDB write transaction per 1,000 records."""
    import struct

    import lmdb
    import numpy as np
    from PIL import Image

    files = []
    for label, name in enumerate(sorted(os.listdir(root))):
        folder = os.path.join(root, name)
        files.extend((os.path.join(folder, f), label) for f in sorted(os.listdir(folder)))
    env = lmdb.open(out, map_size=1 << 36)
    txn = env.begin(write=True)
    for i, (path, label) in enumerate(files):
        with Image.open(path) as image:
            arr = np.asarray(image.convert("L" if gray else "RGB"))
        txn.put(b"%08d" % i, arr.tobytes() + struct.pack("<q", label))
        if (i + 1) % 1000 == 0:
            txn.commit()
            txn = env.begin(write=True)
    txn.commit()
    env.close()
    return len(files)


def run_job(root: str, out: str, gray: bool, size: int, encoding: str, workers: int | None,
            max_per_class: int | None) -> int:
    """The real dataset job."""
    from digits_core.datasets import create_dataset, open_dataset

    form = {"folder": root, "image_type": "grayscale" if gray else "color", "width": size, "height": size,
            "encoding": encoding}
    if max_per_class:
        form["max_per_class"] = max_per_class
    job = create_dataset("image-classification", form, workers=workers, jobs_dir=out)
    ds = open_dataset(job.path)
    return sum(ds.count(s) for s in ds.stages)


def child_main(spec: dict) -> None:
    out = tempfile.mkdtemp(prefix="bench-out-", dir=spec["tmp"])
    if spec["what"] == "job":  # plugin discovery imports the plugins: like imports, not timed
        from digits_core import registry

        registry.data_ingestions()
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    if spec["what"] == "naive":
        count = run_naive(spec["root"], out, spec["gray"])
    else:
        count = run_job(spec["root"], out, spec["gray"], spec["size"], spec["encoding"], spec["workers"],
                        spec.get("max_per_class"))
    seconds = time.perf_counter() - start
    shutil.rmtree(out, ignore_errors=True)
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (me.ru_utime + me.ru_stime - before.ru_utime - before.ru_stime) + kids.ru_utime + kids.ru_stime
    print(json.dumps({"seconds": seconds, "count": count, "cpu_s": round(cpu, 3), "rss_mb": round(me.ru_maxrss / 1024, 1),
                      "worker_rss_mb": round(kids.ru_maxrss / 1024, 1)}))


def measure(spec: dict) -> dict:
    """Run one measurement in a fresh Python process."""
    result = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], check=True,
                            capture_output=True, text=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def best_of(spec: dict, repeat: int) -> dict:
    runs = [measure(spec) for _ in range(repeat)]
    median = statistics.median(r["seconds"] for r in runs)
    run = min(runs, key=lambda r: abs(r["seconds"] - median))
    run["rate"] = run["count"] / run["seconds"]
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--png", type=int, default=20000, help="number of 28x28 PNGs (0 skips)")
    parser.add_argument("--jpeg", type=int, default=2000, help="number of 256x256 JPEGs (0 skips)")
    parser.add_argument("--workers", type=int, default=None, help="job worker processes (default: CPUs)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement (median is reported)")
    parser.add_argument("--data-dir", default=None, help="keep generated images here (reused when present)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(json.loads(args.child))
        return 0

    tmp = tempfile.mkdtemp(prefix="digits-bench-")
    data = Path(args.data_dir) if args.data_dir else Path(tmp) / "data"
    print(f"cpus: {len(os.sched_getaffinity(0))}, workers: {args.workers or 'default (CPUs)'}, "
          f"repeat: {args.repeat}, load average: {os.getloadavg()[0]:.2f}")
    try:
        workloads = []
        if args.png:
            workloads.append(("png", args.png, 28, True, ["none", "png", "passthrough"]))
        if args.jpeg:
            workloads.append(("jpeg", args.jpeg, 256, False, ["passthrough", "none"]))
        for kind, count, size, gray, encodings in workloads:
            root = data / f"{kind}-{count}"
            if not root.exists():
                t = time.perf_counter()
                generate(root, count, size, kind)
                print(f"generated {count} {size}x{size} {kind.upper()}s in {time.perf_counter() - t:.1f} s")
            base = {"root": str(root), "gray": gray, "size": size, "tmp": tmp, "workers": args.workers}
            naive = best_of({**base, "what": "naive"}, args.repeat)
            print(f"\n{kind.upper()} {count} x {size}x{size}")
            print(f"  naive single process : {naive['rate']:9.0f} img/s  ({naive['seconds']:.2f} s, "
                  f"CPU {naive['cpu_s']:.2f} s, peak RSS {naive['rss_mb']:.0f} MB)")
            for encoding in encodings:
                job = best_of({**base, "what": "job", "encoding": encoding}, args.repeat)
                print(f"  job, encoding {encoding:<11}: {job['rate']:9.0f} img/s  ({job['seconds']:.2f} s, "
                      f"CPU {job['cpu_s']:.2f} s)  ratio {job['rate'] / naive['rate']:.2f}x  "
                      f"peak RSS parent {job['rss_mb']:.0f} MB, worker {job['worker_rss_mb']:.0f} MB")
            if kind == "png":
                quarter = best_of({**base, "what": "job", "encoding": "none",
                                   "max_per_class": max(2, count // CLASSES // 4)}, 1)
                print(f"  memory check: job on {quarter['count']} images: peak RSS parent {quarter['rss_mb']:.0f} MB, "
                      f"worker {quarter['worker_rss_mb']:.0f} MB (compare with the full run above)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
