"""Folder -> trained model: `digits dataset create` + `digits train` versus the Keras script a user would write.

Two tasks (``--task``): ``lenet`` (the default) and ``unet``.

**lenet.** Generates N 28×28 grayscale PNGs in 10 class folders, then runs in the same
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

**unet** (the U-Net on the demo's Sunnybrook set). Generates the demo's
synthetic Sunnybrook data (10 cases, 64×64, 4 slices: DICOM files and
contour files in the real layout), then runs:

* **ours**: ``digits dataset create image-sunnybrook`` (20 % of the cases for
  validation) then ``digits train --network unet --batch-size 8 --epochs E``
  (default 30; the demo's run);
* **Keras**: one script — the contour files found with ``glob``, each one's
  DICOM read with pydicom (the case -> series table a user copies from the
  dataset's documentation, handed over as JSON), the polygon rasterized with
  Pillow, every 5th case for validation, ``tf.data`` from the arrays
  (shuffle, batch 8, prefetch), the same U-Net (depth 4, 8 filters,
  conv-BN-ReLU, transposed-conv upsampling, softmax), ``Adam(0.001)``, sparse
  cross-entropy, ``fit`` for E epochs and ``model.save``.

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
    .venv/bin/python bench/train_phases.py --task unet      # the U-Net on the demo's Sunnybrook set, 30 epochs
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

from _quiet import LoadGuard, add_guard_args  # noqa: E402
from dataset_create import generate  # noqa: E402

from digits_core.phase_marks import PHASE_LOG_ENV, read_marks  # noqa: E402

#: The Keras scripts, as a user would write them, plus `mark(...)` lines (same log format as the engine's).
KERAS_HEAD = """
import json, os, sys, time
_log = open(os.environ["DIGITS_PHASE_LOG"], "a", buffering=1)
def mark(phase):
    _log.write(json.dumps({"phase": phase, "t": time.time()}) + "\\n")
mark("interpreter")

import tensorflow as tf
import keras
mark("tensorflow import")

"""

#: The LeNet task's data and model (argv: folder, out, epochs, solver).
KERAS_LENET = """
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


"""

#: The U-Net task's data and model (argv: image folder, contour folder, out, epochs, series table JSON).
KERAS_UNET = """
images_dir, contours_dir, out, epochs, series_json = sys.argv[1:6]
epochs = int(epochs)
import glob
import numpy as np
import pydicom
from PIL import Image, ImageDraw

series = json.loads(open(series_json).read())  # case -> image series, from the dataset's documentation
by_case = {}
for path in sorted(glob.glob(os.path.join(contours_dir, "**", "IM-0001-*-icontour-manual.txt"), recursive=True)):
    padded = path.split(os.sep)[-4]  # SC-HF-I-01/contours-manual/IRCCI-expert/IM-0001-0048-icontour-manual.txt
    prefix, number = padded.rsplit("-", 1)
    case = f"{prefix}-{int(number)}"
    image_number = os.path.basename(path).split("-")[2]
    pixels = pydicom.dcmread(os.path.join(images_dir, case, f"IM-{series[case]}-{image_number}.dcm")).pixel_array
    image = pixels.astype(np.float32) / max(float(pixels.max()), 1.0)
    mask = Image.new("L", (image.shape[1], image.shape[0]), 0)
    points = [tuple(p) for p in np.round(np.loadtxt(path)).astype(int).tolist()]
    ImageDraw.Draw(mask).polygon(points, fill=1, outline=1)
    by_case.setdefault(case, []).append((image[:, :, None], np.asarray(mask)))
cases = sorted(by_case)
val_cases = set(cases[::5])


def arrays(chosen):
    pairs = [pair for case in cases if case in chosen for pair in by_case[case]]
    return np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])


x_train, y_train = arrays(set(cases) - val_cases)
x_val, y_val = arrays(val_cases)
train = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(len(x_train), seed=1).batch(8)
train = train.prefetch(tf.data.AUTOTUNE)
val = tf.data.Dataset.from_tensor_slices((x_val, y_val)).batch(8).prefetch(tf.data.AUTOTUNE)
mark("dataset open")


def conv_bn_relu(x, filters):
    x = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False)(x)
    x = keras.layers.BatchNormalization()(x)
    return keras.layers.ReLU()(x)


inputs = keras.Input(x_train.shape[1:])
x, skips = inputs, []
for level in range(4):
    x = conv_bn_relu(conv_bn_relu(x, 8 * 2**level), 8 * 2**level)
    skips.append(x)
    x = keras.layers.MaxPooling2D(2)(x)
x = conv_bn_relu(conv_bn_relu(x, 8 * 2**4), 8 * 2**4)
for level in reversed(range(4)):
    x = keras.layers.Conv2DTranspose(8 * 2**level, 2, strides=2, padding="same")(x)
    x = keras.layers.Concatenate()([x, skips[level]])
    x = conv_bn_relu(conv_bn_relu(x, 8 * 2**level), 8 * 2**level)
outputs = keras.layers.Conv2D(2, 1, activation="softmax")(x)
model = keras.Model(inputs, outputs)
model.compile(optimizer=keras.optimizers.Adam(0.001), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
mark("model build")


"""

#: Both tasks' training, with the phase marks.
KERAS_FIT = """
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


def create_args(task: str, folder: Path) -> list[str]:
    """``digits dataset create`` arguments of the task's dataset."""
    if task == "unet":
        from digits_data_sunnybrook.synth import CONTOURS_DIR, IMAGES_DIR

        return [
            "image-sunnybrook",
            "--image-folder",
            str(folder / IMAGES_DIR),
            "--contour-folder",
            str(folder / CONTOURS_DIR),
            "--pct-val",
            "20",
        ]
    return [
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
    ]


def train_args(task: str, epochs: int, solver: str) -> list[str]:
    """``digits train`` options of the task (the dataset comes first)."""
    if task == "unet":
        return ["--network", "unet", "--batch-size", "8", "--epochs", str(epochs)]
    return ["--network", "lenet", "--epochs", str(epochs)] + (
        ["--solver", "sgd", "--learning-rate", "0.01"] if solver == "sgd" else []
    )


def run_ours(
    task: str, folder: Path, work: Path, epochs: int, env: dict, src: str | None = None, solver: str = "adam"
) -> dict:
    jobs, log = work / "jobs", work / "ours.phases"
    digits = [sys.executable, "-m", "digits_core", "--jobs-dir", str(jobs)]
    if src:
        digits = [sys.executable, "-c", BASELINE_DRIVER, src, "--jobs-dir", str(jobs)]
    _, _, create_wall, create_cpu = timed(digits + ["dataset", "create", *create_args(task, folder), "--quiet"], env)
    (dataset,) = [p.name for p in jobs.iterdir()]
    launched, ended, train_wall, train_cpu = timed(
        digits + ["train", "--dataset", dataset, *train_args(task, epochs, solver), "--quiet"],
        {**env, PHASE_LOG_ENV: str(log)},
    )
    phases = summed(read_marks(log, launched, ended))
    phases["dataset create (whole process)"] = create_wall
    shutil.rmtree(jobs, ignore_errors=True)
    log.unlink()
    return {"phases": phases, "wall": create_wall + train_wall, "cpu": create_cpu + train_cpu}


def run_keras(task: str, folder: Path, work: Path, epochs: int, env: dict, solver: str = "adam") -> dict:
    script, log, out = work / f"keras_{task}.py", work / "keras.phases", work / "keras-out"
    out.mkdir(exist_ok=True)
    if task == "unet":
        from digits_data_sunnybrook.layout import load_series_table
        from digits_data_sunnybrook.synth import CONTOURS_DIR, IMAGES_DIR

        table = work / "series.json"
        table.write_text(json.dumps(load_series_table()))
        script.write_text(KERAS_HEAD + KERAS_UNET + KERAS_FIT)
        args = [str(folder / IMAGES_DIR), str(folder / CONTOURS_DIR), str(out), str(epochs), str(table)]
    else:
        script.write_text(KERAS_HEAD + KERAS_LENET + KERAS_FIT)
        args = [str(folder), str(out), str(epochs), solver]
    launched, ended, wall, cpu = timed([sys.executable, str(script), *args], {**env, PHASE_LOG_ENV: str(log)})
    phases = summed(read_marks(log, launched, ended))
    shutil.rmtree(out, ignore_errors=True)
    log.unlink()
    return {"phases": phases, "wall": wall, "cpu": cpu}


def make_data(task: str, data_dir: str | None, work: Path, n: int) -> Path:
    """The task's source files (generated once; reused from ``data_dir`` when present)."""
    if task == "unet":
        folder = Path(data_dir) / "sunnybrook-demo" if data_dir else work / "sunnybrook"
        if not (folder / ".done").exists():
            from digits_data_sunnybrook.synth import generate as generate_sunnybrook

            result = generate_sunnybrook(folder, cases=10, size=64, seed=0, slices=4)  # the demo's set
            (folder / ".done").write_text("ok")
            print(f"generated the demo's synthetic Sunnybrook set ({len(result.cases)} cases, 64x64)")
        return folder
    folder = Path(data_dir) / f"png-{n}" if data_dir else work / "png"
    if not folder.exists():
        t0 = time.perf_counter()
        generate(folder, n, 28, "png")
        print(f"generated {n} 28x28 PNGs in {time.perf_counter() - t0:.1f} s")
    return folder


def median_run(runs: list[dict]) -> dict:
    names = {name for run in runs for name in run["phases"]}
    return {
        "phases": {name: statistics.median(run["phases"].get(name, 0.0) for run in runs) for name in names},
        "wall": statistics.median(run["wall"] for run in runs),
        "cpu": statistics.median(run["cpu"] for run in runs),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--task",
        choices=("lenet", "unet"),
        default="lenet",
        help="lenet: 28x28 PNG folders (default); unet: the demo's Sunnybrook set",
    )
    parser.add_argument("--n", type=int, default=20000, help="lenet: 28x28 PNGs to generate (default 20000)")
    parser.add_argument("--epochs", type=int, default=None, help="epochs on both sides (default: lenet 3, unet 30)")
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
        help="lenet: both sides' optimizer: adam = LeNet's default here (Adam 0.001, the default), sgd = SGD 0.01",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    add_guard_args(parser)
    args = parser.parse_args(argv)
    guard = LoadGuard.from_args(args).start()
    if args.epochs is None:
        args.epochs = 30 if args.task == "unet" else 3

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", PHASE_LOG_ENV)}
    env["TF_CPP_MIN_LOG_LEVEL"] = env.get("TF_CPP_MIN_LOG_LEVEL", "2")
    work = Path(tempfile.mkdtemp(prefix="digits-bench-phases-"))
    load_before = os.getloadavg()[0]
    try:
        folder = make_data(args.task, args.data_dir, work, args.n)
        ours, keras, base = [], [], []
        for i in range(args.repeat):
            sides = [
                (keras, lambda: run_keras(args.task, folder, work, args.epochs, env, args.solver)),
                (ours, lambda: run_ours(args.task, folder, work, args.epochs, env, solver=args.solver)),
            ]
            if args.baseline_src:
                sides.append(
                    (base, lambda: run_ours(args.task, folder, work, args.epochs, env, args.baseline_src, args.solver))
                )
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
        guard.stop()
    guard.refuse_if_strict()
    ratio = k["wall"] / o["wall"]
    title = (
        f"SUNNYBROOK (demo set, 10 cases 64x64) -> U-Net, batch 8, {args.epochs} epochs"
        if args.task == "unet"
        else f"FOLDER -> LeNet ({args.solver}), {args.n} 28x28 PNGs, {args.epochs} epochs"
    )
    print(
        f"\n{title} (median of {args.repeat}; seconds; load "
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
        guard.mark(
            f"ratio Keras / ours: {ratio:.2f}x (target >= 1.2x: {'met' if ratio >= 1.2 else 'NOT met'}); "
            f"CPU ratio {k['cpu'] / o['cpu']:.2f}x"
        )
    )
    print(f"load during the run: {guard.note()}")
    if args.json:
        print(
            json.dumps(
                {
                    "task": args.task,
                    "n": args.n,
                    "epochs": args.epochs,
                    "repeat": args.repeat,
                    "ours": o,
                    "keras": k,
                    "baseline": b,
                    "ratio": ratio,
                    "cpu_ratio": k["cpu"] / o["cpu"],
                    "target": 1.2,
                    "load": guard.summary(),
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
