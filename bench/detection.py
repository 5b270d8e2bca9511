"""Benchmark: object detection quality and speed on the synthetic handwritten-digit set.

In one run, on this machine:

1. writes the synthetic detection set (``python -m digits_data_images.synth_detection``:
   real scikit-learn digit scans, 12–40 px, 1–6 per image, cluttered
   backgrounds; 2,000 train / 400 val images, 128×128) and builds an
   ``object-detection`` dataset from its KITTI folders;
2. trains ``detectnet`` with the **default options** through
   :func:`digits_core.engine.train` and prints the final validation mAP@0.5
   (VOC/KITTI, all-point) and COCO mAP@[.5:.95] and the wall-clock time;
3. measures training images/s of the engine (median of the logged windows
   after the first epoch) against the *same network and loss* trained with
   plain Keras ``model.fit`` on the same preprocessed arrays and batch size
   (second epoch timed, after tracing), as a ratio (target ≥ 0.95). The
   engine also runs the default augmentation (random scale + crop moving the
   boxes); the Keras baseline runs none, so the ratio is conservative;
4. measures single-image inference latency of the engine's compiled
   inference function (preprocessing + network + in-graph top-K decoding,
   :class:`digits_core.inference.model.InferenceModel`) against a bare
   ``tf.function`` of the same network + decoding on an already
   preprocessed tensor (median of 50 warm calls each), as a ratio (target ≤ 1.5).

Usage::

    .venv/bin/python bench/detection.py                  # the full benchmark (~10 min on 2 cores)
    .venv/bin/python bench/detection.py --train 400 --val 100 --epochs 3   # a quick look
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path


def _metrics(job_path: Path) -> dict[str, list]:
    values: dict[str, list] = {}
    for line in (job_path / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        values.setdefault(row["name"], []).append((row["epoch"], row["value"]))
    return values


def _median_ms(fn, calls: int = 50) -> float:
    fn()
    fn()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=int, default=2000, help="training images (default 2000)")
    parser.add_argument("--val", type=int, default=400, help="validation images (default 400)")
    parser.add_argument("--size", type=int, default=128, help="image size (default 128)")
    parser.add_argument("--epochs", type=int, default=None, help="override the default epochs (quick looks only)")
    parser.add_argument("--work", default=None, help="work folder (default: a temporary one)")
    args = parser.parse_args()

    from digits_core.datasets import create_dataset
    from digits_core.engine import train
    from digits_data_images import synth_detection

    work = Path(args.work or tempfile.mkdtemp(prefix="digits-bench-detection-"))
    data = work / "synth"
    t0 = time.perf_counter()
    synth_detection.generate(str(data), images=args.train, val_images=args.val, size=args.size, seed=0)
    dataset = create_dataset(
        "object-detection",
        {
            "train_image_folder": str(data / "train" / "images"),
            "train_label_folder": str(data / "train" / "labels"),
            "val_image_folder": str(data / "val" / "images"),
            "val_label_folder": str(data / "val" / "labels"),
            "custom_classes": synth_detection.CLASS_MAPPING,
            "width": args.size,
            "height": args.size,
        },
        jobs_dir=work / "jobs",
    )
    print(
        f"dataset: {args.train} train / {args.val} val images, {args.size}x{args.size}, "
        f"built in {time.perf_counter() - t0:.1f} s"
    )

    options = {} if args.epochs is None else {"epochs": args.epochs}
    t0 = time.perf_counter()
    job = train(dataset.id, jobs_dir=work / "jobs", seed=0, **options)
    train_s = time.perf_counter() - t0
    metrics = _metrics(job.path)
    info = json.loads((job.path / "model.json").read_text())
    map50, coco = metrics["val_map50"][-1][1], metrics["val_map"][-1][1]
    print(
        f"detectnet, default options ({info['options']['epochs']} epochs, batch {info['batch_size']}): "
        f"trained in {train_s / 60:.1f} min"
    )
    print(f"val mAP@0.5 (VOC/KITTI) {map50:.4f}   (target >= 0.90)")
    print(f"val COCO mAP@[.5:.95]   {coco:.4f}")
    per_class = {k[len("val_ap50_") :]: v[-1][1] for k, v in metrics.items() if k.startswith("val_ap50_")}
    print("per-class AP@0.5: " + ", ".join(f"{k} {v:.3f}" for k, v in per_class.items()))
    ours_ips = (
        statistics.median(v for e, v in metrics["images_per_sec"] if e > 1.0)
        if any(e > 1.0 for e, _ in metrics["images_per_sec"])
        else statistics.median(v for _, v in metrics["images_per_sec"])
    )

    import keras
    import numpy as np
    import tensorflow as tf

    from digits_core.datasets import open_dataset
    from digits_core.engine.detection.decode import decode_detections
    from digits_core.engine.detection.loss import make_detection_loss
    from digits_core.engine.detection.network import build_detectnet
    from digits_core.engine.detection.task import fix_labels
    from digits_core.engine.preprocessing import Preprocessing
    from digits_core.inference.model import load_inference_model

    ds = open_dataset(dataset.path)
    prep = Preprocessing.load(job.path)
    n_base = min(ds.count("train"), 960)
    x, y = ds.read_batch("train", 0, n_base)
    x = prep.normalize(x).astype(np.float32)
    y = fix_labels(y)
    classes = len(ds.class_labels)
    batch = int(info["batch_size"])
    model = build_detectnet(x.shape[1:], classes)
    loss = make_detection_loss(x.shape[1:3], classes)
    model.compile(optimizer=keras.optimizers.Adam(0.002), loss=lambda t, p: loss(t, p))
    model.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=True)  # traces
    t0 = time.perf_counter()
    model.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=True)
    keras_ips = n_base / (time.perf_counter() - t0)
    print(
        f"training images/s: engine {ours_ips:.1f}, plain Keras fit {keras_ips:.1f}, "
        f"ratio {ours_ips / keras_ips:.2f} (target >= 0.95)"
    )

    loaded = load_inference_model(job.id, jobs_dir=work / "jobs")
    raw, _ = ds.read_batch("val", 0, 1)
    ours_ms = _median_ms(lambda: loaded.predict(raw))
    net = loaded.model
    hw = tuple(x.shape[1:3])
    bare = tf.function(lambda t: decode_detections(net(t, training=False), hw, classes))
    tensor = tf.constant(prep.normalize(raw).astype(np.float32))
    bare_ms = _median_ms(lambda: [v.numpy() for v in bare(tensor)])
    print(
        f"inference latency (1 image, warm): engine {ours_ms:.2f} ms, bare tf.function {bare_ms:.2f} ms, "
        f"ratio {ours_ms / bare_ms:.2f} (target <= 1.5)"
    )
    print(f"work folder: {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
