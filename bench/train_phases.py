"""Folder -> trained LeNet: `digits dataset create` + `digits train` versus the Keras script a user would write.

Generates N 28×28 grayscale PNGs in 10 class folders, then runs in the same
run, alternating which goes first, each in a fresh process timed from exec
to exit:

* **ours**: ``digits dataset create image-classification`` (encoding
  ``none``, 25 % validation) then ``digits train --network lenet --epochs E``
  (every default: Adam 0.001, batch 64, validation and a snapshot every epoch,
  metrics and TensorBoard events);
* **Keras**: one script — ``keras.utils.image_dataset_from_directory`` (same
  25 % validation split, grayscale, 28×28, batch 64) with ``cache()`` and
  ``prefetch``, the same LeNet (conv20-pool-conv50-pool-fc500-fc, a
  ``Rescaling(1/255)`` layer), ``Adam(0.001)`` (LeNet's default here), ``fit(..., validation_data=...)``
  for E epochs and ``model.save`` at the end.

Both sides report their phases. Ours come from the engine's phase marks
(``DIGITS_PHASE_LOG=FILE``, see ``digits_core/phase_marks.py``): interpreter,
imports, TensorFlow import, job set-up, dataset open, model build, input
pipeline, first step (tracing), steps, first validation (tracing),
validation, snapshot, metrics writes (metrics.jsonl and TensorBoard), job
finish, report, exit. The Keras script marks its own phases the same way
(Keras callbacks at the first batch, around validation and at the end).

It prints a table of phases (median over ``--repeat`` runs, seconds), each
side's total and the ratio Keras / ours (issue 31's target: ≥ 1.2×), and the
CPU seconds of each side (children included), which another process's load
moves less than wall time. Absolute figures swing with the machine's load:
compare within one run.

``--baseline-src DIR`` also runs our two commands from another source tree
(its ``digits_core/`` imported instead of the installed one, e.g. ``git archive COMMIT | tar -x -C DIR``) in the same
run, as a third column: how much one change moved each phase.

Usage::

    .venv/bin/python bench/train_phases.py                  # 20,000 PNGs, 3 epochs
    .venv/bin/python bench/train_phases.py --n 2000 --epochs 1 --repeat 1   # a quick look
    .venv/bin/python bench/train_phases.py --baseline-src /tmp/before      # a change, before vs after
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dataset_create import generate  # noqa: E402

from digits_core.phase_marks import PHASE_LOG_ENV, read_marks  # noqa: E402

#: The Keras script, as a user would write it, plus `mark(...)` lines (same log format as the engine's).
KERAS_SCRIPT = """
import json, os, sys, time
_log = open(os.environ["DIGITS_PHASE_LOG"], "a", buffering=1)
def mark(phase):
    _log.write(json.dumps({"phase": phase, "t": time.time()}) + "\\n")
mark("interpreter")

import tensorflow as tf
import keras
mark("tensorflow import")

folder, out, epochs, solver = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
train, val = keras.utils.image_dataset_from_directory(
    folder, validation_split=0.25, subset="both", seed=1, color_mode="grayscale", image_size=(28, 28),
    batch_size=64, label_mode="int", verbose=False)
num_classes = len(train.class_names)
train = train.cache().prefetch(tf.data.AUTOTUNE)
val = val.cache().prefetch(tf.data.AUTOTUNE)
mark("dataset open")

model = keras.Sequential([
    keras.Input((28, 28, 1)),
    keras.layers.Rescaling(1 / 255),
    keras.layers.Conv2D(20, 5), keras.layers.MaxPooling2D(2),
    keras.layers.Conv2D(50, 5), keras.layers.MaxPooling2D(2),
    keras.layers.Flatten(),
    keras.layers.Dense(500, activation="relu"),
    keras.layers.Dense(num_classes, activation="softmax"),
])
optimizer = keras.optimizers.SGD(0.01) if solver == "sgd" else keras.optimizers.Adam(0.001)
model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
mark("model build")


class Phases(keras.callbacks.Callback):
    validations = 0

    def on_train_batch_end(self, batch, logs=None):
        if not getattr(self, "seen", False):
            self.seen = True
            mark("first step (tracing)")

    def on_test_begin(self, logs=None):
        mark("steps")

    def on_test_end(self, logs=None):
        self.validations += 1
        mark("validation" if self.validations > 1 else "first validation (tracing)")


model.fit(train, validation_data=val, epochs=epochs, verbose=0, callbacks=[Phases()])
mark("steps")
model.save(os.path.join(out, "model.keras"))
mark("snapshot")
"""

#: Phases in the order the table prints them.
ORDER = [
    "dataset create (whole process)",
    "interpreter",
    "imports",
    "tensorflow import",
    "job set-up",
    "dataset open",
    "model build",
    "metrics writes",
    "input pipeline",
    "first step (tracing)",
    "steps",
    "first validation (tracing)",
    "validation",
    "snapshot",
    "job finish",
    "report",
    "exit",
]


def timed(cmd: list[str], env: dict) -> tuple[float, float, float, float]:
    """(launched, ended, wall seconds, CPU seconds of the process and its children) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    launched, start = time.time(), time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall, ended = time.perf_counter() - start, time.time()
    if done.returncode:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"failed ({done.returncode}): {' '.join(cmd)}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return launched, ended, wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def summed(phases: list[tuple[str, float]]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for name, seconds in phases:
        totals[name] = totals.get(name, 0.0) + seconds
    return totals


#: `digits` from another source tree: drops the editable install's finder of digits_core, then imports from argv[1].
BASELINE_DRIVER = """
import sys
sys.meta_path = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable___digits_core")]
sys.path.insert(0, sys.argv.pop(1))
from digits_core.cli import main
sys.exit(main(sys.argv[1:]))
"""


def run_ours(folder: Path, work: Path, epochs: int, env: dict, src: str | None = None, solver: str = "adam") -> dict:
    jobs, log = work / "jobs", work / "ours.phases"
    digits = [sys.executable, "-m", "digits_core", "--jobs-dir", str(jobs)]
    if src:
        digits = [sys.executable, "-c", BASELINE_DRIVER, src, "--jobs-dir", str(jobs)]
    _, _, create_wall, create_cpu = timed(
        digits
        + [
            "dataset",
            "create",
            "image-classification",
            "--folder",
            str(folder),
            "--image-type",
            "grayscale",
            "--width",
            "28",
            "--height",
            "28",
            "--encoding",
            "none",
            "--quiet",
        ],
        env,
    )
    (dataset,) = [p.name for p in jobs.iterdir()]
    launched, ended, train_wall, train_cpu = timed(
        digits
        + ["train", "--dataset", dataset, "--network", "lenet", "--epochs", str(epochs), "--quiet"]
        + (["--solver", "sgd", "--learning-rate", "0.01"] if solver == "sgd" else []),
        {**env, PHASE_LOG_ENV: str(log)},
    )
    phases = summed(read_marks(log, launched, ended))
    phases["dataset create (whole process)"] = create_wall
    shutil.rmtree(jobs, ignore_errors=True)
    log.unlink()
    return {"phases": phases, "wall": create_wall + train_wall, "cpu": create_cpu + train_cpu}


def run_keras(folder: Path, work: Path, epochs: int, env: dict, solver: str = "adam") -> dict:
    script, log, out = work / "keras_folder.py", work / "keras.phases", work / "keras-out"
    script.write_text(KERAS_SCRIPT)
    out.mkdir(exist_ok=True)
    launched, ended, wall, cpu = timed(
        [sys.executable, str(script), str(folder), str(out), str(epochs), solver], {**env, PHASE_LOG_ENV: str(log)}
    )
    phases = summed(read_marks(log, launched, ended))
    shutil.rmtree(out, ignore_errors=True)
    log.unlink()
    return {"phases": phases, "wall": wall, "cpu": cpu}


def median_run(runs: list[dict]) -> dict:
    names = {name for run in runs for name in run["phases"]}
    return {
        "phases": {name: statistics.median(run["phases"].get(name, 0.0) for run in runs) for name in names},
        "wall": statistics.median(run["wall"] for run in runs),
        "cpu": statistics.median(run["cpu"] for run in runs),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000, help="28x28 PNGs to generate (default 20000)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs on both sides (default 3)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per side, alternating (median; default 3)")
    parser.add_argument("--data-dir", default=None, help="keep the generated PNGs here (reused when present)")
    parser.add_argument(
        "--baseline-src",
        default=None,
        metavar="DIR",
        help="also run ours from this source tree (its digits_core/ first on sys.path), as a third column",
    )
    parser.add_argument(
        "--solver",
        choices=("adam", "sgd"),
        default="adam",
        help="both sides' optimizer: adam = LeNet's default here (Adam 0.001, the default), sgd = SGD 0.01",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args(argv)

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", PHASE_LOG_ENV)}
    env["TF_CPP_MIN_LOG_LEVEL"] = env.get("TF_CPP_MIN_LOG_LEVEL", "2")
    work = Path(tempfile.mkdtemp(prefix="digits-bench-phases-"))
    folder = Path(args.data_dir) / f"png-{args.n}" if args.data_dir else work / "png"
    load_before = os.getloadavg()[0]
    try:
        if not folder.exists():
            t0 = time.perf_counter()
            generate(folder, args.n, 28, "png")
            print(f"generated {args.n} 28x28 PNGs in {time.perf_counter() - t0:.1f} s")
        ours, keras, base = [], [], []
        for i in range(args.repeat):
            sides = [
                (keras, lambda: run_keras(folder, work, args.epochs, env, args.solver)),
                (ours, lambda: run_ours(folder, work, args.epochs, env, solver=args.solver)),
            ]
            if args.baseline_src:
                sides.append((base, lambda: run_ours(folder, work, args.epochs, env, args.baseline_src, args.solver)))
            for into, run in sides if i % 2 == 0 else sides[::-1]:
                into.append(run())
            print(
                f"run {i + 1}/{args.repeat}: Keras {keras[-1]['wall']:.2f} s, ours {ours[-1]['wall']:.2f} s"
                + (f", baseline {base[-1]['wall']:.2f} s" if base else "")
            )
        o, k = median_run(ours), median_run(keras)
        b = median_run(base) if base else None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratio = k["wall"] / o["wall"]
    print(
        f"\nFOLDER -> LeNet ({args.solver}), {args.n} 28x28 PNGs, {args.epochs} epochs (median of {args.repeat}; seconds; load "
        f"average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after)"
    )
    sides = [o, k] + ([b] if b else [])
    print(f"  {'phase':<32} {'ours':>8} {'Keras':>8}" + (f" {'baseline':>9}" if b else ""))
    seen = set().union(*(side["phases"] for side in sides))
    names = [n for n in ORDER if n in seen] + sorted(seen - set(ORDER))
    for name in names:
        cells = [f"{side['phases'][name]:8.2f}" if name in side["phases"] else f"{'-':>8}" for side in sides]
        print(f"  {name:<32} " + " ".join(cells))
    print(f"  {'total (exec to exit)':<32} " + " ".join(f"{side['wall']:8.2f}" for side in sides))
    print(f"  {'CPU seconds (with children)':<32} " + " ".join(f"{side['cpu']:8.2f}" for side in sides))
    if b:
        print(
            f"baseline / ours: {b['wall'] / o['wall']:.2f}x wall, {b['cpu'] / o['cpu']:.2f}x CPU "
            f"(baseline: {args.baseline_src})"
        )
    print(
        f"ratio Keras / ours: {ratio:.2f}x (target >= 1.2x: {'met' if ratio >= 1.2 else 'NOT met'}); "
        f"CPU ratio {k['cpu'] / o['cpu']:.2f}x"
    )
    if args.json:
        print(
            json.dumps(
                {
                    "n": args.n,
                    "epochs": args.epochs,
                    "repeat": args.repeat,
                    "ours": o,
                    "keras": k,
                    "baseline": b,
                    "ratio": ratio,
                    "cpu_ratio": k["cpu"] / o["cpu"],
                    "target": 1.2,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
