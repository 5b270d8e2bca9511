#!/usr/bin/env python3
"""The DIGITS Core demo: real data, two datasets, two trained models, the web UI.

``make demo`` runs this after setting up ``.venv``. Steps (each reuses what
a previous run made, so a second run goes straight to the server):

1. export scikit-learn's handwritten digits (1,797 real 8x8 scans, 10
   classes) to ``demo-data/digits/<class>/<n>.png``;
2. generate a small synthetic Sunnybrook set (real DICOM files and expert
   contour files in the real layout) in ``demo-data/sunnybrook``;
3. build both datasets through their data plugins (``image-classification``
   at 28x28 grayscale, ``image-sunnybrook``);
4. train a LeNet on the digits and a small U-Net on the cardiac images
   (a few minutes in all on 2 CPU cores, progress shown);
   and a ``detectnet`` detector on synthetic handwritten digits placed on
   cluttered backgrounds (``digits_data_images.synth_detection``);
5. start ``digits serve`` on the demo jobs folder and print its URL.

Options: ``--jobs-dir`` (default ``$DIGITS_JOBS_DIR`` when set, else
``demo-data/jobs``), ``--port`` (default ``$DIGITS_DEMO_PORT`` or 5000),
``--host`` (default 127.0.0.1), ``--no-serve`` (stop after training),
``--epochs-lenet``, ``--epochs-unet``, ``--epochs-detectnet``; ``$DIGITS_DEMO_DATA`` moves
``demo-data`` elsewhere (the end-to-end test uses it). The demo prints the
jobs folder and the ``digits`` command that lists or serves it again.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = Path(os.environ.get("DIGITS_DEMO_DATA") or ROOT / "demo-data")  # where the demo's data and jobs go
DIGITS_DATASET = "demo digits (scikit-learn)"
SUNNYBROOK_DATASET = "demo sunnybrook (synthetic)"
LENET_MODEL = "demo lenet on digits"
UNET_MODEL = "demo unet on sunnybrook"
DETECTION_DATASET = "demo detection (synthetic digits)"
DETECTNET_MODEL = "demo detectnet on digits"


def export_sklearn_digits(folder: Path, per_class: int | None = None) -> int:
    """Write scikit-learn's handwritten digits as PNGs in class folders; return the image count.

    Pixel values 0..16 are scaled to 0..255 (uint8). Existing files are kept.

    Args:
        folder: Output folder (``folder/<digit>/<index>.png``).
        per_class: Keep at most this many images per class (``None``: all).
    """
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    counts: dict[int, int] = {}
    written = 0
    for index, (image, target) in enumerate(zip(digits.images, digits.target)):
        target = int(target)
        if per_class is not None and counts.get(target, 0) >= per_class:
            continue
        counts[target] = counts.get(target, 0) + 1
        path = folder / str(target) / f"{index:04d}.png"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(np.clip(image * 16, 0, 255).astype(np.uint8), mode="L").save(path)
        written += 1
    return written


def _find(store, kind: str, name: str):
    """The newest Done job of ``kind`` called ``name``, or ``None``."""
    for job in store.list(kind):
        if job.name == name and job.status.value == "Done":
            return job
    return None


def _bar(label: str):
    """A progress callback printing one updating line."""
    state = {"last": 0.0}

    def report(snapshot: dict) -> None:
        now = time.monotonic()
        if now - state["last"] < 0.5 and snapshot.get("status") not in ("Done", "Error"):
            return
        state["last"] = now
        if "total_steps" in snapshot:
            done, total = snapshot.get("step", 0), snapshot.get("total_steps") or 1
            loss = snapshot.get("loss")
            if isinstance(loss, (int, float)) and math.isfinite(loss):
                state["loss"] = loss
            extra = f" epoch {snapshot.get('epoch', 0):.2f}"
            if "loss" in state:
                extra += f" loss {state['loss']:.4f}"
        else:
            done, total = snapshot.get("done", 0), snapshot.get("total") or 1
            extra = f" {snapshot.get('rate', 0):.0f}/s"
        width = 30
        filled = int(width * min(1.0, done / total))
        print(f"\r  {label}: [{'#' * filled}{'.' * (width - filled)}] {done}/{total}{extra}   ", end="", flush=True)

    return report


def _last_metric(job, name: str):
    """The last value of metric ``name`` in the job's metrics.jsonl, or ``None``."""
    import json

    value = None
    try:
        with open(job.path / "metrics.jsonl", encoding="utf-8") as handle:
            for line in handle:
                point = json.loads(line)
                if point.get("name") == name:
                    value = point.get("value")
    except (OSError, ValueError):
        pass
    return value


def _import_tensorflow_quietly() -> None:
    """Import TensorFlow with its C++ start-up log lines (CUDA probing on CPU machines) hidden."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            try:
                import tensorflow  # noqa: F401
            except ImportError:
                pass  # the engine reports it properly when it trains
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def build_all(jobs_dir: Path, epochs_lenet: int, epochs_unet: int, epochs_detectnet: int | None = None) -> dict:
    """Make (or reuse) the demo data, datasets and models; return their job ids."""
    from digits_core.datasets import create_dataset
    from digits_core.jobs import JobStore

    store = JobStore(jobs_dir)
    ids = {}

    print("1/4 handwritten digits (scikit-learn) -> demo-data/digits")
    count = export_sklearn_digits(DEMO / "digits")
    print(f"  {count} images in 10 class folders")

    print("2/4 synthetic Sunnybrook cardiac MRI -> demo-data/sunnybrook")
    sunny = DEMO / "sunnybrook"
    if not (sunny / ".done").exists():
        from digits_data_sunnybrook.synth import generate

        result = generate(sunny, cases=10, size=64, seed=0, slices=4)
        (sunny / ".done").write_text("ok")
        print(f"  {len(result.cases)} cases written in {result.seconds:.1f} s")
    else:
        print("  reusing existing files")
    from digits_data_sunnybrook.synth import CONTOURS_DIR, IMAGES_DIR

    print("3/4 datasets")
    job = _find(store, "dataset", DIGITS_DATASET)
    if job is None:
        job = create_dataset(
            "image-classification",
            {"folder": str(DEMO / "digits"), "image_type": "grayscale", "width": 28, "height": 28, "val_percent": 20},
            name=DIGITS_DATASET,
            workers=2,
            jobs_dir=jobs_dir,
            progress=_bar("digits"),
        )
        print()
    print(f"  {DIGITS_DATASET}: {job.id}")
    ids["digits"] = job.id
    job = _find(store, "dataset", SUNNYBROOK_DATASET)
    if job is None:
        job = create_dataset(
            "image-sunnybrook",
            {"image_folder": str(sunny / IMAGES_DIR), "contour_folder": str(sunny / CONTOURS_DIR), "pct_val": 20},
            name=SUNNYBROOK_DATASET,
            workers=2,
            jobs_dir=jobs_dir,
            progress=_bar("sunnybrook"),
        )
        print()
    print(f"  {SUNNYBROOK_DATASET}: {job.id}")
    ids["sunnybrook"] = job.id

    print("4/4 models")
    from digits_core.engine import train

    if _find(store, "model", LENET_MODEL) is None or _find(store, "model", UNET_MODEL) is None:
        _import_tensorflow_quietly()

    job = _find(store, "model", LENET_MODEL)
    if job is None:
        job = train(
            ids["digits"],
            "lenet",
            name=LENET_MODEL,
            jobs_dir=jobs_dir,
            epochs=epochs_lenet,
            batch_size=64,
            solver="momentum",
            learning_rate=0.01,
            lr_policy="step",
            seed=1,
            progress=_bar("lenet"),
        )
        print()
    acc = _last_metric(job, "val_accuracy")
    print(
        f"  {LENET_MODEL}: {job.id} ({job.status.value}"
        + (f", validation accuracy {acc * 100:.1f}%)" if acc is not None else ")")
    )
    ids["lenet"] = job.id
    job = _find(store, "model", UNET_MODEL)
    if job is None:
        # The U-Net's defaults (Adam 0.001, cross-entropy) at batch 8: on this set of 64 training slices, batch 8
        # reaches validation Dice 0.977-0.998 in 30 epochs (4 seeds) where batch 16 ends at 0.86-0.97.
        job = train(
            ids["sunnybrook"],
            "unet",
            name=UNET_MODEL,
            jobs_dir=jobs_dir,
            epochs=epochs_unet,
            batch_size=8,
            seed=1,
            progress=_bar("unet"),
        )
        print()
    dice = _last_metric(job, "val_dice")
    print(
        f"  {UNET_MODEL}: {job.id} ({job.status.value}"
        + (f", validation Dice {dice:.3f})" if dice is not None else ")")
    )
    ids["unet"] = job.id
    ids.update(build_detection(store, jobs_dir, epochs_detectnet))
    return ids


def build_detection(store, jobs_dir: Path, epochs: int | None) -> dict:
    """Object detection: synthetic digits on clutter (KITTI folders) -> dataset -> detectnet at its default options.

    The set is the quality report's (800 train / 200 val, 128x128): detectnet's defaults reach val mAP@0.5 ~0.86 on
    it in their 10 epochs, where a 320/80 64x64 set stays below 0.8 after 30 (``bench/quality.py --detection``).
    """
    from digits_core.datasets import create_dataset
    from digits_core.engine import train
    from digits_data_images import synth_detection

    print("detection: handwritten digits on cluttered backgrounds -> demo-data/detection")
    folder = DEMO / "detection"
    if not (folder / "classes.txt").exists():
        synth_detection.generate(str(folder), images=800, val_images=200, size=128, seed=0)
    job = _find(store, "dataset", DETECTION_DATASET)
    if job is None:
        job = create_dataset(
            "object-detection",
            {
                "train_image_folder": str(folder / "train" / "images"),
                "train_label_folder": str(folder / "train" / "labels"),
                "val_image_folder": str(folder / "val" / "images"),
                "val_label_folder": str(folder / "val" / "labels"),
                "custom_classes": synth_detection.CLASS_MAPPING,
                "width": 128,
                "height": 128,
            },
            name=DETECTION_DATASET,
            workers=2,
            jobs_dir=jobs_dir,
            progress=_bar("detection"),
        )
        print()
    dataset_id = job.id
    job = _find(store, "model", DETECTNET_MODEL)
    if job is None:
        _import_tensorflow_quietly()
        job = train(
            dataset_id,
            "detectnet",
            name=DETECTNET_MODEL,
            jobs_dir=jobs_dir,
            seed=1,
            **({} if epochs is None else {"epochs": epochs}),  # default: detectnet's own (10)
            progress=_bar("detectnet"),
        )
        print()
    map50 = _last_metric(job, "val_map50")
    print(
        f"  {DETECTNET_MODEL}: {job.id} ({job.status.value}"
        + (f", validation mAP@0.5 {map50:.3f})" if map50 is not None else ")")
    )
    return {"detection": dataset_id, "detectnet": job.id}


def parse_args(argv=None) -> argparse.Namespace:
    """Parse the demo's options (defaults read ``$DIGITS_JOBS_DIR`` and ``$DIGITS_DEMO_PORT`` now)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--jobs-dir",
        default=os.environ.get("DIGITS_JOBS_DIR") or str(DEMO / "jobs"),
        help="jobs folder (default: $DIGITS_JOBS_DIR, else demo-data/jobs)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address the web UI binds (default: 127.0.0.1)")
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("DIGITS_DEMO_PORT", 5000)),
        help="web UI port (default: $DIGITS_DEMO_PORT, else 5000)",
    )
    parser.add_argument("--epochs-lenet", type=int, default=10)
    parser.add_argument("--epochs-unet", type=int, default=30)
    parser.add_argument("--epochs-detectnet", type=int, default=None, help="default: detectnet's own (10)")
    parser.add_argument("--no-serve", action="store_true", help="stop after building and training")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    """Run the demo."""
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's start-up chatter out of the demo
    jobs_dir = Path(args.jobs_dir).resolve()
    jobs_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    from digits_core.errors import DigitsError

    try:
        ids = build_all(jobs_dir, args.epochs_lenet, args.epochs_unet, args.epochs_detectnet)
    except DigitsError as exc:
        print(f"\nerror: {exc}", file=sys.stderr)
        return 1
    print(f"Demo ready in {time.monotonic() - started:.0f} s. Jobs folder: {jobs_dir}")
    print(f"  Later:    digits --jobs-dir {jobs_dir} dataset list   (or serve)")
    host = "localhost" if args.host in ("127.0.0.1", "0.0.0.0") else args.host
    print(
        f"  Models:   http://{host}:{args.port}/models/{ids['lenet']}  and  /models/{ids['unet']}"
        f"  and  /models/{ids['detectnet']}"
    )
    if args.no_serve:
        return 0
    from digits_core.cli import main as digits_main

    return digits_main(
        [
            "--jobs-dir",
            str(jobs_dir),
            "serve",
            "--host",
            args.host,
            "--port",
            str(args.port),
            "--data-root",
            str(DEMO.resolve()),
            "--data-root",
            os.getcwd(),
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
