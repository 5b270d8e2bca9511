"""Training images/s on whatever device is present: the DIGITS engine vs plain Keras ``fit``, same run.

One command records LeNet, AlexNet and U-Net training throughput through
:func:`digits_core.engine.train` (real LMDB datasets, the engine's tf.data
pipeline fed to the device) and through plain Keras ``model.fit`` on numpy
arrays already normalized the same way (mean image subtracted, scaled by
1/255), with the same network builder, optimizer (Adam), loss, batch size,
epochs and setting:

* ``fp32``: float32, no XLA (Keras is given ``jit_compile=False``: its
  ``"auto"`` would turn XLA on for a GPU);
* ``jit``: XLA on both sides (``--jit`` / ``jit_compile=True``);
* ``mixed``: ``mixed_float16`` on both sides (``--mixed-precision``; a GPU only).

On a GPU all three are measured (fp32 first for every network, so a run cut
short still has those); on a CPU only ``fp32`` unless ``--variants`` says
otherwise. The first epoch (tracing, XLA compilation, warm-up) is excluded on
both sides: the engine is timed from its first step of epoch 2 to the step
before its last (the final snapshot is not training), Keras over its epochs
2..E. Sides alternate per repeat; medians are reported, and the figure to
read is the ratio (engine / Keras), because absolute figures swing with load.
A full run starts no new measurement after ``--budget-s`` (420 s), so it ends
within 8 minutes on a GPU and says what it left out.

Run (on the team machine under the shared lock)::

    .venv/bin/python bench/gpu_throughput.py            # full sizes: < 8 min on one GPU
    .venv/bin/python bench/gpu_throughput.py --quick    # small sizes: < 2 min on 2 CPU cores
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np
from _quiet import LoadGuard, add_guard_args  # bench/: the load guard every bench shares


@dataclass(frozen=True)
class Case:
    """One network's benchmark: data shape and size, batch, epochs, learning rate."""

    network: str
    size: int
    channels: int
    classes: int
    images: int
    batch: int
    epochs: int
    learning_rate: float

    @property
    def segmentation(self) -> bool:
        return self.network == "unet"


# full: DIGITS's usual input sizes (MNIST 28x28, ImageNet-style 224x224 RGB, 256x256 MRI slices)
FULL = [
    Case("lenet", 28, 1, 10, 30_720, 128, 3, 1e-3),
    Case("alexnet", 224, 3, 10, 2_560, 128, 4, 1e-4),
    Case("unet", 256, 1, 2, 1_024, 16, 3, 1e-3),
]
QUICK = [
    Case("lenet", 28, 1, 10, 2_048, 64, 2, 1e-3),
    Case("alexnet", 32, 3, 10, 384, 32, 2, 1e-4),
    Case("unet", 32, 1, 2, 256, 16, 2, 1e-3),
]
VARIANTS = {"fp32": (False, False), "jit": (True, False), "mixed": (False, True)}


def make_arrays(case: Case, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Learnable synthetic data: a class-placed bright square (classification) or a disc and its mask."""
    rng = np.random.default_rng(seed)
    n, s = case.images, case.size
    x = rng.normal(60, 20, (n, s, s, case.channels)).clip(0, 255)
    yy, xx = np.mgrid[0:s, 0:s]
    if case.segmentation:
        cy, cx = rng.uniform(0.3 * s, 0.7 * s, (2, n, 1, 1))
        r = rng.uniform(0.1 * s, 0.25 * s, (n, 1, 1))
        y = ((yy - cy) ** 2 + (xx - cx) ** 2 < r**2).astype(np.uint8)
        x += 120 * y[..., None]
    else:
        y = np.arange(n) % case.classes
        side = max(2, s // 4)
        step = (s - side) // 3
        for k in range(case.classes):  # class k: a square at one of 4x3 places
            top, left = (k // 3) * step, (k % 3) * step
            x[y == k, top : top + side, left : left + side, :] += 150
    return x.clip(0, 255).astype(np.uint8), y


def build_dataset(case: Case, work: str, jobs_dir: str):
    """A real LMDB dataset of ``case`` (numpy-arrays plugin); returns ``(dataset_id, seconds)``."""
    from digits_data_images.numpy_arrays import create_dataset_from_arrays

    x, y = make_arrays(case)
    t0 = time.perf_counter()
    job = create_dataset_from_arrays(
        x,
        y,
        folder=os.path.join(work, case.network),
        options={"val_percent": 0},
        name=f"bench-{case.network}",
        jobs_dir=jobs_dir,
        workers=min(os.cpu_count() or 1, 16),
    )
    return job.id, time.perf_counter() - t0


def keras_fit(case: Case, dataset_id: str, jobs_dir: str, jit: bool, mixed: bool) -> float:
    """Plain Keras ``fit`` on normalized numpy arrays; images/s over epochs 2..E."""
    import keras

    from digits_core.datasets import open_dataset
    from digits_core.engine.networks import builtin

    ds = open_dataset(dataset_id, jobs_dir=jobs_dir)
    x, y = ds.read_all("train")
    x = (x.astype(np.float32) - ds.mean().astype(np.float32)) / np.float32(255.0)
    y = np.asarray(y, np.int32)
    if mixed:
        keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = getattr(builtin, case.network)(x.shape[1:], case.classes)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    model.compile(
        optimizer=keras.optimizers.Adam(case.learning_rate),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        jit_compile=jit,
    )
    marks: dict = {}

    class Clock(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 0:
                marks["start"] = time.perf_counter()

        def on_train_end(self, logs=None):
            marks["end"] = time.perf_counter()

    model.fit(x, y, batch_size=case.batch, epochs=case.epochs, shuffle=True, verbose=0, callbacks=[Clock()])
    return (case.epochs - 1) * len(x) / (marks["end"] - marks["start"])


def engine_train(case: Case, dataset_id: str, jobs_dir: str, jit: bool, mixed: bool) -> float:
    """The DIGITS engine; images/s from the first step of epoch 2 to the step before the last."""
    from digits_core.engine import train

    spe = case.images // case.batch
    last = spe * case.epochs - 1
    marks: dict = {}

    def progress(event):
        if event["phase"] == "train" and event["step"] in (spe, last):
            marks[event["step"]] = time.perf_counter()

    job = train(
        dataset_id,
        case.network,
        name=f"bench-{case.network}",
        jobs_dir=jobs_dir,
        epochs=case.epochs,
        batch_size=case.batch,
        solver="adam",
        learning_rate=case.learning_rate,
        lr_policy="fixed",
        loss="ce",
        validation_interval=0,
        snapshot_interval=0,
        progress=progress,
        jit=jit,
        mixed_precision=mixed,
    )
    shutil.rmtree(job.path, ignore_errors=True)  # AlexNet snapshots are hundreds of MB
    return (last - spe) * case.batch / (marks[last] - marks[spe])


def _release() -> None:
    import keras

    keras.backend.clear_session()
    gc.collect()


def device_name() -> tuple[str, bool]:
    """A description of the device that trains, and whether it is a GPU."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])
        return f"GPU: {details.get('device_name', gpus[0].name)} (x{len(gpus)}, the engine trains on one)", True
    return f"CPU: {os.cpu_count()} cores (no GPU visible)", False


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a 2-core CPU in < 2 minutes)")
    parser.add_argument("--networks", default="lenet,alexnet,unet", help="comma-separated subset")
    parser.add_argument(
        "--variants", default=None, help="comma-separated fp32,jit,mixed (default: all three on a GPU, fp32 on a CPU)"
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="alternating runs per side, medians reported (default: 2 with --quick, else 1)",
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="start no new measurement after this many seconds (default: 420 full, none --quick)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    add_guard_args(parser)
    args = parser.parse_args(argv)
    guard = LoadGuard.from_args(args).start()
    repeats = args.repeats or (2 if args.quick else 1)
    budget = args.budget_s if args.budget_s is not None else (None if args.quick else 420.0)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    t_start = time.perf_counter()
    device, on_gpu = device_name()
    variants = (args.variants or ("fp32,jit,mixed" if on_gpu else "fp32")).split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"--variants: unknown {', '.join(unknown)} (choose from {', '.join(VARIANTS)})")
    if "mixed" in variants and not on_gpu:
        parser.error("--variants mixed needs a GPU (mixed_float16 is refused on a CPU)")
    wanted = args.networks.split(",")
    cases = [c for c in (QUICK if args.quick else FULL) if c.network in wanted]
    load = os.getloadavg()
    print(
        f"device: {device}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
        f"{'quick' if args.quick else 'full'} sizes",
        flush=True,
    )
    results, skipped = [], []
    with tempfile.TemporaryDirectory(prefix="digits-gpu-bench-") as work:
        jobs_dir = os.path.join(work, "jobs")
        datasets = {}
        for case in cases:
            datasets[case.network], seconds = build_dataset(case, work, jobs_dir)
            print(
                f"dataset {case.network}: {case.images} images {case.size}x{case.size}x{case.channels} "
                f"in LMDB ({seconds:.1f} s)",
                flush=True,
            )
        for variant in variants:
            jit, mixed = VARIANTS[variant]
            for case in cases:
                if budget is not None and time.perf_counter() - t_start > budget:
                    skipped.append(f"{case.network} {variant}")
                    continue
                base, engine = [], []
                for _ in range(repeats):
                    base.append(keras_fit(case, datasets[case.network], jobs_dir, jit, mixed))
                    _release()
                    engine.append(engine_train(case, datasets[case.network], jobs_dir, jit, mixed))
                    _release()
                row = {
                    "network": case.network,
                    "variant": variant,
                    "size": case.size,
                    "batch": case.batch,
                    "images": case.images,
                    "epochs": case.epochs,
                    "engine_img_per_s": statistics.median(engine),
                    "keras_fit_img_per_s": statistics.median(base),
                }
                row["ratio"] = row["engine_img_per_s"] / row["keras_fit_img_per_s"]
                results.append(row)
                print(
                    f"  {case.network:8s} {variant:5s} engine {row['engine_img_per_s']:9.0f} img/s   "
                    f"keras fit {row['keras_fit_img_per_s']:9.0f} img/s   ratio {row['ratio']:.2f}   "
                    f"[{time.perf_counter() - t_start:.0f} s]",
                    flush=True,
                )
    guard.stop()
    guard.refuse_if_strict()
    print(f"\n{'network':8s} {'variant':7s} {'engine img/s':>12s} {'keras img/s':>12s} {'ratio':>6s}   ({device})")
    for row in results:
        print(
            guard.mark(
                f"{row['network']:8s} {row['variant']:7s} {row['engine_img_per_s']:12.0f} "
                f"{row['keras_fit_img_per_s']:12.0f} {row['ratio']:6.2f}"
            )
        )
    print(f"load during the run: {guard.note()}")
    if skipped:
        print(f"not measured (past --budget-s {budget:.0f}): {', '.join(skipped)}")
    print(f"total {time.perf_counter() - t_start:.0f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "device": device,
                    "quick": args.quick,
                    "load_average": load,
                    "load": guard.summary(),
                    "results": results,
                    "skipped": skipped,
                },
                fh,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
