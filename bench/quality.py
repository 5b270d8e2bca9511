"""Benchmark: each task's quality at default options on small sets, beside its anchor.

In one run, on this machine, every figure trained through
:func:`digits_core.engine.train` with the network and options a new user gets
(only ``epochs`` and ``seed`` set), on real files written by
:mod:`digits_core.quality_sets` and the bundled generators:

* **classification**: scikit-learn's 1,797 handwritten 8×8 digit scans,
  ``lenet``, 30 epochs: val top-1 (anchor: DIGITS's LeNet on MNIST ≈ 99 %);
* **segmentation**: 48 train / 12 val 32×32 shape images, ``unet`` and
  ``fcn``, 40 epochs: val Dice (anchor: the issue 24 goal 0.85; a model
  predicting every pixel as foreground scores ~0.25);
* **segmentation (Sunnybrook)**: the synthetic Sunnybrook set at 64×64
  (``digits_data_sunnybrook.synth``), ``unet``, its default 30 epochs: val Dice
  (anchor: Tran 2016's FCN, Dice 0.92 on the real Sunnybrook LV set);
* **regression**: the digit scans with two targets (value / 9, mean ink),
  ``regression``, 15 epochs: val MAE beside the mean predictor's (goal < 0.05);
* **image-to-image**: 400 noisy → clean 16×16 digit pairs (noise std 0.1),
  ``image2image``, 10 epochs: val PSNR beside the identity's (goal: + 3 dB);
* **siamese**: 1,000 / 200 pairs of 600 digit scans (``image-pairs``), the
  Siamese example network, 10 epochs: val pair accuracy beside a constant
  answer's;
* **numpy-arrays**: the 1,797 digit scans as float32 arrays of their raw 0–16
  values (``numpy-arrays``, 25 % held out), LeNet at its defaults: val top-1;
* **volumes**: the synthetic Decathlon heart task (``digits_data_volumes.synth``,
  20 cases of 16×32×32, 4 held out), ``unet3d`` and ``unet2.5d`` at every
  default: per-case val Dice and HD95 (anchor: nnU-Net's 0.93 on Task02);
* **detection**: ``--detection`` adds the synthetic digits-on-clutter set
  (``digits_data_images.synth_detection``, 800 / 200 at 128×128 by
  default), ``detectnet`` at its default options and epochs: val mAP@0.5
  (anchor: the issue 24 goal 0.85 within 10 epochs); about 3 minutes on 2 cores.

Usage::

    .venv/bin/python bench/quality.py                       # every task but detection (~10 min on 2 busy cores)
    .venv/bin/python bench/quality.py --only segmentation   # one task
    .venv/bin/python bench/quality.py --detection --det-train 320 --det-val 80 --det-size 64
    .venv/bin/python bench/quality.py --only regression --detection                # the README's detection row
    .venv/bin/python bench/quality.py --only regression --detection --det-epochs 24  # detectnet with epochs=24
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "networks"


def _values(job, name: str) -> list[float]:
    from digits_core.engine import read_metrics

    return [p["value"] for p in read_metrics(job) if p["name"] == name]


def _row(task: str, network: str, figure: str, anchor: str, seconds: float) -> dict:
    return {"task": task, "network": network, "figure": figure, "anchor": anchor, "seconds": seconds}


def classification(work: Path, jobs: Path) -> list[dict]:
    from PIL import Image
    from sklearn.datasets import load_digits

    from digits_core.datasets import create_dataset
    from digits_core.engine import train

    digits = load_digits()
    root = work / "digits-classes"
    for i, (image, label) in enumerate(zip(digits.images, digits.target)):
        (root / str(label)).mkdir(parents=True, exist_ok=True)
        Image.fromarray((image * 255 / 16).astype(np.uint8)).save(root / str(label) / f"{i:04d}.png")
    ds = create_dataset(
        "image-classification",
        {"folder": str(root), "image_type": "grayscale", "width": 8, "height": 8},
        workers=1,
        jobs_dir=jobs,
    )
    start = time.perf_counter()
    job = train(ds.id, None, jobs_dir=jobs, seed=0)
    accuracy = _values(job, "val_accuracy")[-1]
    return [
        _row(
            "classification (sklearn digits 8×8)",
            "lenet",
            f"val top-1 {accuracy:.1%}",
            "DIGITS LeNet / MNIST ≈ 99 %",
            time.perf_counter() - start,
        )
    ]


def segmentation(work: Path, jobs: Path) -> list[dict]:
    from digits_core.datasets import create_dataset
    from digits_core.engine import train
    from digits_core.quality_sets import write_shapes_segmentation

    ds = create_dataset(
        "image-segmentation", write_shapes_segmentation(work / "shapes", seed=0), workers=1, jobs_dir=jobs
    )
    rows = []
    for network in ("unet", "fcn"):
        start = time.perf_counter()
        job = train(ds.id, network, jobs_dir=jobs, epochs=40, seed=0)
        dice = _values(job, "val_dice")
        rows.append(
            _row(
                "segmentation (48 shapes 32×32, 40 epochs)",
                network,
                f"val Dice {dice[-1]:.3f} (epoch 15: {dice[14]:.3f})",
                "goal ≥ 0.85",
                time.perf_counter() - start,
            )
        )
    return rows


def sunnybrook(work: Path, jobs: Path) -> list[dict]:
    from digits_core.datasets import create_dataset
    from digits_core.engine import train
    from digits_data_sunnybrook.synth import generate

    synth = generate(work / "sunnybrook", cases=10, size=64, seed=0, slices=8)
    ds = create_dataset(
        "image-sunnybrook",
        {"image_folder": str(synth.image_folder), "contour_folder": str(synth.contour_folder), "pct_val": 20},
        workers=1,
        jobs_dir=jobs,
    )
    start = time.perf_counter()
    job = train(ds.id, None, jobs_dir=jobs, seed=0)  # every default, the 30 epochs included
    dice = _values(job, "val_dice")
    return [
        _row(
            f"segmentation (synthetic Sunnybrook 64×64, {len(dice)} epochs)",
            "unet",
            f"val Dice {dice[-1]:.3f} (epoch 15: {dice[14]:.3f})",
            "Tran 2016 FCN: Dice 0.92 (real set)",
            time.perf_counter() - start,
        )
    ]


def regression(work: Path, jobs: Path) -> list[dict]:
    from digits_core.datasets import create_dataset, open_dataset
    from digits_core.engine import train
    from digits_core.quality_sets import write_digit_regression

    ds = create_dataset(
        "image-regression", write_digit_regression(work / "digits-targets", seed=0), workers=1, jobs_dir=jobs
    )
    reader = open_dataset(ds.id, jobs_dir=jobs)
    (_, train_y), (_, val_y) = reader.read_all("train"), reader.read_all("val")
    mean_mae = float(np.abs(val_y - train_y.mean(axis=0)).mean())
    start = time.perf_counter()
    job = train(ds.id, None, jobs_dir=jobs, epochs=15, seed=0)
    mae = _values(job, "val_mae")[-1]
    return [
        _row(
            "regression (digits: value/9, ink; 15 epochs)",
            "regression",
            f"val MAE {mae:.4f} (mean predictor {mean_mae:.4f})",
            "goal < 0.05",
            time.perf_counter() - start,
        )
    ]


def image_to_image(work: Path, jobs: Path) -> list[dict]:
    from digits_core.datasets import create_dataset, open_dataset
    from digits_core.engine import train
    from digits_core.quality_sets import write_denoising_pairs

    ds = create_dataset("image-processing", write_denoising_pairs(work / "pairs", seed=0), workers=1, jobs_dir=jobs)
    noisy, clean = open_dataset(ds.id, jobs_dir=jobs).read_all("val")
    identity = 10 * np.log10(1 / float(np.mean((noisy.astype(np.float32) / 255 - clean.reshape(noisy.shape)) ** 2)))
    start = time.perf_counter()
    job = train(ds.id, None, jobs_dir=jobs, epochs=10, seed=0)
    psnr = 10 * np.log10(1 / _values(job, "val_mse")[-1])
    return [
        _row(
            "image-to-image (denoising 400 digit pairs 16×16, noise 0.1; 10 epochs)",
            "image2image",
            f"val PSNR {psnr:.1f} dB (identity {identity:.1f} dB)",
            "goal ≥ identity + 3 dB",
            time.perf_counter() - start,
        )
    ]


def siamese(work: Path, jobs: Path) -> list[dict]:
    from PIL import Image
    from sklearn.datasets import load_digits

    from digits_core.datasets import create_dataset, open_dataset
    from digits_core.engine import train

    digits = load_digits()
    for i, (image, label) in enumerate(zip(digits.images[:600], digits.target[:600])):
        (work / "classes" / str(label)).mkdir(parents=True, exist_ok=True)
        Image.fromarray((image * 255 / 16).astype(np.uint8)).save(work / "classes" / str(label) / f"{i:04d}.png")
    ds = create_dataset(
        "image-pairs",
        {"folder": str(work / "classes"), "train_pairs": 1000, "val_pairs": 200, "width": 8, "height": 8},
        workers=1,
        jobs_dir=jobs,
    )
    _, same = open_dataset(ds.id, jobs_dir=jobs).read_all("val")
    constant = max(float(np.mean(same)), 1 - float(np.mean(same)))
    start = time.perf_counter()
    job = train(ds.id, str(EXAMPLES / "siamese.py"), jobs_dir=jobs, epochs=10, seed=0)
    accuracy = _values(job, "val_accuracy")
    return [
        _row(
            "siamese (1,000 / 200 digit pairs 8×8, 10 epochs)",
            "examples/networks/siamese.py",
            f"val pair accuracy {accuracy[-1]:.3f} (constant answer {constant:.3f})",
            "chance 0.5",
            time.perf_counter() - start,
        )
    ]


def numpy_arrays(work: Path, jobs: Path) -> list[dict]:
    from sklearn.datasets import load_digits

    from digits_core.engine import train
    from digits_data_images.numpy_arrays import create_dataset_from_arrays

    digits = load_digits()
    ds = create_dataset_from_arrays(
        digits.images.astype(np.float32)[..., None],  # the raw 0-16 values, not pixels
        digits.target,
        folder=work / "arrays",
        jobs_dir=jobs,
        workers=1,
        options={"val_percent": 25},
    )
    start = time.perf_counter()
    job = train(ds.id, None, jobs_dir=jobs, seed=0)
    accuracy = _values(job, "val_accuracy")
    return [
        _row(
            "numpy-arrays (digit scans as float32 0–16 values, 8×8)",
            "lenet",
            f"val top-1 {accuracy[-1]:.1%}",
            "the same scans as PNGs: the classification row",
            time.perf_counter() - start,
        )
    ]


def volumes(work: Path, jobs: Path) -> list[dict]:
    from digits_core.datasets import create_dataset
    from digits_core.engine import train
    from digits_data_volumes.synth import generate

    synth = generate(work / "volumes", cases=20, seed=0)
    ds = create_dataset("msd-volumes", {"data_folder": str(synth.task)}, workers=1, jobs_dir=jobs)
    rows = []
    for network in ("unet3d", "unet2.5d"):
        start = time.perf_counter()
        job = train(ds.id, network, jobs_dir=jobs, seed=0)  # every default (40 epochs x 25 steps)
        dice, hd95 = _values(job, "val_dice"), _values(job, "val_hd95")
        rows.append(
            _row(
                "3-D segmentation (synthetic Decathlon heart, 16 / 4 cases of 16×32×32)",
                network,
                f"per-case val Dice {dice[-1]:.3f}, HD95 {hd95[-1]:.2f} mm",
                "Decathlon Task02 heart: nnU-Net 0.93 (real set)",
                time.perf_counter() - start,
            )
        )
    return rows


def detection(work: Path, jobs: Path, images: int, val_images: int, size: int, epochs: int | None = None) -> list[dict]:
    from digits_core.datasets import create_dataset
    from digits_core.engine import train
    from digits_data_images import synth_detection

    synth_detection.generate(str(work / "synth"), images=images, val_images=val_images, size=size, seed=3)
    s = work / "synth"
    ds = create_dataset(
        "object-detection",
        {
            "train_image_folder": str(s / "train" / "images"),
            "train_label_folder": str(s / "train" / "labels"),
            "val_image_folder": str(s / "val" / "images"),
            "val_label_folder": str(s / "val" / "labels"),
            "custom_classes": synth_detection.CLASS_MAPPING,
            "width": size,
            "height": size,
        },
        workers=1,
        jobs_dir=jobs,
    )
    start = time.perf_counter()
    job = train(ds.id, None, jobs_dir=jobs, seed=1, **({} if epochs is None else {"epochs": epochs}))
    maps, recall = _values(job, "val_map50"), _values(job, "val_recall50")
    at10 = f", epoch 10: {maps[9]:.3f}" if len(maps) > 10 else ""
    early = f"; val recall@0.3 at epoch 2: {recall[1]:.3f}" if len(recall) >= 2 else ""
    return [
        _row(
            f"detection (digits on clutter {images}/{val_images} {size}×{size}, {len(maps)} epochs)",
            "detectnet",
            f"val mAP@0.5 {maps[-1]:.3f}{at10}{early}",
            "goal ≥ 0.85 within 10 epochs",
            time.perf_counter() - start,
        )
    ]


TASKS = {
    "classification": classification,
    "segmentation": segmentation,
    "sunnybrook": sunnybrook,
    "regression": regression,
    "image-to-image": image_to_image,
    "siamese": siamese,
    "numpy-arrays": numpy_arrays,
    "volumes": volumes,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(TASKS), action="append", help="run only this task (repeatable)")
    parser.add_argument("--detection", action="store_true", help="add the detection figure (~3 min on 2 cores)")
    parser.add_argument("--det-train", type=int, default=800, help="detection training images (default 800)")
    parser.add_argument("--det-val", type=int, default=200, help="detection validation images (default 200)")
    parser.add_argument("--det-size", type=int, default=128, help="detection image size (default 128)")
    parser.add_argument("--det-epochs", type=int, help="detection epochs (default: detectnet's, 10)")
    args = parser.parse_args()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="digits-quality-") as tmp:
        work = Path(tmp)
        for name in args.only or list(TASKS):
            rows += TASKS[name](work / name, work / "jobs")
        if args.detection:
            rows += detection(
                work / "detection", work / "jobs", args.det_train, args.det_val, args.det_size, args.det_epochs
            )
    print("| task | network | figure at default options | anchor | train s |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['task']} | `{row['network']}` | {row['figure']} | {row['anchor']} | {row['seconds']:.0f} |")


if __name__ == "__main__":
    main()
