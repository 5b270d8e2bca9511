"""Benchmark: `image-classification` dataset jobs versus a naive single-process script.

Generates real image files, then measures in the same run, each in a fresh
process:

* **naive**: list the class folders, decode every file with Pillow, store
  what the job stores for that encoding (``none``: the raw pixels; ``png``:
  the source PNG's bytes when it already is a PNG of the right size, else a
  PNG encoding, compress level 1 as the job uses) with its label in LMDB, one
  write transaction per 1,000 records;
* **job**: :func:`digits_core.datasets.create_dataset` with the
  ``image-classification`` plugin (form validation, job folder and lock,
  itemize, worker pool with shared-memory records, LMDB, mean image,
  dataset.json, fsync, atomic publish). Imports and plugin discovery happen
  before the clock starts, as imports do for the naive script;
* **whole process**: ``digits dataset create`` as a user runs it versus
  ``python naive.py``, both timed from ``exec`` to exit (interpreter start,
  imports, plugin discovery included); it also prints how much of the
  command's time is spent outside the job (start-up before the first
  record is itemized, and exit).

Workloads: N 28×28 grayscale PNGs and M 256×256 colour JPEGs in 10 class
folders; encodings ``none`` and ``png`` against the naive script doing the
same work, and ``passthrough`` (no decoding) against the ``none`` naive
script. It prints images/s, the ratio job/naive, the CPU seconds used (all
processes: on a busy machine the wall-clock ratio mostly shows how much CPU
the other processes leave) and the peak resident memory (parent, largest
worker); each job is also run on a quarter of the images to show that peak
memory does not grow with the number of images.

The run starts and ends by measuring how many cores this machine gives
(one busy process per CPU for half a second: the CPU seconds they got per
wall second), and ends with every ratio next to its target (issue 17:
1.8× for the image workloads, 1.6× for the whole process) and the CPU
ratio (naive CPU seconds / job CPU seconds, which another process's load
hardly moves).

Usage::

    .venv/bin/python bench/dataset_create.py                 # 30,000 PNGs + 2,000 JPEGs
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

from _quiet import LoadGuard, add_guard_args  # bench/: the load guard every bench shares

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


def run_naive(root: str, out: str, gray: bool, encoding: str = "none") -> int:
    """The naive script: PIL decode, store raw pixels or PNG bytes, one LMDB transaction per 1,000 records."""
    import io
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
        with open(path, "rb") as handle:
            data = handle.read()
        with Image.open(io.BytesIO(data)) as image:
            is_png = image.format == "PNG"
            arr = np.asarray(image.convert("L" if gray else "RGB"))
        if encoding == "png":
            if not is_png:
                buffer = io.BytesIO()
                Image.fromarray(arr).save(buffer, format="PNG", compress_level=1)
                data = buffer.getvalue()
            value = data
        else:
            value = arr.tobytes()
        txn.put(b"%08d" % i, value + struct.pack("<q", label))
        if (i + 1) % 1000 == 0:
            txn.commit()
            txn = env.begin(write=True)
    txn.commit()
    env.close()
    return len(files)


def job_form(root: str, gray: bool, size: int, encoding: str, max_per_class: int | None = None) -> dict:
    form = {
        "folder": root,
        "image_type": "grayscale" if gray else "color",
        "width": size,
        "height": size,
        "encoding": encoding,
    }
    if max_per_class:
        form["max_per_class"] = max_per_class
    return form


def run_job(spec: dict, out: str) -> int:
    """The real dataset job."""
    from digits_core.datasets import create_dataset, open_dataset

    form = job_form(spec["root"], spec["gray"], spec["size"], spec["encoding"], spec.get("max_per_class"))
    job = create_dataset("image-classification", form, workers=spec["workers"], jobs_dir=out)
    ds = open_dataset(job.path)
    return sum(ds.count(s) for s in ds.stages)


def child_main(spec: dict) -> None:
    out = tempfile.mkdtemp(prefix="bench-out-", dir=spec["tmp"])
    if spec["what"] == "job":  # plugin discovery imports the plugins: like imports, not timed
        from digits_core import registry

        registry.data_ingestions()
    else:
        import lmdb  # noqa: F401 - imports are not timed
        import numpy  # noqa: F401
        from PIL import Image  # noqa: F401
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    if spec["what"] == "naive":
        count = run_naive(spec["root"], os.path.join(out, "db"), spec["gray"], spec["encoding"])
    else:
        count = run_job(spec, out)
    seconds = time.perf_counter() - start
    shutil.rmtree(out, ignore_errors=True)
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (me.ru_utime + me.ru_stime - before.ru_utime - before.ru_stime) + kids.ru_utime + kids.ru_stime
    print(
        json.dumps(
            {
                "seconds": seconds,
                "count": count,
                "cpu_s": round(cpu, 3),
                "rss_mb": round(me.ru_maxrss / 1024, 1),
                "worker_rss_mb": round(kids.ru_maxrss / 1024, 1),
            }
        )
    )


def measure(spec: dict) -> dict:
    """Run one measurement in a fresh Python process."""
    result = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(spec)], check=True, capture_output=True, text=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def median_of(spec: dict, repeat: int) -> dict:
    runs = [measure(spec) for _ in range(repeat)]
    median = statistics.median(r["seconds"] for r in runs)
    run = min(runs, key=lambda r: abs(r["seconds"] - median))
    run["rate"] = run["count"] / run["seconds"]
    return run


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def cores_available(seconds: float = 0.5) -> float:
    """CPU seconds per wall second that one busy process per CPU gets now (2.0 on an idle 2-core machine)."""
    import multiprocessing

    count = len(os.sched_getaffinity(0))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    procs = [multiprocessing.get_context("fork").Process(target=_busy, args=(seconds,)) for _ in range(count)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)) / wall


# -- whole processes ---------------------------------------------------------------


def whole_process(cmd: list[str], env: dict | None = None) -> tuple[float, float]:
    """Wall and CPU seconds (children included) of one process, from exec to exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


#: Runs `digits dataset create` (arguments after the marks file) and writes when each phase ended.
STARTUP_DRIVER = """
import json, sys, time
marks = {"start": time.time()}
import digits_core.cli as cli
marks["imports"] = time.time()
from digits_core.plugins.registry import registry
registry.data_ingestions()
marks["plugin discovery"] = time.time()
import digits_core.datasets.create as create
import digits_core.datasets.pool as pool
itemize, imap = create._Build._itemize, pool.WorkerPool.imap
def timed_itemize(self, plugin):
    marks.setdefault("job set-up", time.time())
    return itemize(self, plugin)
def timed_imap(self, *args, **kwargs):
    for item in imap(self, *args, **kwargs):
        marks.setdefault("itemize, workers, first chunk", time.time())
        yield item
create._Build._itemize, pool.WorkerPool.imap = timed_itemize, timed_imap
code = cli.main(sys.argv[2:])
marks["rest of the job"] = time.time()
with open(sys.argv[1], "w") as out:
    json.dump(marks, out)
sys.exit(code)
"""


def startup_phases(create_args: list[str], tmp: str, env: dict, runs: int = 3) -> dict[str, float]:
    """Median seconds of each phase of a small `digits dataset create`, from exec to exit."""
    driver, marks_file = Path(tmp) / "startup_driver.py", Path(tmp) / "marks.json"
    driver.write_text(STARTUP_DRIVER)
    phases: dict[str, list[float]] = {}
    for _ in range(runs):
        launched = time.time()
        subprocess.run(
            [sys.executable, str(driver), str(marks_file)] + create_args, check=True, stdout=subprocess.DEVNULL, env=env
        )
        ended = time.time()
        marks = json.loads(marks_file.read_text())
        previous = launched
        for name, stamp in list(marks.items()) + [("exit", ended)]:
            phases.setdefault("interpreter" if name == "start" else name, []).append(stamp - previous)
            previous = stamp
    return {name: statistics.median(values) for name, values in phases.items()}


def bench_whole_process(root: Path, tmp: str, workers: int | None, repeat: int) -> dict:
    # As installed: byte-code caches written and warm (a shell may set PYTHONDONTWRITEBYTECODE).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    tiny = Path(tmp) / "tiny"
    generate(tiny, 20, 8, "png")
    create = [
        sys.executable,
        "-m",
        "digits_core",
        "--jobs-dir",
        f"{tmp}/tiny-jobs",
        "dataset",
        "create",
        "image-classification",
        "--image-type",
        "grayscale",
        "--quiet",
    ]
    whole_process(create + ["--folder", str(tiny), "--width", "8", "--height", "8"], env)  # warm-up
    fixed = statistics.median(
        whole_process(create + ["--folder", str(tiny), "--width", "8", "--height", "8"], env)[0] for _ in range(3)
    )
    phases = startup_phases(create[3:] + ["--folder", str(tiny), "--width", "8", "--height", "8"], tmp, env)
    naive_script = Path(tmp) / "naive.py"
    naive_script.write_text(
        f"import sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from dataset_create import run_naive\n"
        "print(run_naive(sys.argv[1], sys.argv[2], True, 'none'))\n"
    )
    naive_runs, job_runs, outside = [], [], []
    for i in range(repeat):
        naive_runs.append(whole_process([sys.executable, str(naive_script), str(root), f"{tmp}/naive-db-{i}"], env))
        jobs = Path(tmp) / f"jobs-{i}"
        cmd = [
            sys.executable,
            "-m",
            "digits_core",
            "--jobs-dir",
            str(jobs),
            "dataset",
            "create",
            "image-classification",
            "--folder",
            str(root),
            "--image-type",
            "grayscale",
            "--width",
            "28",
            "--height",
            "28",
            "--encoding",
            "none",
            "--quiet",
        ] + (["--workers", str(workers)] if workers else [])
        job_runs.append(whole_process(cmd, env))
        (info,) = [json.loads(p.read_text()) for p in jobs.glob("*/dataset/dataset.json")]
        timing = info["timing"]
        outside.append((job_runs[-1][0] - timing["total_s"], timing["itemize_s"]))
        shutil.rmtree(jobs, ignore_errors=True)
    naive = statistics.median(w for w, _ in naive_runs)
    job = statistics.median(w for w, _ in job_runs)
    out_s = statistics.median(o for o, _ in outside)
    itemize = statistics.median(i for _, i in outside)
    print(f"\nWHOLE PROCESS on {root.name} (exec to exit, median of {repeat})")
    print(f"  python naive.py               : {naive:6.2f} s  (CPU {naive_runs[0][1]:.2f} s)")
    print(f"  digits dataset create (none)  : {job:6.2f} s  (CPU {job_runs[0][1]:.2f} s)  ratio {naive / job:.2f}x")
    print(
        f"  of which outside the job (interpreter, imports, plugin discovery, exit): {out_s:.2f} s; "
        f"itemize {itemize:.2f} s"
    )
    print(f"  start-up and exit alone: `digits dataset create` of 20 tiny images takes {fixed:.2f} s")
    print(
        "    its phases (median of 3; plugin discovery imports numpy, wtforms and every plugin): "
        + ", ".join(f"{name} {seconds * 1000:.0f} ms" for name, seconds in phases.items())
    )
    return {"ratio": naive / job, "cpu_ratio": naive_runs[0][1] / job_runs[0][1]}


#: Issue 17's targets: (workload, encoding) -> ratio job/naive on 2 cores.
TARGETS = {
    ("png", "none"): 1.8,
    ("png", "png"): 1.8,
    ("jpeg", "none"): 1.8,
    ("jpeg", "png"): 1.8,
    ("whole process", "none"): 1.6,
}


def print_summary(results: dict, cores: tuple[float, float], guard: LoadGuard) -> None:
    """Every ratio next to its target (marked when the run was loaded), and the cores available."""
    guard.refuse_if_strict()
    print("\nSUMMARY (ratio = naive time / job time; cpu ratio = naive CPU s / job CPU s, all processes)")
    print(
        f"  cores available: {cores[0]:.2f} at the start, {cores[1]:.2f} at the end "
        f"(of {len(os.sched_getaffinity(0))}); load average now {os.getloadavg()[0]:.2f}"
    )
    for (kind, encoding), result in results.items():
        target = TARGETS.get((kind, encoding))
        verdict = "" if target is None else f"target {target:.1f}x  {'met' if result['ratio'] >= target else 'MISSED'}"
        print(
            guard.mark(
                f"  {kind:<13} {encoding:<11} ratio {result['ratio']:5.2f}x  cpu ratio {result['cpu_ratio']:5.2f}x  "
                f"{verdict}"
            )
        )
    print(f"  load during the run: {guard.note()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--png", type=int, default=30000, help="number of 28x28 PNGs (0 skips)")
    parser.add_argument("--jpeg", type=int, default=2000, help="number of 256x256 JPEGs (0 skips)")
    parser.add_argument("--workers", type=int, default=None, help="job worker processes (default: CPUs)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement (median is reported)")
    parser.add_argument("--data-dir", default=None, help="keep generated images here (reused when present)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    add_guard_args(parser)
    args = parser.parse_args()
    if args.child:
        child_main(json.loads(args.child))
        return 0
    guard = LoadGuard.from_args(args).start()

    tmp = tempfile.mkdtemp(prefix="digits-bench-")
    data = Path(args.data_dir) if args.data_dir else Path(tmp) / "data"
    cores_start = cores_available()
    print(
        f"cpus: {len(os.sched_getaffinity(0))} (available now: {cores_start:.2f}), workers: "
        f"{args.workers or 'default (CPUs)'}, repeat: {args.repeat}, load average: {os.getloadavg()[0]:.2f}"
    )
    results: dict = {}
    try:
        workloads = []
        if args.png:
            workloads.append(("png", args.png, 28, True))
        if args.jpeg:
            workloads.append(("jpeg", args.jpeg, 256, False))
        for kind, count, size, gray in workloads:
            root = data / f"{kind}-{count}"
            if not root.exists():
                t = time.perf_counter()
                generate(root, count, size, kind)
                print(f"generated {count} {size}x{size} {kind.upper()}s in {time.perf_counter() - t:.1f} s")
            base = {"root": str(root), "gray": gray, "size": size, "tmp": tmp, "workers": args.workers}
            print(f"\n{kind.upper()} {count} x {size}x{size}")
            naive = {}
            for encoding in ("none", "png", "passthrough"):
                if encoding != "passthrough":
                    naive[encoding] = median_of({**base, "what": "naive", "encoding": encoding}, args.repeat)
                    run = naive[encoding]
                    print(
                        f"  naive, {encoding:<4}             : {run['rate']:9.0f} img/s  ({run['seconds']:.2f} s, "
                        f"CPU {run['cpu_s']:.2f} s, peak RSS {run['rss_mb']:.0f} MB)"
                    )
                baseline = naive["none" if encoding == "passthrough" else encoding]
                job = median_of({**base, "what": "job", "encoding": encoding}, args.repeat)
                quarter = measure(
                    {**base, "what": "job", "encoding": encoding, "max_per_class": max(2, count // CLASSES // 4)}
                )
                results[(kind, encoding)] = {
                    "ratio": job["rate"] / baseline["rate"],
                    "cpu_ratio": baseline["cpu_s"] / job["cpu_s"] * job["count"] / baseline["count"],
                }
                print(
                    f"  job, encoding {encoding:<11}: {job['rate']:9.0f} img/s  ({job['seconds']:.2f} s, "
                    f"CPU {job['cpu_s']:.2f} s)  ratio {job['rate'] / baseline['rate']:.2f}x  "
                    f"peak RSS parent {job['rss_mb']:.0f} MB, worker {job['worker_rss_mb']:.0f} MB "
                    f"(on {quarter['count']} images: {quarter['rss_mb']:.0f} / {quarter['worker_rss_mb']:.0f} MB)"
                )
            if kind == "png":
                results[("whole process", "none")] = bench_whole_process(root, tmp, args.workers, args.repeat)
        guard.stop()
        print_summary(results, (cores_start, cores_available()), guard)
    finally:
        guard.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
