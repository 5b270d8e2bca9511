"""Training throughput: the DIGITS engine vs plain Keras ``model.fit`` on numpy, same run.

LeNet on 20,000 28x28 grayscale images (synthetic shapes, 10 classes) stored
in a real LMDB dataset. Both sides use the same network builder, batch size
(64), optimizer (Adam 1e-3), loss and preprocessing (mean image subtracted,
scaled by 1/255); the baseline gets the data already normalized in numpy
arrays. Throughput is measured after the first epoch (tracing excluded; in a
1-epoch run after its first quarter) on both sides; ``--jit`` compiles both
train steps with XLA and ``--mixed-precision`` uses ``mixed_float16`` on both
(GPU only); runs alternate (baseline, engine, baseline, engine) and medians
are reported, because absolute figures swing with machine load.
``--precision bfloat16`` adds an engine run with ``precision="bfloat16"`` to each
repeat (baseline, engine float32, engine bfloat16): the engine's bfloat16 speed-up
over float32 measured in the same run (refused on a CPU without native bfloat16).

Also reported: the engine's startup overhead, seconds from a fresh Python
process starting (imports included) to the first training step completed.

Run (TensorFlow runs under the shared lock on the team machine)::

    .venv/bin/python bench/train_throughput.py [--images 20000] [--epochs 3] [--repeats 2] [--jit]
        [--precision bfloat16]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _quiet import LoadGuard, add_guard_args  # bench/: the load guard every bench shares

STARTUP_SNIPPET = r"""
import time, sys, json
t0 = time.time()
from digits_core.engine import train
first = {}
def progress(event):
    if event["phase"] == "train" and "t" not in first:
        first["t"] = time.time()
train(sys.argv[1], "lenet", name="startup", jobs_dir=sys.argv[2], epochs=1, batch_size=64,
      validation_interval=0, snapshot_interval=0, progress=progress)
print(json.dumps({"startup_s": first["t"] - t0}))
"""


def make_dataset(jobs_dir: str, images: int):
    from digits_core import registry
    from digits_core.datasets import create_dataset

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the suite's synthetic plugins
    from synthetic_plugins import SyntheticShapes

    registry.register(SyntheticShapes)
    try:
        t0 = time.perf_counter()
        job = create_dataset(
            "synthetic-shapes",
            {"count": images, "val_count": 0, "size": 28, "classes": 10},
            workers=2,
            jobs_dir=jobs_dir,
        )
        return job, time.perf_counter() - t0
    finally:
        registry.unregister(SyntheticShapes)


def _images_between(count: int, batch: int, spe: int, first: int, last: int) -> int:
    """Images in global steps ``first+1 .. last`` (1-based; the last batch of an epoch may be short)."""
    return sum(
        batch if (step - 1) % spe + 1 < spe else count - (spe - 1) * batch for step in range(first + 1, last + 1)
    )


def _warm_step(spe: int, epochs: int) -> int:
    """Timing starts after this step: the first epoch (tracing) or, in a 1-epoch run, its first quarter."""
    return spe if epochs > 1 else max(1, spe // 4)


def run_baseline(
    dataset_id: str, jobs_dir: str, epochs: int, batch: int, jit: bool, mixed: bool, spe: int = 1
) -> float:
    import keras
    import numpy as np

    from digits_core.datasets import open_dataset
    from digits_core.engine.networks import builtin

    ds = open_dataset(dataset_id, jobs_dir=jobs_dir)
    x, y = ds.read_all("train")
    x = (x.astype(np.float32) - ds.mean()) / 255.0
    if mixed:
        keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = builtin.lenet(x.shape[1:], 10)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    model.compile(
        optimizer=keras.optimizers.Adam(0.001),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        jit_compile=jit,
        steps_per_execution=spe,
    )
    spe_epoch = -(-len(x) // batch)
    warm = _warm_step(spe_epoch, epochs)
    marks = {}

    class Clock(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.epoch = 0

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_train_batch_end(self, batch_index, logs=None):
            # with steps_per_execution, Keras calls this once per execution with the execution's last step
            step = self.epoch * spe_epoch + batch_index + 1
            if "warm" not in marks and step >= warm:
                marks["warm"], marks["warm_step"] = time.perf_counter(), step

        def on_train_end(self, logs=None):
            marks["end"] = time.perf_counter()

    model.fit(x, y, batch_size=batch, epochs=epochs, shuffle=True, verbose=0, callbacks=[Clock()])
    images = _images_between(len(x), batch, spe_epoch, marks["warm_step"], spe_epoch * epochs)
    return images / (marks["end"] - marks["warm"])


class _WaitClock:
    """The training loop's ``iter``: its iterator's ``next`` timed (how long the steps wait for input)."""

    def __init__(self):
        self.wait = 0.0
        self.calls = 0
        self.counting = False

    def __call__(self, dataset):
        inner, clock = iter(dataset), self

        class Timed:
            def __iter__(self):
                return self

            def __next__(self):
                t0 = time.perf_counter()
                try:
                    return next(inner)
                finally:
                    if clock.counting:
                        clock.wait += time.perf_counter() - t0
                        clock.calls += 1

        return Timed()


def run_engine(
    dataset_id: str,
    jobs_dir: str,
    epochs: int,
    batch: int,
    jit: bool,
    mixed: bool,
    spe: int = 1,
    stalls=None,
    precision: str = "float32",
) -> float:
    """Engine img/s; with ``stalls`` (a dict, one step per call only) also the time the steps waited for input."""
    import digits_core.engine.loop as loop
    from digits_core.datasets import open_dataset
    from digits_core.engine import train

    count = open_dataset(dataset_id, jobs_dir=jobs_dir).count("train")
    spe_epoch = -(-count // batch)
    warm = _warm_step(spe_epoch, epochs)
    marks = {}

    clock = _WaitClock()

    def progress(event):
        if event["phase"] != "train":
            return
        if event["step"] == warm:
            marks["warm"] = time.perf_counter()
            clock.counting = True
        if event["step"] == event["total_steps"] - 1:  # before the final snapshot is written
            marks["end"] = time.perf_counter()
            clock.counting = False

    timed = stalls is not None and spe == 1  # (several steps per call read the iterator inside the graph)
    if timed:
        loop.iter = clock  # the loop's module global shadows the builtin: its iterator, timed
    try:
        train(
            dataset_id,
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
            progress=progress,
            jit=jit,
            mixed_precision=mixed,
            steps_per_execution=spe,
            precision=precision,
        )
    finally:
        if timed:
            del loop.iter
    if timed:
        stalls.setdefault("wait_s", []).append(clock.wait)
        stalls.setdefault("fraction", []).append(clock.wait / (marks["end"] - marks["warm"]))
        stalls.setdefault("per_step_ms", []).append(1e3 * clock.wait / max(clock.calls, 1))
    return _images_between(count, batch, spe_epoch, warm, spe_epoch * epochs - 1) / (marks["end"] - marks["warm"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=20000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--jit", action="store_true", help="XLA-compile the train step on both sides")
    parser.add_argument("--mixed-precision", action="store_true", help="mixed_float16 on both sides (GPU only)")
    parser.add_argument(
        "--steps-per-execution",
        type=int,
        default=1,
        metavar="K",
        help="train steps per call on both sides (the engine's option, Keras compile's steps_per_execution)",
    )
    parser.add_argument(
        "--precision",
        choices=("float32", "bfloat16"),
        default="float32",
        help="bfloat16: also time the engine with precision=bfloat16 in each repeat (its speed-up over float32)",
    )
    parser.add_argument("--json", action="store_true")
    add_guard_args(parser)
    args = parser.parse_args(argv)
    guard = LoadGuard.from_args(args).start()
    with tempfile.TemporaryDirectory(prefix="digits-bench-") as jobs_dir:
        job, ingest_s = make_dataset(jobs_dir, args.images)
        print(f"dataset: {args.images} images 28x28 in LMDB ({ingest_s:.1f} s to build)", flush=True)
        base, engine, bf16, stalls = [], [], [], {}
        for _ in range(args.repeats):
            base.append(
                run_baseline(
                    job.id,
                    jobs_dir,
                    args.epochs,
                    args.batch_size,
                    args.jit,
                    args.mixed_precision,
                    args.steps_per_execution,
                )
            )
            print(f"  keras fit on numpy: {base[-1]:8.0f} img/s", flush=True)
            engine.append(
                run_engine(
                    job.id,
                    jobs_dir,
                    args.epochs,
                    args.batch_size,
                    args.jit,
                    args.mixed_precision,
                    args.steps_per_execution,
                    stalls,
                )
            )
            print(f"  digits engine:      {engine[-1]:8.0f} img/s", flush=True)
            if args.precision == "bfloat16":
                bf16.append(
                    run_engine(
                        job.id,
                        jobs_dir,
                        args.epochs,
                        args.batch_size,
                        args.jit,
                        False,
                        args.steps_per_execution,
                        precision="bfloat16",
                    )
                )
                print(f"  engine, bfloat16:   {bf16[-1]:8.0f} img/s", flush=True)
        out = subprocess.run(
            [sys.executable, "-c", STARTUP_SNIPPET, job.id, jobs_dir],
            capture_output=True,
            text=True,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
        )
        if out.returncode != 0:
            print(out.stderr[-2000:], file=sys.stderr)
            return 1
        startup = json.loads(out.stdout.strip().splitlines()[-1])["startup_s"]
    guard.stop()
    guard.refuse_if_strict()
    result = {
        "images": args.images,
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "jit": args.jit,
        "mixed_precision": args.mixed_precision,
        "steps_per_execution": args.steps_per_execution,
        "engine_img_per_s": statistics.median(engine),
        "keras_fit_img_per_s": statistics.median(base),
        "ratio": statistics.median(engine) / statistics.median(base),
        "startup_s": startup,
        "precision": args.precision,
        "engine_bf16_img_per_s": statistics.median(bf16) if bf16 else None,
        "bf16_speedup": statistics.median(bf16) / statistics.median(engine) if bf16 else None,
        "input_wait_fraction": statistics.median(stalls["fraction"]) if stalls else None,
        "input_wait_ms_per_step": statistics.median(stalls["per_step_ms"]) if stalls else None,
        "load": guard.summary(),
    }
    if args.json:
        print(json.dumps(result))
    setting = " (jit)" if args.jit else ""
    setting += " (mixed precision)" if args.mixed_precision else ""
    print(
        guard.mark(
            f"engine{setting} {result['engine_img_per_s']:.0f} img/s vs keras fit {result['keras_fit_img_per_s']:.0f} img/s: "
            f"ratio {result['ratio']:.3f} (target >= 0.95)"
        )
    )
    if bf16:
        print(
            guard.mark(
                f"engine bfloat16 {result['engine_bf16_img_per_s']:.0f} img/s vs float32 "
                f"{result['engine_img_per_s']:.0f} img/s: speed-up {result['bf16_speedup']:.2f}x (same run)"
            )
        )
    print(guard.mark(f"startup overhead (process start, imports included, to first step): {startup:.1f} s"))
    if stalls:
        print(
            guard.mark(
                f"input wait (engine's steps waiting in next(iterator), after warm-up): "
                f"{result['input_wait_ms_per_step']:.3f} ms per step, {100 * result['input_wait_fraction']:.1f} % of "
                "the time (the pipeline keeps up when this is ~0)"
            )
        )
    print(f"load during the run: {guard.note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
