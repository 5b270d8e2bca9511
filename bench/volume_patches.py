"""Benchmark: volume patches from LMDB against the 3-D training step, sliding-window inference, build memory.

Measured in one run, on synthetic Decathlon cases (``digits_data_volumes.synth``):

* **patches/s** of :class:`digits_core.volumes.patches.PatchSampler` (foreground
  oversampling, slab reads from the published LMDB stage, augmentation)
  against **patches/s the training step consumes** (``unet3d`` at its CPU
  default, ``train_on_batch`` on batches of 2 already in memory): the ratio
  says whether loading keeps the step fed (above 1: it does);
* **sliding-window inference** of one 64×160×160 volume (patch 48×120×120,
  half overlap, Gaussian blending) with the untrained CPU ``unet3d``: seconds
  and the number of tiles;
* **peak memory of a dataset build** (``msd-volumes``, a fresh process each,
  one worker and two) with 300-slice cases, for 4 and 12 cases (every fourth
  case is coarser and resampled, so both sets hold the costliest kind): it
  should stay flat (one case in memory at a time), not grow with the dataset.

Usage::

    .venv/bin/python bench/volume_patches.py                # about 2 minutes on 2 cores
    .venv/bin/python bench/volume_patches.py --quick        # smaller, for a smoke run
    .venv/bin/python bench/volume_patches.py --memory-only  # the build-memory rows only
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# VmHWM, not ru_maxrss: ru_maxrss survives exec, so a child forked from this (TensorFlow-sized) process would
# report this process's peak.
_BUILD = """
import json, sys
from digits_core.datasets import create_dataset
job = create_dataset("msd-volumes", {"data_folder": sys.argv[1]}, jobs_dir=sys.argv[2], workers=int(sys.argv[3]))
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"peak_mb": int(hwm.split()[1]) / 1024, "id": job.id}))
"""


def build(task: Path, jobs: Path, workers: int = 1) -> dict:
    """Build an ``msd-volumes`` dataset in a fresh process; its peak memory (that process's) and job id."""
    out = subprocess.run(
        [sys.executable, "-c", _BUILD, str(task), str(jobs), str(workers)], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def patch_rate(stage: Path, count: int, patch, seconds: float) -> float:
    from digits_core.datasets.volumes import VolumeStageReader
    from digits_core.volumes.patches import PatchSampler

    reader = VolumeStageReader(stage)
    sampler = PatchSampler(reader, count, patch, seed=0)
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        sampler.batch(2)
        done += 2
    rate = done / (time.perf_counter() - start)
    reader.close()
    return rate


def step_rate(patch, steps: int) -> float:
    import keras

    from digits_core.engine.volume_nets import build_unet, dice_ce_loss

    model = build_unet(1, 2)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=dice_ce_loss(2))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, *patch, 1)).astype(np.float32)
    y = (x[..., 0] > 0.5).astype(np.int32)
    model.train_on_batch(x, y)  # compile the step before the clock starts
    start = time.perf_counter()
    for _ in range(steps):
        model.train_on_batch(x, y)
    return 2 * steps / (time.perf_counter() - start)


def sliding(shape, patch) -> tuple[float, int]:
    from digits_core.engine.volume_loop import predict_volume
    from digits_core.engine.volume_nets import build_unet
    from digits_core.volumes.sliding import tile_starts

    model = build_unet(1, 2)
    volume = np.random.default_rng(0).normal(size=(*shape, 1)).astype(np.float32)
    model.predict_on_batch(volume[None, : patch[0], : patch[1], : patch[2]])
    start = time.perf_counter()
    predict_volume(model, volume, "unet3d", patch, 2)
    tiles = int(np.prod([len(tile_starts(s, p, 0.5)) for s, p in zip(shape, patch)]))
    return time.perf_counter() - start, tiles


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--memory-only", action="store_true", help="only the build-memory measurement")
    args = parser.parse_args(argv)
    from digits_data_volumes.synth import generate

    shape, patch = ((16, 32, 32), (12, 24, 24)) if args.quick else ((32, 96, 96), (24, 72, 72))
    big_slices, big_side = (60, 64) if args.quick else (300, 128)
    with tempfile.TemporaryDirectory(prefix="bench-volumes-") as tmp:
        root = Path(tmp)
        if not args.memory_only:
            loader_and_step(root, shape, patch, args.quick)
        peaks: dict = {}
        for cases in (4, 12):
            task = generate(root / f"big{cases}", cases=cases, shape=(big_slices, big_side, big_side), dicom=False).task
            for workers in (1, 2):
                peaks[cases, workers] = build(task, root / f"jobs{cases}-{workers}", workers)["peak_mb"]
                print(
                    f"dataset build, {cases} cases of {big_slices}x{big_side}x{big_side}, {workers} worker(s): "
                    f"peak {peaks[cases, workers]:.0f} MB"
                )
        for workers in (1, 2):
            print(
                f"peak memory ratio 12 cases / 4 cases, {workers} worker(s): "
                f"{peaks[12, workers] / peaks[4, workers]:.2f} (flat is 1.0)"
            )
    return 0


def loader_and_step(root: Path, shape, patch, quick: bool) -> None:
    """The loader-vs-step and sliding-window rows."""
    from digits_data_volumes.synth import generate

    synth = generate(root / "patches", cases=6, shape=shape, dicom=False)
    job = build(synth.task, root / "jobs")
    dataset = root / "jobs" / job["id"] / "dataset"
    count = json.loads((dataset / "dataset.json").read_text())["stages"]["train"]["count"]
    loader = patch_rate(dataset / "train", count, patch, 5.0 if quick else 15.0)
    step = step_rate(patch, 5 if quick else 20)
    print(
        f"patches {patch} from {shape} cases: loader {loader:.1f} patches/s, unet3d step consumes "
        f"{step:.1f} patches/s, ratio {loader / step:.1f}x ({'fed' if loader > step else 'NOT fed'})"
    )
    seconds, tiles = sliding((32, 80, 80) if quick else (64, 160, 160), (16, 40, 40) if quick else (48, 120, 120))
    print(f"sliding window over {'32x80x80' if quick else '64x160x160'}: {seconds:.2f} s, {tiles} tiles")


if __name__ == "__main__":
    raise SystemExit(main())
