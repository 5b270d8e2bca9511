"""Export latency: SavedModel, ONNX Runtime and TFLite against `digits infer` (warm) and a bare tf.function, same run.

Trains a tiny model per network (LeNet on `synthetic-shapes`, a U-Net on
`synthetic-lv`, `detectnet` on synthetic KITTI boxes; one epoch), exports it
in each format (parity report included), then measures in this process,
interleaving the candidates round by round so machine load hits all alike:

* single-image p50 latency (one raw image in, the export's outputs out);
* batch-256 throughput (images/s).

Candidates: `infer(model_id, [image])` with the model cached ("digits infer
warm"); a bare `tf.function(lambda x: model(x, training=False))` on an
already preprocessed image ("bare tf.function", the floor); the reloaded
SavedModel's signature; an onnxruntime session; the LiteRT/TFLite
interpreter. Ratios are against the bare function.

Usage::

    .venv/bin/python bench/export_latency.py [--networks lenet,unet,detectnet] [--rounds 5] [--calls 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _quiet import LoadGuard, add_guard_args  # noqa: E402  # bench/: the load guard every bench shares


def _train(network: str, jobs: Path):
    from digits_core import registry
    from digits_core.datasets import create_dataset
    from digits_core.engine import train

    if network == "detectnet":
        from digits_data_images import synth_detection

        synth_detection.generate(str(jobs.parent / "synth"), images=32, val_images=8, size=64, seed=3)
        s = jobs.parent / "synth"
        ds = create_dataset(
            "object-detection",
            {
                "train_image_folder": str(s / "train" / "images"),
                "train_label_folder": str(s / "train" / "labels"),
                "val_image_folder": str(s / "val" / "images"),
                "val_label_folder": str(s / "val" / "labels"),
                "custom_classes": synth_detection.CLASS_MAPPING,
                "width": 64,
                "height": 64,
            },
            workers=1,
            jobs_dir=jobs,
        )
        return train(ds.id, None, epochs=1, batch_size=8, jobs_dir=jobs, seed=0)
    from synthetic_plugins import SyntheticLV, SyntheticShapes

    cls, values = (
        (SyntheticShapes, {"count": 64, "val_count": 8, "size": 28, "classes": 3})
        if network == "lenet"
        else (SyntheticLV, {"count": 16, "val_count": 8, "size": 32})
    )
    registry.register(cls)
    try:
        ds = create_dataset(cls.plugin_id, values, workers=1, jobs_dir=jobs)
    finally:
        registry.unregister(cls)
    return train(ds.id, network, epochs=1, batch_size=8, jobs_dir=jobs, seed=0)


def _exported(job, jobs: Path, fmt: str, tmp: Path) -> Path:
    from digits_core.inference import export_model

    archive = export_model(job.id, tmp / f"{job.id}-{fmt}.tar.gz", format=fmt, parity_sample=8, jobs_dir=jobs)
    with tarfile.open(archive) as tar:
        tar.extractall(tmp / fmt / job.id, filter="tar")
    return next((tmp / fmt / job.id).iterdir())


def _candidates(job, jobs: Path, tmp: Path) -> dict:
    import numpy as np
    import onnxruntime as ort
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    from digits_core.inference import infer
    from digits_core.inference.model import load_inference_model

    loaded = load_inference_model(job.id, jobs_dir=jobs)
    bare = tf.function(lambda x: loaded.model(x, training=False))
    saved = tf.saved_model.load(str(_exported(job, jobs, "savedmodel", tmp) / "saved_model")).signatures[
        "serving_default"
    ]
    session = ort.InferenceSession(
        str(_exported(job, jobs, "onnx", tmp) / "model.onnx"), providers=["CPUExecutionProvider"]
    )
    lite = Interpreter(model_path=str(_exported(job, jobs, "tflite", tmp) / "model.tflite"), num_threads=os.cpu_count())
    runner = lite.get_signature_runner("serving_default")

    def prepared(x):
        return loaded.preprocessing.apply(x.astype(np.float32))

    return {
        "digits infer (warm)": lambda x: infer(job.id, list(x), jobs_dir=jobs).outputs,
        "bare tf.function": lambda x, p={}: bare(p.setdefault(id(x), prepared(x))).numpy(),
        "SavedModel": lambda x: saved(images=tf.constant(x)),
        "ONNX Runtime": lambda x: session.run(None, {"images": x}),
        "TFLite": lambda x: runner(images=x),
    }


def measure(network: str, rounds: int, calls: int) -> dict:
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="digits-bench-export-") as tmp:
        jobs = Path(tmp) / "jobs"
        job = _train(network, jobs)
        from digits_core.inference.model import load_inference_model

        loaded = load_inference_model(job.id, jobs_dir=jobs)
        rng = np.random.default_rng(0)
        one = rng.integers(0, 256, (1, *loaded.feature_shape)).astype(loaded.feature_dtype)
        batch = rng.integers(0, 256, (256, *loaded.feature_shape)).astype(loaded.feature_dtype)
        candidates = _candidates(job, jobs, Path(tmp))
        single: dict = {name: [] for name in candidates}
        throughput: dict = {name: [] for name in candidates}
        for run in candidates.values():  # warm-up: tracing, first allocation
            run(one), run(batch)
        for _ in range(rounds):
            for name, run in candidates.items():
                for _ in range(calls):
                    start = time.perf_counter()
                    run(one)
                    single[name].append(time.perf_counter() - start)
                start = time.perf_counter()
                run(batch)
                throughput[name].append(len(batch) / (time.perf_counter() - start))
        floor = statistics.median(single["bare tf.function"])
        return {
            name: {
                "p50_ms": round(statistics.median(single[name]) * 1000, 3),
                "ratio_to_bare": round(statistics.median(single[name]) / floor, 2),
                "batch256_per_s": round(statistics.median(throughput[name]), 1),
            }
            for name in candidates
        }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", default="lenet,unet,detectnet")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    add_guard_args(parser)
    args = parser.parse_args(argv)
    with LoadGuard.from_args(args) as guard:
        results = {network: measure(network, args.rounds, args.calls) for network in args.networks.split(",")}
    guard.refuse_if_strict()
    if args.json:
        print(json.dumps({**results, "load": guard.summary()}, indent=2))
        return 0
    print(f"{'network':10} {'candidate':22} {'p50 ms':>9} {'x bare':>7} {'batch-256 img/s':>16}")
    for network, rows in results.items():
        for name, row in rows.items():
            print(
                guard.mark(
                    f"{network:10} {name:22} {row['p50_ms']:9.3f} {row['ratio_to_bare']:7.2f} "
                    f"{row['batch256_per_s']:16.1f}"
                )
            )
    print(f"load during the run: {guard.note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
