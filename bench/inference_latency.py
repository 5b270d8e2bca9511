"""Inference latency: the public API (`digits_core.inference.infer`) versus a bare tf.function, same model, same run.

Trains LeNet for one epoch on a synthetic 28×28 gray dataset (the engine's
`synthetic-shapes` plugin), then measures, interleaving the two so machine
load hits both alike:

* single-image latency p50/p90 of `infer(model_id, [image])` (cached
  model, raw uint8 image in, top-5 out) versus `f(x).numpy()` where `f` is a
  bare `tf.function(lambda x: model(x, training=False))` fed an already
  preprocessed image as a tensor: target ratio <= 1.1x (issue 31);
* batch throughput (images/s) of `infer(model_id, images)` (raw images in,
  one network call per batch), given as a list of images and as one
  ``[N, H, W, C]`` array, versus the bare function on preprocessed tensors
  of the same size, each batch timed alternately: target >= 0.97x for both;
* `model.predict` on one image, for reference.

Usage (TensorFlow: run under the shared lock on the team machine)::

    .venv/bin/python bench/inference_latency.py [--rounds 20] [--calls 50] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _quiet import LoadGuard, add_guard_args  # bench/: the load guard every bench shares

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def percentile(values, q):
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, int(round(q / 100 * (len(ordered) - 1)))))
    return ordered[index]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="interleaved rounds (default 20)")
    parser.add_argument("--calls", type=int, default=50, help="single-image calls per round and side (default 50)")
    parser.add_argument("--batch", type=int, default=256, help="batch size of the throughput test (default 256)")
    parser.add_argument(
        "--batches", type=int, default=8, help="throughput: 3 x this many batches per side, alternating (default 8)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    add_guard_args(parser)
    args = parser.parse_args(argv)
    guard = LoadGuard.from_args(args).start()

    import numpy as np
    import tensorflow as tf

    from digits_core import registry
    from digits_core.datasets import create_dataset, open_dataset
    from digits_core.engine import load_snapshot, train
    from digits_core.engine.preprocessing import Preprocessing
    from digits_core.inference import infer

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the suite's synthetic plugins
    from synthetic_plugins import SyntheticShapes

    jobs_dir = tempfile.mkdtemp(prefix="digits-bench-infer-")
    registry.register(SyntheticShapes)
    try:
        ds_job = create_dataset(
            "synthetic-shapes", {"count": 512, "val_count": 64, "size": 28}, workers=1, jobs_dir=jobs_dir
        )
    finally:
        registry.unregister(SyntheticShapes)
    t0 = time.perf_counter()
    model_job = train(ds_job.id, "lenet", name="bench-lenet", epochs=1, batch_size=64, jobs_dir=jobs_dir)
    print(f"trained LeNet 1 epoch in {time.perf_counter() - t0:.1f} s (model {model_job.id})")

    # Validation images straight from the plugin (the trainer's process keeps the dataset's LMDB open).
    plugin = SyntheticShapes(**{**open_dataset(ds_job.id, jobs_dir).userdata})
    images = np.stack(
        [np.asarray(plugin.encode_entry(e)[0]).reshape(28, 28, -1) for e in list(plugin.itemize_entries("val"))[:64]]
    )
    image = images[0]
    model = load_snapshot(model_job, jobs_dir=jobs_dir)
    prep = Preprocessing.load(model_job)
    bare = tf.function(lambda x: model(x, training=False))
    x1 = tf.constant(prep.apply(image[None]))  # a preprocessed tensor: the bare function's best case

    # warm both paths (load, trace)
    infer(model_job.id, [image], jobs_dir=jobs_dir)
    bare(x1).numpy()
    api_times, bare_times = [], []
    for _ in range(args.rounds):
        for _ in range(args.calls):
            t = time.perf_counter()
            result = infer(model_job.id, [image], jobs_dir=jobs_dir)
            api_times.append(time.perf_counter() - t)
        assert result.samples[0].top
        for _ in range(args.calls):
            t = time.perf_counter()
            bare(x1).numpy()
            bare_times.append(time.perf_counter() - t)
    api_p50, api_p90 = percentile(api_times, 50) * 1e3, percentile(api_times, 90) * 1e3
    bare_p50, bare_p90 = percentile(bare_times, 50) * 1e3, percentile(bare_times, 90) * 1e3

    predict_times = []
    for _ in range(10):
        t = time.perf_counter()
        model.predict(x1, verbose=0)
        predict_times.append(time.perf_counter() - t)

    rng = np.random.default_rng(0)
    batch = images[rng.integers(0, len(images), args.batch)]
    xb = tf.constant(prep.apply(batch))
    images_in = list(batch)
    infer(model_job.id, images_in, jobs_dir=jobs_dir, batch_size=args.batch)
    bare(xb).numpy()
    api_batch, array_batch, bare_batch = [], [], []
    for _ in range(3 * args.batches):  # alternate batch by batch: every side sees the same load
        t = time.perf_counter()
        infer(model_job.id, images_in, jobs_dir=jobs_dir, batch_size=args.batch)
        api_batch.append(time.perf_counter() - t)
        t = time.perf_counter()
        infer(model_job.id, batch, jobs_dir=jobs_dir, batch_size=args.batch)
        array_batch.append(time.perf_counter() - t)
        t = time.perf_counter()
        bare(xb).numpy()
        bare_batch.append(time.perf_counter() - t)
    api_rate, bare_rate = args.batch / statistics.median(api_batch), args.batch / statistics.median(bare_batch)
    array_rate = args.batch / statistics.median(array_batch)

    guard.stop()
    guard.refuse_if_strict()
    ratio50, ratio90 = api_p50 / bare_p50, api_p90 / bare_p90
    throughput_ratio = api_rate / bare_rate
    array_ratio = array_rate / bare_rate
    figures = {
        "single_image_ms": {
            "api_p50": api_p50,
            "api_p90": api_p90,
            "bare_tf_function_p50": bare_p50,
            "bare_tf_function_p90": bare_p90,
            "ratio_p50": ratio50,
            "ratio_p90": ratio90,
            "model_predict_p50": percentile(predict_times, 50) * 1e3,
            "calls": len(api_times),
        },
        "batch_throughput_img_s": {
            "batch": args.batch,
            "api": api_rate,
            "api_one_array": array_rate,
            "bare_tf_function": bare_rate,
            "ratio": throughput_ratio,
            "ratio_one_array": array_ratio,
        },
        "target_ratio_max": 1.1,
        "target_throughput_ratio_min": 0.97,
        "target_met": ratio50 <= 1.1 and min(throughput_ratio, array_ratio) >= 0.97,
        "load": guard.summary(),
    }
    print(f"single image ({len(api_times)} calls each, interleaved):")
    print(f"  digits_core.inference.infer     p50 {api_p50:7.3f} ms   p90 {api_p90:7.3f} ms")
    print(f"  bare tf.function      p50 {bare_p50:7.3f} ms   p90 {bare_p90:7.3f} ms")
    print(
        guard.mark(
            f"  ratio                 p50 {ratio50:7.2f} x    p90 {ratio90:7.2f} x   (target <= 1.1x: "
            f"{'met' if ratio50 <= 1.1 else 'NOT met'})"
        )
    )
    print(f"  model.predict         p50 {figures['single_image_ms']['model_predict_p50']:7.3f} ms (reference)")
    print(f"batch throughput (batch {args.batch}, median of {len(api_batch)} alternating batches):")
    for label, rate, ratio in (
        ("a list of images", api_rate, throughput_ratio),
        ("one array", array_rate, array_ratio),
    ):
        print(
            guard.mark(
                f"  infer, {label:16s}  {rate:9.0f} img/s   (api / bare = {ratio:.2f}x, target >= 0.97x: "
                f"{'met' if ratio >= 0.97 else 'NOT met'})"
            )
        )
    print(f"  bare tf.function          {bare_rate:9.0f} img/s")
    print(f"load during the run: {guard.note()}")
    if args.json:
        print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
