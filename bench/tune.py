"""ASHA vs the full grid on scikit-learn's digits, same run: best validation accuracy and epochs spent.

The 1,797 8×8 digits of ``sklearn.datasets.load_digits`` are written as PNGs
in class folders and built into one ``image-classification`` dataset (28×28
grayscale, 20 % validation). Two sweeps over the same space then run on Ray
Tune (Ray on 127.0.0.1), LeNet, one validation per epoch:

* the **grid**: learning rate 1e-4, 1e-3, 1e-2, 1e-1 (the log range's decades) × batch size
  32, 64, 128 × solver sgd, adam: 24 trials, each to 10 epochs (240 epochs);
* **ASHA**: 16 trials drawn from learning_rate=loguniform(1e-4,1e-1), batch_size=choice(32,64,128),
  solver=choice(sgd,adam), max 10 epochs, grace period 1, reduction factor 3.

Printed: each sweep's best val_accuracy and epochs spent, the gap in points
and ASHA's epochs as a fraction of the grid's (the issue's target: within 0.5
points while spending at most 40 %). Heavy (40 trials, each a model job with
its own TensorFlow start-up): run it alone, niced::

    nice -n 10 .venv/bin/python bench/tune.py [--max-concurrent 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

SPACE = ["learning_rate=loguniform(1e-4,1e-1)", "batch_size=choice(32,64,128)", "solver=choice(sgd,adam)"]
GRID = ["learning_rate=0.0001,0.001,0.01,0.1", "batch_size=32,64,128", "solver=sgd,adam"]


def make_dataset(root: Path, jobs_dir: Path) -> str:
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    from digits_core.datasets import create_dataset

    digits = load_digits()
    folder = root / "digits"
    for index, (image, target) in enumerate(zip(digits.images, digits.target)):
        path = folder / str(int(target)) / f"{index:04d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.clip(image * 16, 0, 255).astype(np.uint8), mode="L").save(path)
    job = create_dataset(
        "image-classification",
        {"folder": str(folder), "image_type": "grayscale", "width": 28, "height": 28, "val_percent": 20},
        name="sklearn digits",
        workers=2,
        jobs_dir=jobs_dir,
    )
    return job.id


def run(
    dataset: str, jobs_dir: Path, name: str, search: list[str], scheduler: str, trials: int, max_concurrent: int
) -> dict:
    from digits_core.sweeps.tune import tune

    started = time.perf_counter()
    handle = tune(
        dataset,
        "lenet",
        name,
        search=search,
        scheduler=scheduler,
        trials=trials,
        max_epochs=10,
        metric="val_accuracy",
        grace_period=1,
        reduction_factor=3,
        max_concurrent=max_concurrent,
        search_seed=0,
        jobs_dir=jobs_dir,
        lr_policy="fixed",
    )
    summary = handle.wait()
    best = summary["best"]
    statuses: dict[str, int] = {}
    for row in summary["trials"]:
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    return {
        "sweep": summary["id"],
        "trials": len(summary["trials"]),
        "statuses": statuses,
        "best_val_accuracy": None if best is None else best["best"],
        "best_values": best and best["values"],
        "epochs_spent": summary["budget"]["epochs_spent"],
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-concurrent", type=int, default=2, help="trials at a time (default 2)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-tune-"))
    jobs_dir = root / "jobs"
    dataset = make_dataset(root, jobs_dir)
    from digits_core.sweeps.trials import _start_ray

    _start_ray(None)  # one Ray for both sweeps
    grid = run(dataset, jobs_dir, "grid", GRID, "grid", 24, args.max_concurrent)
    asha = run(dataset, jobs_dir, "asha", SPACE, "asha", 16, args.max_concurrent)
    gap = 100 * (grid["best_val_accuracy"] - asha["best_val_accuracy"])
    fraction = asha["epochs_spent"] / grid["epochs_spent"]
    figures = {
        "grid": grid,
        "asha": asha,
        "gap_points": round(gap, 2),
        "epochs_fraction": round(fraction, 4),
        "targets_met": gap <= 0.5 and fraction <= 0.40,
    }
    print(
        f"grid: best val_accuracy {100 * grid['best_val_accuracy']:.2f} % in {grid['epochs_spent']:g} epochs "
        f"({grid['trials']} trials, {grid['seconds']:.0f} s)"
    )
    print(
        f"asha: best val_accuracy {100 * asha['best_val_accuracy']:.2f} % in {asha['epochs_spent']:g} epochs "
        f"({asha['trials']} trials {asha['statuses']}, {asha['seconds']:.0f} s)"
    )
    print(
        f"gap {gap:+.2f} points (target <= 0.5); ASHA spent {100 * fraction:.1f} % of the grid's epochs "
        f"(target <= 40 %): {'met' if figures['targets_met'] else 'NOT met'}"
    )
    print(json.dumps(figures))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")
    import ray

    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
