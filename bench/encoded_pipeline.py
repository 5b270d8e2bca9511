"""Engine throughput on a PNG-encoded dataset vs the same images stored raw, same run.

The images are 28x28 grayscale synthetic shapes (10 classes): the raw
``synthetic-shapes`` dataset is built first, its training images are
written as PNG files in class folders, and the real ``image-classification``
plugin builds two datasets from those files: ``encoding=png`` (records hold
PNG bytes) and ``encoding=none`` (raw arrays). Pixels are identical.

Figures (images/s, medians over ``--repeats``, runs alternate raw / PNG):

* **pipeline, stream**: iterating the engine's training ``tf.data`` pipeline
  (``preload=False``: every batch is one LMDB read; PNG batches are decoded
  by ``tf.io.decode_png`` inside tf.data), plus, for reference, the same PNG
  stage decoded the old way (the reader's per-record Pillow loop);
* **pipeline, preload**: the time to load the stage (PNG: one parallel
  tf.data decode pass) and the steady-state batch rate;
* **train**: the engine's ``train()`` (LeNet, batch 64, Adam), images/s
  after the first epoch, ``preload=False`` so PNG is decoded every epoch.

Run (TensorFlow runs under the shared lock on the team machine)::

    .venv/bin/python bench/encoded_pipeline.py [--images 10000] [--epochs 3] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _quiet import LoadGuard, add_guard_args  # bench/: the load guard every bench shares


def make_datasets(jobs_dir: str, images: int):
    import numpy as np
    from PIL import Image

    from digits_core import registry
    from digits_core.datasets import create_dataset, open_dataset

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the suite's synthetic plugins
    from synthetic_plugins import SyntheticShapes

    registry.register(SyntheticShapes)
    try:
        job = create_dataset(
            "synthetic-shapes",
            {"count": images, "val_count": 0, "size": 28, "classes": 10},
            workers=2,
            jobs_dir=jobs_dir,
        )
    finally:
        registry.unregister(SyntheticShapes)
    x, y = open_dataset(job.id, jobs_dir=jobs_dir).read_all("train")
    folder = Path(jobs_dir) / "png-files"
    for c in range(10):
        (folder / f"c{c}").mkdir(parents=True)
    for i, (img, label) in enumerate(zip(x, y)):
        Image.fromarray(np.ascontiguousarray(img[:, :, 0])).save(folder / f"c{int(label)}" / f"{i:06d}.png")
    out = {}
    for encoding in ("none", "png"):
        t0 = time.perf_counter()
        job = create_dataset(
            "image-classification",
            {
                "folder": str(folder),
                "image_type": "grayscale",
                "width": 28,
                "height": 28,
                "encoding": encoding,
                "val_percent": 0,
            },
            name=f"bench-{encoding}",
            workers=2,
            jobs_dir=jobs_dir,
        )
        out[encoding] = open_dataset(job.id, jobs_dir=jobs_dir)
        print(
            f"dataset encoding={encoding}: {out[encoding].count('train')} images "
            f"({time.perf_counter() - t0:.1f} s to build)",
            flush=True,
        )
    return out


def pipeline_rate(ds, *, preload: bool, batch: int, epochs: int, pillow: bool = False) -> tuple[float, float]:
    """Return ``(load_s, images/s over epochs 2..epochs)`` of the engine's training pipeline."""
    from digits_core.engine.options import Augmentation
    from digits_core.engine.pipeline import Layout, StageSource, train_dataset
    from digits_core.engine.preprocessing import Preprocessing

    t0 = time.perf_counter()
    src = StageSource(ds, "train", preload=preload)
    load_s = time.perf_counter() - t0
    if pillow:  # the old path: the reader decodes each record with Pillow
        assert not preload
        src.encodings = None
    prep = Preprocessing("image", ds.mean(), 1 / 255, None, tuple(ds.feature_shape()))
    it = iter(
        train_dataset(
            src, layout=Layout(batch), prep=prep, aug=Augmentation(), seed=0, shuffle=True, start_epoch=0, epochs=epochs
        )
    )
    steps = Layout(batch).steps_per_epoch(src.n)
    for _ in range(steps):  # first epoch: tracing and warm-up
        next(it)
    t0 = time.perf_counter()
    count = 0
    for x, _ in it:
        count += int(x.shape[0])
    return load_s, count / (time.perf_counter() - t0)


def train_rate(ds, jobs_dir: str, *, epochs: int, batch: int) -> float:
    from digits_core.engine import train

    marks = {}

    def progress(event):
        if event["phase"] != "train":
            return
        spe = event["total_steps"] // epochs
        if event["step"] == spe:
            marks["first_epoch"] = time.perf_counter()
        if event["step"] == event["total_steps"] - 1:
            marks["end"] = time.perf_counter()
            marks["spe"] = spe

    train(
        ds.id,
        "lenet",
        name="bench",
        jobs_dir=jobs_dir,
        epochs=epochs,
        batch_size=batch,
        solver="adam",
        learning_rate=0.001,
        lr_policy="fixed",
        validation_interval=0,
        snapshot_interval=0,
        preload=False,
        progress=progress,
    )
    count = ds.count("train")
    last_batch = count - (marks["spe"] - 1) * batch
    return (count * (epochs - 1) - last_batch) / (marks["end"] - marks["first_epoch"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=10000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-train", action="store_true", help="only the input pipeline figures")
    parser.add_argument("--json", action="store_true")
    add_guard_args(parser)
    args = parser.parse_args(argv)
    guard = LoadGuard.from_args(args).start()
    med = statistics.median
    with tempfile.TemporaryDirectory(prefix="digits-bench-") as jobs_dir:
        ds = make_datasets(jobs_dir, args.images)
        r = {
            k: []
            for k in (
                "stream_raw",
                "stream_png",
                "stream_png_pillow",
                "preload_raw",
                "preload_png",
                "load_raw_s",
                "load_png_s",
                "train_raw",
                "train_png",
            )
        }
        for _ in range(args.repeats):
            r["stream_raw"].append(
                pipeline_rate(ds["none"], preload=False, batch=args.batch_size, epochs=args.epochs)[1]
            )
            r["stream_png"].append(
                pipeline_rate(ds["png"], preload=False, batch=args.batch_size, epochs=args.epochs)[1]
            )
            r["stream_png_pillow"].append(
                pipeline_rate(ds["png"], preload=False, batch=args.batch_size, epochs=args.epochs, pillow=True)[1]
            )
            load, rate = pipeline_rate(ds["none"], preload=True, batch=args.batch_size, epochs=args.epochs)
            r["load_raw_s"].append(load)
            r["preload_raw"].append(rate)
            load, rate = pipeline_rate(ds["png"], preload=True, batch=args.batch_size, epochs=args.epochs)
            r["load_png_s"].append(load)
            r["preload_png"].append(rate)
            print(
                "  pipeline stream: raw {:.0f}, png (tf.data decode) {:.0f}, png (Pillow, old) {:.0f} img/s; "
                "preload: raw {:.0f}, png {:.0f} img/s (load {:.2f} s vs {:.2f} s)".format(
                    r["stream_raw"][-1],
                    r["stream_png"][-1],
                    r["stream_png_pillow"][-1],
                    r["preload_raw"][-1],
                    r["preload_png"][-1],
                    r["load_raw_s"][-1],
                    r["load_png_s"][-1],
                ),
                flush=True,
            )
            if not args.no_train:
                r["train_raw"].append(train_rate(ds["none"], jobs_dir, epochs=args.epochs, batch=args.batch_size))
                r["train_png"].append(train_rate(ds["png"], jobs_dir, epochs=args.epochs, batch=args.batch_size))
                print(
                    f"  engine train (stream): raw {r['train_raw'][-1]:.0f}, png {r['train_png'][-1]:.0f} img/s",
                    flush=True,
                )
    guard.stop()
    guard.refuse_if_strict()
    result = {k: med(v) for k, v in r.items() if v}
    result["load"] = guard.summary()
    result.update(images=args.images, epochs=args.epochs, batch_size=args.batch_size)
    result["stream_ratio_png_vs_raw"] = result["stream_png"] / result["stream_raw"]
    result["stream_speedup_vs_pillow"] = result["stream_png"] / result["stream_png_pillow"]
    result["preload_ratio_png_vs_raw"] = result["preload_png"] / result["preload_raw"]
    if "train_png" in result:
        result["train_ratio_png_vs_raw"] = result["train_png"] / result["train_raw"]
    if args.json:
        print(json.dumps(result))
    print(
        f"pipeline, stream:  png {result['stream_png']:.0f} img/s vs raw {result['stream_raw']:.0f} img/s: "
        f"ratio {result['stream_ratio_png_vs_raw']:.3f}; vs old Pillow decode {result['stream_png_pillow']:.0f} "
        f"img/s: x{result['stream_speedup_vs_pillow']:.2f}"
    )
    print(
        f"pipeline, preload: png {result['preload_png']:.0f} img/s vs raw {result['preload_raw']:.0f} img/s: "
        f"ratio {result['preload_ratio_png_vs_raw']:.3f} (load {result['load_png_s']:.2f} s vs "
        f"{result['load_raw_s']:.2f} s)"
    )
    if "train_png" in result:
        print(
            f"engine train (stream, LeNet): png {result['train_png']:.0f} img/s vs raw {result['train_raw']:.0f} "
            f"img/s: ratio {result['train_ratio_png_vs_raw']:.3f}"
        )
    print(f"load during the run: {guard.note()}{' (figures above are not results)' if guard.loaded else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
