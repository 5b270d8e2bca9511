"""A synthetic-but-real object-detection set: handwritten digit scans placed on cluttered backgrounds.

``python -m digits_data_images.synth_detection OUT --images N --size 128 --seed S``
writes::

    OUT/train/images/000000.png   OUT/train/labels/000000.txt   (KITTI, 15 columns)
    OUT/val/images/...            OUT/val/labels/...
    OUT/annotations/train.json    OUT/annotations/val.json      (COCO; file_name relative to images/)
    OUT/classes.txt               dontcare,zero,one,...,nine     (the custom class mapping)

Each image holds 1–6 of scikit-learn's bundled handwritten digit scans
(``sklearn.datasets.load_digits``: 1,797 real 8×8 scans), each scaled to
12–40 px, inked in a random colour over a background of gradients, blobs
and lines. Digits never overlap by more than a sliver (IoU ≤ 0.1). The
train and val images draw on disjoint halves of the scans, so validation
measures generalisation to unseen handwriting. Boxes are the tight bounds
of the scaled ink. The same seed gives the same files.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

#: KITTI type names of the ten digits (class ids 1..10 with ``dontcare`` at 0).
DIGIT_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
#: The custom class mapping for the data plugin's ``custom_classes`` field.
CLASS_MAPPING = ",".join(("dontcare",) + DIGIT_NAMES)


def _load_scans() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    return (digits.images / 16.0).astype(np.float32), digits.target.astype(np.int64)


def _background(rng: np.random.Generator, size: int) -> np.ndarray:
    """A cluttered RGB background in [0, 1]: a colour gradient, soft blobs, straight strokes and noise."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    c0, c1 = rng.uniform(0.0, 1.0, 3), rng.uniform(0.0, 1.0, 3)
    angle = rng.uniform(0, 2 * np.pi)
    t = (np.cos(angle) * xx + np.sin(angle) * yy + 1.5) / 3.0
    img = c0[None, None, :] * (1 - t[..., None]) + c1[None, None, :] * t[..., None]
    for _ in range(rng.integers(2, 6)):  # soft blobs
        cy, cx = rng.uniform(0, 1, 2)
        r = rng.uniform(0.05, 0.3)
        blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r * r))[..., None]
        img = img * (1 - 0.6 * blob) + 0.6 * blob * rng.uniform(0, 1, 3)
    for _ in range(rng.integers(2, 7)):  # straight strokes, the clutter a detector must not fire on
        x0, y0, x1, y1 = rng.uniform(0, 1, 4)
        width = rng.uniform(0.004, 0.015)
        dx, dy = x1 - x0, y1 - y0
        length = max(np.hypot(dx, dy), 1e-6)
        s = np.clip(((xx - x0) * dx + (yy - y0) * dy) / (length * length), 0, 1)
        dist = np.hypot(xx - (x0 + s * dx), yy - (y0 + s * dy))
        line = (dist < width)[..., None]
        img = np.where(line, rng.uniform(0, 1, 3)[None, None, :], img)
    img += rng.normal(0, 0.03, img.shape)
    return np.clip(img, 0, 1).astype(np.float32)


def _scaled_scan(scan: np.ndarray, px: int) -> np.ndarray:
    """An 8×8 scan resized to ``px × px`` (bicubic), values in [0, 1]."""
    from PIL import Image

    image = Image.fromarray((scan * 255).astype(np.uint8), mode="L").resize((px, px), Image.BICUBIC)
    return np.asarray(image, np.float32) / 255.0


def _iou(a, b) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def make_image(
    rng: np.random.Generator,
    scans: np.ndarray,
    targets: np.ndarray,
    size: int,
    min_px: int = 12,
    max_px: int = 40,
    max_objects: int = 6,
) -> tuple[np.ndarray, list]:
    """Compose one image; returns ``(H×W×3 uint8, [(digit, x1, y1, x2, y2), ...])`` (pixel edges, x2/y2 exclusive)."""
    img = _background(rng, size)
    boxes: list = []
    wanted = int(rng.integers(1, max_objects + 1))
    tries = 0
    max_px = min(max_px, size)
    while len(boxes) < wanted and tries < 50 * wanted:
        tries += 1
        px = int(rng.integers(min_px, max_px + 1))
        y0, x0 = (int(v) for v in rng.integers(0, size - px + 1, 2))
        index = int(rng.integers(len(scans)))
        alpha = _scaled_scan(scans[index], px)
        ink = alpha > 0.25
        if not ink.any():
            continue
        rows, cols = np.nonzero(ink)
        box = (x0 + cols.min(), y0 + rows.min(), x0 + cols.max() + 1, y0 + rows.max() + 1)
        if any(_iou(box, (b[1], b[2], b[3], b[4])) > 0.1 for b in boxes):
            continue
        colour = rng.uniform(0, 1, 3)
        region = img[y0 : y0 + px, x0 : x0 + px]
        # ink must stand out from what lies under it: push it away from the local mean colour
        under = region.reshape(-1, 3).mean(axis=0)
        if np.abs(colour - under).max() < 0.45:
            colour = np.where(under > 0.5, rng.uniform(0.0, 0.2, 3), rng.uniform(0.8, 1.0, 3))
        a = np.clip(alpha * 1.4, 0, 1)[..., None]
        img[y0 : y0 + px, x0 : x0 + px] = region * (1 - a) + colour[None, None, :] * a
        boxes.append((int(targets[index]), *(float(v) for v in box)))
    return (img * 255 + 0.5).astype(np.uint8), boxes


def kitti_line(name: str, box) -> str:
    """One 15-column KITTI label line (only type and bbox are meaningful here)."""
    x1, y1, x2, y2 = box
    return f"{name} 0.00 0 0.00 {x1:.2f} {y1:.2f} {x2:.2f} {y2:.2f} 0.00 0.00 0.00 0.00 0.00 0.00 0.00"


def write_split(
    out: str, stage: str, count: int, rng: np.random.Generator, scans, targets, size: int, progress=None
) -> dict:
    """Write ``count`` images of one stage in KITTI folders; return its COCO annotation dict."""
    from PIL import Image

    img_dir = os.path.join(out, stage, "images")
    lbl_dir = os.path.join(out, stage, "labels")
    os.makedirs(img_dir, exist_ok=True)
    os.makedirs(lbl_dir, exist_ok=True)
    coco = {
        "images": [],
        "annotations": [],
        "categories": [{"id": i + 1, "name": n} for i, n in enumerate(DIGIT_NAMES)],
    }
    for i in range(count):
        image, boxes = make_image(rng, scans, targets, size)
        ident = f"{i:06d}"
        Image.fromarray(image).save(os.path.join(img_dir, ident + ".png"), compress_level=1)
        with open(os.path.join(lbl_dir, ident + ".txt"), "w", encoding="utf-8") as handle:
            handle.write("".join(kitti_line(DIGIT_NAMES[b[0]], b[1:]) + "\n" for b in boxes))
        coco["images"].append({"id": i + 1, "file_name": ident + ".png", "width": size, "height": size})
        for d, x1, y1, x2, y2 in boxes:
            coco["annotations"].append(
                {
                    "id": len(coco["annotations"]) + 1,
                    "image_id": i + 1,
                    "category_id": d + 1,
                    "bbox": [x1, y1, x2 - x1, y2 - y1],
                    "area": (x2 - x1) * (y2 - y1),
                    "iscrowd": 0,
                }
            )
        if progress:
            progress(stage, i + 1, count)
    return coco


def generate(
    out: str, images: int, val_images: int | None = None, size: int = 128, seed: int = 0, progress=None
) -> dict:
    """Write the synthetic detection set under ``out``; return ``{stage: image count}``.

    Args:
        out: Output folder (created; existing files of the same names are replaced).
        images: Training images.
        val_images: Validation images (default: a fifth of ``images``, at least 1).
        size: Width and height of the square images in pixels (at least 40).
        seed: Random seed (same seed, same files).
        progress: Optional ``(stage, done, total)`` callback.
    """
    if size < 40:
        raise ValueError(f"--size must be at least 40 pixels (the largest digit), not {size}")
    if images < 1:
        raise ValueError(f"--images must be at least 1, not {images}")
    val_images = max(1, images // 5) if val_images is None else int(val_images)
    scans, targets = _load_scans()
    order = np.random.default_rng([seed, 1]).permutation(len(scans))
    half = len(order) // 2
    parts = {"train": order[:half], "val": order[half:]}
    os.makedirs(os.path.join(out, "annotations"), exist_ok=True)
    counts = {}
    for stage, count in (("train", images), ("val", val_images)):
        if count <= 0:
            continue
        rng = np.random.default_rng([seed, 2 if stage == "train" else 3])
        idx = parts[stage]
        coco = write_split(out, stage, count, rng, scans[idx], targets[idx], size, progress)
        with open(os.path.join(out, "annotations", f"{stage}.json"), "w", encoding="utf-8") as handle:
            json.dump(coco, handle)
        counts[stage] = count
    with open(os.path.join(out, "classes.txt"), "w", encoding="utf-8") as handle:
        handle.write(CLASS_MAPPING + "\n")
    return counts


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m digits_data_images.synth_detection",
        description="Write a synthetic detection set of handwritten digits (KITTI folders + COCO JSON).",
    )
    parser.add_argument("out", help="output folder")
    parser.add_argument("--images", type=int, default=200, help="training images (default 200)")
    parser.add_argument("--val-images", type=int, default=None, help="validation images (default images/5)")
    parser.add_argument("--size", type=int, default=128, help="image width and height in pixels (default 128)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    args = parser.parse_args(argv)
    try:
        counts = generate(args.out, args.images, args.val_images, args.size, args.seed)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {', '.join(f'{n} {s}' for s, n in counts.items())} images to {args.out} (classes: {CLASS_MAPPING})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
