"""Every export format × every task × every resize mode, each export's parity report against ``digits infer``.

``tests/test_export_formats.py`` exports one resize mode per task in CI (the preparation graph itself is
compared with ``resize_image`` for every mode in ``tests/test_export_preprocessing.py``); this script runs
the whole matrix the deploy issue names, from image folders of odd-sized pictures it writes:

- tasks: classification (``lenet``), segmentation (``unet``), regression (the default network),
  image-to-image (the default network), detection (``detectnet``);
- resize modes: ``squash``, ``crop``, ``fill``, ``half_crop`` (one dataset per task and mode; detection
  keeps its own source-size rule, so its four datasets are built at a smaller target size);
- formats: ``savedmodel``, ``onnx``, ``tflite``, ``keras``.

Each model trains one short run (the parity report compares an export with the same model's
``digits infer``, so it does not need a good model). Every export runs in a subprocess that imports
only its runtime, on the validation images stretched to an odd size, and its ``parity.json`` is read
back. It prints one row per cell (top-1 agreement / mask IoU / boxes matched / max |Δ|) and the count of
passed cells; the baseline each cell is measured against is ``digits infer`` on the same images, same run.

Usage (about 20 minutes on 2 CPU cores)::

    .venv/bin/python bench/export_matrix.py [--tasks classification,segmentation] [--modes squash,fill]
        [--formats onnx,tflite] [--sample 8] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

MODES = ("squash", "crop", "fill", "half_crop")
FORMATS = ("savedmodel", "onnx", "tflite", "keras")
TASKS = ("classification", "segmentation", "regression", "image-to-image", "detection")


def _odd_size(rng) -> tuple[int, int]:
    return int(rng.integers(17, 41)), int(rng.integers(17, 41))


def write_class_folders(root: Path, rng) -> None:
    """Three colour classes of odd-sized RGB pictures."""
    for c, colour in enumerate([(220, 40, 40), (40, 220, 40), (40, 40, 220)]):
        (root / f"c{c}").mkdir(parents=True)
        for i in range(12):
            h, w = _odd_size(rng)
            img = rng.normal(60, 20, (h, w, 3))
            img[h // 4 : 3 * h // 4, w // 4 : 3 * w // 4] = colour
            Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(root / f"c{c}" / f"{i}.png")


def write_segmentation(root: Path, rng) -> None:
    """Gray pictures with a bright rectangle and their 0/1 masks (same names)."""
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir(parents=True)
    for i in range(16):
        h, w = _odd_size(rng)
        mask = np.zeros((h, w), np.uint8)
        y, x = int(rng.integers(0, h // 2)), int(rng.integers(0, w // 2))
        mask[y : y + h // 2, x : x + w // 2] = 1
        img = np.clip(rng.normal(50, 15, (h, w)) + 150 * mask, 0, 255).astype(np.uint8)
        Image.fromarray(img).save(root / "images" / f"{i:02d}.png")
        Image.fromarray(mask).save(root / "labels" / f"{i:02d}.png")


def write_regression(root: Path, rng) -> None:
    """Gray pictures whose two targets are their mean brightness and the bright part's width fraction."""
    (root / "images").mkdir(parents=True)
    rows = ["path,brightness,width"]
    for i in range(24):
        h, w = _odd_size(rng)
        cut = int(rng.integers(2, w - 2))
        img = np.full((h, w), 30, np.uint8)
        img[:, :cut] = 220
        Image.fromarray(img).save(root / "images" / f"{i:02d}.png")
        rows.append(f"{i:02d}.png,{img.mean() / 255:.4f},{cut / w:.4f}")
    (root / "targets.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")


def write_pairs(root: Path, rng) -> None:
    """Noisy/clean RGB picture pairs of odd sizes."""
    for folder in ("noisy", "clean"):
        (root / folder).mkdir(parents=True)
    for i in range(12):
        h, w = _odd_size(rng)
        clean = np.zeros((h, w, 3), np.uint8)
        clean[h // 4 : 3 * h // 4, w // 4 : 3 * w // 4] = (200, 120, 40)
        noisy = np.clip(clean + rng.normal(0, 25, clean.shape), 0, 255).astype(np.uint8)
        Image.fromarray(noisy).save(root / "noisy" / f"{i:02d}.png")
        Image.fromarray(clean).save(root / "clean" / f"{i:02d}.png")


def build_and_train(task: str, mode: str, data: Path, jobs: Path):
    """The dataset of ``task`` resized with ``mode`` and a one-epoch model on it; returns the model job."""
    from digits_core.datasets import create_dataset
    from digits_core.engine import train

    common = {"resize_mode": mode}
    if task == "classification":
        ds = create_dataset(
            "image-classification",
            {"folder": str(data / "classes"), "width": 16, "height": 16, "val_percent": 25, **common},
            workers=1,
            jobs_dir=jobs,
        )
        return train(ds.id, "lenet", name=f"lenet-{mode}", epochs=1, batch_size=8, jobs_dir=jobs, seed=0)
    if task == "segmentation":
        ds = create_dataset(
            "image-segmentation",
            {
                "image_folder": str(data / "seg" / "images"),
                "label_folder": str(data / "seg" / "labels"),
                "width": 32,
                "height": 32,
                "image_type": "grayscale",
                "val_percent": 25,
                **common,
            },
            workers=1,
            jobs_dir=jobs,
        )
        return train(ds.id, "unet", name=f"unet-{mode}", epochs=1, batch_size=4, jobs_dir=jobs, seed=0)
    if task == "regression":
        ds = create_dataset(
            "image-regression",
            {
                "image_folder": str(data / "reg" / "images"),
                "targets_file": str(data / "reg" / "targets.csv"),
                "width": 16,
                "height": 16,
                "image_type": "grayscale",
                "val_percent": 25,
                **common,
            },
            workers=1,
            jobs_dir=jobs,
        )
        return train(ds.id, None, name=f"reg-{mode}", epochs=1, batch_size=8, jobs_dir=jobs, seed=0)
    if task == "image-to-image":
        ds = create_dataset(
            "image-processing",
            {
                "feature_folder": str(data / "pairs" / "noisy"),
                "label_folder": str(data / "pairs" / "clean"),
                "width": 16,
                "height": 16,
                "val_percent": 50,
                **common,
            },
            workers=1,
            jobs_dir=jobs,
        )
        return train(ds.id, None, name=f"i2i-{mode}", epochs=1, batch_size=4, jobs_dir=jobs, loss="mae", seed=0)
    from digits_data_images import synth_detection

    s = data / "synth"
    ds = create_dataset(
        "object-detection",
        {
            "train_image_folder": str(s / "train" / "images"),
            "train_label_folder": str(s / "train" / "labels"),
            "val_image_folder": str(s / "val" / "images"),
            "val_label_folder": str(s / "val" / "labels"),
            "custom_classes": synth_detection.CLASS_MAPPING,
            "width": 48,
            "height": 32,
            **common,
        },
        workers=1,
        jobs_dir=jobs,
    )
    return train(ds.id, None, name=f"det-{mode}", epochs=1, batch_size=8, jobs_dir=jobs, seed=0)


def export_cell(model, fmt: str, out: Path, jobs: Path, sample: int) -> dict:
    """Export ``model`` as ``fmt`` (the parity report kept even when it fails) and read its report back."""
    from digits_core.errors import DigitsError
    from digits_core.inference import export_model

    started = time.perf_counter()
    try:
        archive = export_model(
            model.id,
            out / f"{model.id}-{fmt}.tar.gz",
            format=fmt,
            parity_sample=sample,
            allow_mismatch=True,
            jobs_dir=jobs,
        )
    except DigitsError as exc:
        return {"passed": False, "error": str(exc), "seconds": time.perf_counter() - started}
    with tarfile.open(archive) as tar:
        member = next((m for m in tar.getmembers() if m.name.endswith("/parity.json")), None)
        report = json.load(tar.extractfile(member)) if member else {"passed": None, "skipped": "no report"}
    report["seconds"] = time.perf_counter() - started
    return report


def _figure(report: dict) -> str:
    if "error" in report:
        return "error: " + report["error"][:80]
    if report.get("passed") is None:
        return report.get("skipped", "not checked")
    parts = []
    for key, label in (("top1_agreement", "top-1"), ("mask_iou", "mask IoU"), ("boxes_matched", "boxes")):
        if key in report:
            parts.append(f"{label} {report[key]:.3f}")
    if "max_abs_diff" in report:
        parts.append(f"max|Δ| {report['max_abs_diff']:.1e}")
    return ", ".join(parts) + f", {report.get('inputs', '?')} inputs"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--sample", type=int, default=8, help="validation images per parity report (default 8)")
    parser.add_argument("--json", action="store_true", help="print every report as JSON too")
    args = parser.parse_args(argv)
    import digits_core

    digits_core.quiet_tensorflow()
    from digits_data_images import synth_detection

    work = Path(tempfile.mkdtemp(prefix="digits-export-matrix-"))
    rng = np.random.default_rng(0)
    write_class_folders(work / "data" / "classes", rng)
    write_segmentation(work / "data" / "seg", rng)
    write_regression(work / "data" / "reg", rng)
    write_pairs(work / "data" / "pairs", rng)
    synth_detection.generate(str(work / "data" / "synth"), images=24, val_images=8, size=48, seed=3)
    jobs, out = work / "jobs", work / "out"
    out.mkdir()
    rows, started = [], time.perf_counter()
    for task in args.tasks.split(","):
        for mode in args.modes.split(","):
            model = build_and_train(task, mode, work / "data", jobs)
            for fmt in args.formats.split(","):
                report = export_cell(model, fmt, out, jobs, args.sample)
                # keras exports the bare network: its report compares the network's raw outputs
                passed = report.get("passed")
                rows.append({"task": task, "mode": mode, "format": fmt, "passed": passed, "report": report})
                print(
                    f"{task:15s} {mode:10s} {fmt:11s} {'PASS' if passed else 'FAIL' if passed is False else '----'}"
                    f"  {_figure(report)}",
                    flush=True,
                )
    passed = sum(1 for r in rows if r["passed"])
    print(
        f"\n{passed} of {len(rows)} exports passed their parity report against digits infer "
        f"(same images, same run); {time.perf_counter() - started:.0f} s"
    )
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
