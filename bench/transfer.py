"""Benchmark: what a pretrained backbone buys on a small target set, all figures from one run.

In one run, on this machine, everything through :func:`digits_core.engine.train` and the model zoo:

1. **classification transfer**: ``mobilenet_v3_small`` trained from scratch on a *source* set of generated
   pattern images (classes 0-5, with random period, contrast and noise: a large set of one domain varies;
   a source of fixed patterns taught features that transferred no better than LeNet's), its encoder published with
   :func:`digits_core.engine.zoo.add_from_model` (``digits zoo add --from-model``), then fine-tuned with
   ``weights zoo:bench-source`` on a *target* set of *other* classes (6-9) with ``--per-class`` training
   images each; beside it the same network from scratch (``weights none``) and ``lenet``, same epochs.
   Printed per epoch: val top-1 of each; then the points gained and the epochs the pretrained network
   needed to reach the from-scratch run's final accuracy (the issue 41 goals: +15 points, a third of the
   epochs);
2. **segmentation transfer**: the ``mobilenet_v3_small`` U-Net trained from scratch on ``--seg-source``
   generated ``--seg-size`` images of 3-5 textured regions (six textures, each its own class: stripes, waves,
   zigzag, rings, blotches, grain at random periods and orientations; every texture the same two grey
   levels in the same proportions, so no region stands out by intensity), its encoder published to the zoo,
   then fine-tuned on ``--seg-train`` (16) images where the mask is the region of a texture the source never
   showed (a checkerboard) among source ones, on ``--seg-sets`` (3) such sets (which 16 images a user has
   moves the Dice by a quarter); against the same U-Net from scratch and the built-in ``unet`` (the
   from-scratch U-Net a user has today), same epochs: val Dice, mean over sets and seeds (goal: +0.1). Where the region is
   told by texture, not by intensity, what the encoder learned on a large set of the domain is what counts
   (on a target that thresholding solved, the same U-Net from scratch was within 0.01 of the pretrained one);
3. **throughput**: CPU training img/s of every backbone at ``--size-speed`` (64×64) through ``digits
   train`` beside Keras ``fit`` of the same network on the same arrays (same batch, same run).

No download: the zoo, the jobs and Keras's cache live in a temporary folder. Accuracy and Dice do not
depend on the machine's load (the same seeds, the same steps), so parts 1 and 2 may run beside other work;
the img/s table does. The load guard (``bench/_quiet.py``) watches the whole run: when other processes used
the machine, the closing summary marks each img/s figure "loaded", and ``--strict`` refuses to print the
table (exit 3). ``--json PATH`` writes the same figures with the guard's verdict.

Usage::

    .venv/bin/python bench/transfer.py --strict --json /tmp/transfer.json   # every part (long on 2 cores)
    .venv/bin/python bench/transfer.py --only classification --source 4000 --epochs 10
    .venv/bin/python bench/transfer.py --quick                  # a smoke run (tiny sets, 1-2 epochs)
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from _quiet import LoadGuard, add_guard_args
from wtforms import Form, IntegerField

from digits_core.interfaces import DataIngestion

BACKBONES = ("mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_v2_b0", "resnet50_v2", "convnext_tiny")


def pattern(kind: int, size: int, rng, vary: bool = False) -> np.ndarray:
    """One of 10 pattern kinds (stripes, rings, crosses...) at a random place and scale, on noise; 0-255.

    ``vary``: also a random period (2-5 px), contrast and noise level, as a large source set of one domain
    varies (the target sets keep the fixed ones).
    """
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    cy, cx = rng.uniform(0.3, 0.7, size=2) * size
    r = rng.uniform(0.15, 0.3) * size
    p, q = (int(rng.integers(2, 6)), int(rng.integers(3, 7))) if vary else (3, 4)
    contrast, noise = (rng.uniform(90, 200), rng.uniform(10, 40)) if vary else (150, 25)
    dy, dx, d = yy - cy, xx - cx, np.hypot(yy - cy, xx - cx)
    inside = d < r
    shapes = [
        inside & (((xx // p) % 2) == 0),  # vertical stripes
        inside & (((yy // p) % 2) == 0),  # horizontal stripes
        (d < r) & (d > 0.6 * r),  # ring
        (np.abs(dx) < r * 0.25) | (np.abs(dy) < r * 0.25) & inside,  # cross
        (np.abs(dx) < r) & (np.abs(dy) < r),  # square
        inside & (((xx + yy) // p) % 2 == 0),  # diagonal stripes
        inside & ((xx // q + yy // q) % 2 == 0),  # checker
        (dy > -r) & (dy < r) & (np.abs(dx) < (dy + r) / 2),  # triangle
        inside & (((d // p) % 2) == 0),  # target
        inside & (np.abs(dx - dy) < r * 0.3),  # diagonal bar
    ]
    image = rng.normal(60, noise, (size, size)) + contrast * shapes[kind]
    return np.clip(image, 0, 255).astype(np.uint8)[..., None]


class _Form(Form):
    count = IntegerField("Images per class (train)", default=10)
    val = IntegerField("Images per class (val)", default=20)
    first = IntegerField("First class", default=0)
    classes = IntegerField("Classes", default=4)
    size = IntegerField("Size", default=32)
    seed = IntegerField("Seed", default=0)
    vary = IntegerField("Vary period, contrast and noise (1) or not (0)", default=0)


class Patterns(DataIngestion):
    """Generated pattern images of classes ``first .. first+classes-1``."""

    plugin_id = "bench-transfer-patterns"
    title = "Transfer bench patterns"
    label_kind = "class"

    @staticmethod
    def get_dataset_form():
        return _Form

    @staticmethod
    def get_dataset_template(form):
        return "{{ form.count }}", {}

    def itemize_entries(self, stage):
        per = {"train": int(self.count), "val": int(self.val)}.get(stage, 0)
        if stage == "train":
            first = int(self.first)
            self.userdata["class_labels"] = [f"pattern {k}" for k in range(first, first + int(self.classes))]
        return [(stage, i) for i in range(per * int(self.classes))]

    def encode_entry(self, entry):
        stage, index = entry
        rng = np.random.default_rng([int(self.seed), 0 if stage == "train" else 1, index])
        label = index % int(self.classes)
        return pattern(int(self.first) + label, int(self.size), rng, bool(int(self.vary))), label


#: The segmentation source's textures (each its own class), and the target's, which the source never shows.
SOURCE_TEXTURES = ("stripes", "waves", "zigzag", "rings", "blotches", "grain")
TARGET_TEXTURE = "checker"


def texture(kind: str, size: int, rng) -> np.ndarray:
    """A binary texture over the whole image, -1 or +1 per pixel, half of each (to within a few pixels).

    Random period (3-7 px), orientation and phase. Every kind has the same two values in the same
    proportions, so a region's mean intensity and spread say nothing of its kind: only the spatial
    structure (direction, curvature, periodicity) does.
    """
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    theta, period, phase = rng.uniform(0, np.pi), rng.uniform(3, 7), rng.uniform(0, 2 * np.pi)
    u, v = xx * np.cos(theta) + yy * np.sin(theta), yy * np.cos(theta) - xx * np.sin(theta)
    if kind == "stripes":
        wave = np.sin(2 * np.pi * u / period + phase)
    elif kind == "checker":
        wave = np.sin(2 * np.pi * u / period + phase) * np.sin(2 * np.pi * v / period + rng.uniform(0, 2 * np.pi))
    elif kind == "waves":  # stripes bent along a sine
        bend = rng.uniform(1, 2.5) * np.sin(2 * np.pi * v / rng.uniform(8, 16))
        wave = np.sin(2 * np.pi * (u + bend) / period + phase)
    elif kind == "zigzag":  # stripes bent at sharp corners (herringbone)
        length = rng.uniform(5, 10)
        wave = np.sin(2 * np.pi * (u + np.abs((v / length) % 2 - 1) * length) / period + phase)
    elif kind == "rings":
        cy, cx = rng.uniform(-0.5, 1.5, size=2) * size
        wave = np.sin(2 * np.pi * np.hypot(yy - cy, xx - cx) / period + phase)
    elif kind == "blotches":  # white noise low-passed to blobs about a period wide
        f = np.fft.fftfreq(size)
        gain = np.exp(-(f[:, None] ** 2 + f[None, :] ** 2) * (2.5 * period) ** 2)
        wave = np.fft.ifft2(np.fft.fft2(rng.normal(size=(size, size))) * gain).real
        wave -= np.median(wave)
    elif kind == "grain":  # random pixels, or 2x2 blocks
        block = int(rng.integers(1, 3))
        cells = rng.normal(size=(-(-size // block),) * 2)
        wave = np.kron(cells, np.ones((block, block)))[:size, :size]
        wave -= np.median(wave)
    else:
        raise ValueError(kind)
    return np.where(wave > 0, 1.0, -1.0)


def texture_image(kinds: list[str], size: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """An image of ``len(kinds)`` regions (a Voronoi partition, region ``k`` of texture ``kinds[k]``) and the map
    of its regions. One contrast and noise level for the whole image (random), so no region stands out by
    intensity; region 0 covers at least a tenth of the image."""
    yy, xx = np.mgrid[0:size, 0:size]
    while True:
        centres = rng.uniform(0, size, size=(len(kinds), 2))
        regions = np.argmin((yy[..., None] - centres[:, 0]) ** 2 + (xx[..., None] - centres[:, 1]) ** 2, axis=-1)
        if (regions == 0).mean() >= 0.1:
            break
    values = np.zeros((size, size))
    for k, kind in enumerate(kinds):
        values[regions == k] = texture(kind, size, rng)[regions == k]
    contrast, noise = rng.uniform(40, 80), rng.uniform(8, 25)
    image = 128 + contrast * values + rng.normal(0, noise, (size, size))
    return np.clip(image, 0, 255).astype(np.uint8)[..., None], regions


class _TextureForm(Form):
    count = IntegerField("Training images", default=16)
    val = IntegerField("Validation images", default=64)
    size = IntegerField("Size", default=48)
    seed = IntegerField("Seed", default=0)
    target = IntegerField("Target (1: masks of the held-out texture) or source (0: every texture a class)", default=0)


class Textures(DataIngestion):
    """Images of 3-5 textured regions. Source (``target`` 0): regions of :data:`SOURCE_TEXTURES`, each
    pixel labelled with its texture. Target (1): one region of :data:`TARGET_TEXTURE` among source ones,
    the mask that region."""

    plugin_id = "bench-transfer-textures"
    title = "Transfer bench textures"
    label_kind = "mask"

    @staticmethod
    def get_dataset_form():
        return _TextureForm

    @staticmethod
    def get_dataset_template(form):
        return "{{ form.count }}", {}

    def itemize_entries(self, stage):
        if stage == "train":
            names = ["other", TARGET_TEXTURE] if int(self.target) else list(SOURCE_TEXTURES)
            self.userdata["class_labels"] = names
        return [(stage, i) for i in range({"train": int(self.count), "val": int(self.val)}.get(stage, 0))]

    def encode_entry(self, entry):
        stage, index = entry
        rng = np.random.default_rng([int(self.seed), 0 if stage == "train" else 1, index])
        picked = rng.choice(len(SOURCE_TEXTURES), size=int(rng.integers(3, 6)), replace=False)
        kinds = [SOURCE_TEXTURES[k] for k in picked]
        if int(self.target):
            kinds[0] = TARGET_TEXTURE
            image, regions = texture_image(kinds, int(self.size), rng)
            return image, (regions == 0).astype(np.uint8)
        image, regions = texture_image(kinds, int(self.size), rng)
        return image, picked[regions].astype(np.uint8)


def build(values: dict, jobs_dir: Path, cls: type[DataIngestion] = Patterns):
    from digits_core.plugins.testing import build_dataset

    return build_dataset(cls, values, jobs_dir=jobs_dir)


def curve(job, jobs_dir, name: str) -> list[float]:
    from digits_core.engine.jobio import read_metrics

    points = [p for p in read_metrics(job, jobs_dir) if p["name"] == name]
    return [p["value"] for p in sorted(points, key=lambda p: p["epoch"])]


def seeded(target, spec: dict, args, jobs: Path, metric: str) -> list[list[float]]:
    """``metric``'s per-epoch curve of one training run per seed of ``args.seeds`` (a 10-image-per-class
    set swings several points with the seed alone: one run per side would compare seeds, not networks)."""
    from digits_core.engine import train

    runs = []
    for seed in args.seeds:
        job = train(target, jobs_dir=jobs, epochs=args.epochs, seed=seed, **spec)
        runs.append(curve(job, jobs, metric))
    return runs


def epochs_to(values: list[float], target: float) -> int | None:
    """The first epoch (1-based) whose value reaches ``target``, or ``None``."""
    return next((i + 1 for i, v in enumerate(values) if v >= target), None)


def classification(args, jobs: Path) -> dict:
    from digits_core.engine import train, zoo

    source = build({"count": args.source // 6, "val": 10, "first": 0, "classes": 6, "size": args.size, "vary": 1}, jobs)
    target = build({"count": args.per_class, "val": 50, "first": 6, "classes": 4, "size": args.size, "seed": 1}, jobs)
    t0 = time.perf_counter()
    src = train(source, "mobilenet_v3_small", jobs_dir=jobs, weights="none", epochs=args.source_epochs, seed=0)
    print(
        f"source: {source.count('train')} images, {args.source_epochs} epochs, val top-1 "
        f"{curve(src, jobs, 'val_accuracy')[-1]:.3f} ({time.perf_counter() - t0:.0f} s)"
    )
    zoo.add_from_model(src, "bench-source", jobs_dir=jobs)
    runs = {
        "pretrained (zoo)": dict(network="mobilenet_v3_small", weights="zoo:bench-source"),
        "from scratch": dict(network="mobilenet_v3_small", weights="none"),
        "lenet": dict(network="lenet"),
    }
    per_seed = {label: seeded(target, spec, args, jobs, "val_accuracy") for label, spec in runs.items()}
    curves = {label: np.mean(c, axis=0).tolist() for label, c in per_seed.items()}
    print(
        f"target: {args.per_class} training images per class (4 other classes), val 50 per class; "
        f"val top-1, mean of seeds {args.seeds}"
    )
    print("epoch  " + "  ".join(f"{k:>16}" for k in curves))
    for epoch in range(args.epochs):
        print(f"{epoch + 1:>5}  " + "  ".join(f"{c[epoch]:>16.3f}" for c in curves.values()))
    pre, scratch = curves["pretrained (zoo)"], curves["from scratch"]
    target_accuracy = args.target_accuracy if args.target_accuracy is not None else scratch[-1]
    return {
        "per_class": args.per_class,
        "epochs": args.epochs,
        "seeds": args.seeds,
        "val_accuracy": curves,
        "final": {k: c[-1] for k, c in curves.items()},
        "final_per_seed": {k: [run[-1] for run in c] for k, c in per_seed.items()},
        "points_over_scratch": 100 * (pre[-1] - scratch[-1]),
        "points_over_lenet": 100 * (pre[-1] - curves["lenet"][-1]),
        "target_accuracy": target_accuracy,
        "epochs_to_target": {k: epochs_to(c, target_accuracy) for k, c in curves.items()},
    }


def segmentation(args, jobs: Path) -> dict:
    from digits_core.engine import train, zoo

    sets = {"size": args.seg_size, "val": 64}
    source = build({**sets, "count": args.seg_source, "seed": 10 * args.seg_seed, "target": 0}, jobs, Textures)
    # Which 16 images a user happens to have moves the fine-tune's Dice by ~0.25 (0.52-0.78 over three draws),
    # so each side is measured on several target sets (each with its own validation images), not one.
    targets = [
        build({**sets, "count": args.seg_train, "seed": 10 * args.seg_seed + 1 + k, "target": 1}, jobs, Textures)
        for k in range(args.seg_sets)
    ]
    t0 = time.perf_counter()
    src = train(source, "mobilenet_v3_small", jobs_dir=jobs, weights="none", epochs=args.source_epochs, seed=0)
    source_dice = curve(src, jobs, "val_dice")[-1]
    print(
        f"segmentation source: {source.count('train')} images of {len(SOURCE_TEXTURES)} textures, "
        f"{args.source_epochs} epochs, val Dice {source_dice:.3f} ({time.perf_counter() - t0:.0f} s)"
    )
    zoo.add_from_model(src, "bench-seg-source", jobs_dir=jobs)
    runs = {
        "pretrained (zoo)": dict(network="mobilenet_v3_small", weights="zoo:bench-seg-source"),
        "from scratch": dict(network="mobilenet_v3_small", weights="none"),
        "unet": dict(network="unet"),  # the built-in U-Net a user trains today
    }
    per_set = [
        {label: seeded(target, spec, args, jobs, "val_dice") for label, spec in runs.items()} for target in targets
    ]
    per_seed = {label: [run for one in per_set for run in one[label]] for label in runs}
    dice = {label: np.mean(c, axis=0).tolist() for label, c in per_seed.items()}
    print(
        f"segmentation target: {len(targets)} sets of {args.seg_train} training images ({TARGET_TEXTURE} among "
        f"source textures), val Dice by epoch, mean of seeds {args.seeds} on every set"
    )
    for epoch in range(args.epochs):
        print(f"{epoch + 1:>5}  " + "  ".join(f"{k} {v[epoch]:.3f}" for k, v in dice.items()))
    return {
        "source_images": args.seg_source,
        "source_val_dice": source_dice,
        "size": args.seg_size,
        "train_images": args.seg_train,
        "target_sets": len(targets),
        "epochs": args.epochs,
        "seeds": args.seeds,
        "val_dice": dice,
        "final": {k: v[-1] for k, v in dice.items()},
        "final_per_seed": {k: [run[-1] for run in c] for k, c in per_seed.items()},
        "final_per_set": [{k: float(np.mean([run[-1] for run in c])) for k, c in one.items()} for one in per_set],
        "dice_over_scratch": dice["pretrained (zoo)"][-1] - dice["from scratch"][-1],
        "dice_over_unet": dice["pretrained (zoo)"][-1] - dice["unet"][-1],
    }


def throughput(args, jobs: Path) -> dict:
    import keras
    from digits_networks_backbones import BACKBONES as CATALOG
    from digits_networks_backbones import make_network

    from digits_core.engine import train

    data = build({"count": args.speed_images // 4, "val": 1, "classes": 4, "size": args.size_speed}, jobs)
    x = np.stack([pattern(i % 4, args.size_speed, np.random.default_rng(i)) for i in range(args.speed_images)])
    y = np.arange(args.speed_images) % 4
    print(
        f"training img/s at {args.size_speed}x{args.size_speed}, batch {args.batch}, 1 channel "
        "(digits train: the last epoch's mean; Keras fit: the second epoch)"
    )
    rows = {}
    for name in args.backbones:
        job = train(data, name, jobs_dir=jobs, weights="none", epochs=2, batch_size=args.batch, seed=0)
        ours = curve(job, jobs, "images_per_sec")[-1]
        model = make_network(CATALOG[name])(x.shape[1:], 4, task="classification")
        model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")
        model.fit(x, y, batch_size=args.batch, epochs=1, verbose=0)
        start = time.perf_counter()
        model.fit(x, y, batch_size=args.batch, epochs=1, verbose=0)
        theirs = len(x) / (time.perf_counter() - start)
        rows[name] = {"digits_train": ours, "keras_fit": theirs, "ratio": ours / theirs}
        print(f"{name:>20}: digits train {ours:7.1f} img/s, Keras fit {theirs:7.1f} img/s ({ours / theirs:.2f}x)")
        keras.backend.clear_session()
    return {"size": args.size_speed, "batch": args.batch, "images_per_sec": rows}


def spread(values: list[float]) -> str:
    """``values`` as printed in the summary: each, then mean ± standard deviation."""
    return "/".join(f"{v:.3f}" for v in values) + f" ({np.mean(values):.3f} ± {np.std(values):.3f})"


def summary(results: dict, guard: LoadGuard) -> None:
    """Both sides of every comparison, from this run; each speed figure marked when the machine was loaded."""
    if "throughput" in results:
        guard.refuse_if_strict()  # only speed depends on the load: accuracy and Dice are the same either way
    print(f"\n== summary (one run; machine {guard.note()}) ==")
    if "classification" in results:
        c = results["classification"]
        final, reach = c["final"], c["epochs_to_target"]
        print(
            f"classification, {c['per_class']} images per class, {c['epochs']} epochs, mean of seeds "
            f"{c['seeds']}: val top-1 " + ", ".join(f"{k} {v:.3f}" for k, v in final.items())
        )
        print("  per seed: " + "; ".join(f"{k} {spread(v)}" for k, v in c["final_per_seed"].items()))
        print(
            f"  pretrained - from scratch {c['points_over_scratch']:+.1f} points (goal +15), "
            f"pretrained - lenet {c['points_over_lenet']:+.1f}"
        )
        print(
            f"  epochs to val top-1 {c['target_accuracy']:.3f}: "
            + ", ".join(f"{k} {v if v is not None else 'never'}" for k, v in reach.items())
            + f" (goal: pretrained <= {c['epochs'] / 3:.1f})"
        )
    if "segmentation" in results:
        s = results["segmentation"]
        print(
            f"segmentation U-Net, {s['target_sets']} sets of {s['train_images']} images, {s['epochs']} epochs, mean of "
            f"seeds {s['seeds']} on every set: val Dice "
            + ", ".join(f"{k} {v:.3f}" for k, v in s["final"].items())
            + f"; pretrained - from scratch {s['dice_over_scratch']:+.3f}, pretrained - unet "
            f"{s['dice_over_unet']:+.3f} (goal +0.1)"
        )
        print("  per run: " + "; ".join(f"{k} {spread(v)}" for k, v in s["final_per_seed"].items()))
        for k, one in enumerate(s["final_per_set"]):
            print(f"  set {k}: " + ", ".join(f"{name} {v:.3f}" for name, v in one.items()))
    if "throughput" in results:
        t = results["throughput"]
        print(f"training img/s at {t['size']}x{t['size']}, batch {t['batch']}:")
        print(f"  {'backbone':<20} {'digits train':>12} {'Keras fit':>10} {'ratio':>6}")
        for name, row in t["images_per_sec"].items():
            line = f"  {name:<20} {row['digits_train']:>12.1f} {row['keras_fit']:>10.1f} {row['ratio']:>6.2f}"
            print(guard.mark(line))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("classification", "segmentation", "throughput"))
    parser.add_argument("--size", type=int, default=32, help="image size of the transfer sets")
    parser.add_argument("--source", type=int, default=6000, help="source images (6 classes)")
    parser.add_argument("--source-epochs", type=int, default=8)
    parser.add_argument("--per-class", type=int, default=10, help="target training images per class")
    parser.add_argument("--epochs", type=int, default=15, help="target epochs")
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds of the target runs (each side: their mean)"
    )
    parser.add_argument("--seg-source", type=int, default=2000)
    parser.add_argument("--seg-train", type=int, default=16)
    parser.add_argument("--seg-size", type=int, default=48, help="image size of the segmentation sets")
    parser.add_argument(
        "--seg-seed", type=int, default=0, help="seed of the segmentation sets (pilots: another than the figure's 0)"
    )
    parser.add_argument(
        "--seg-sets", type=int, default=3, help="target sets of --seg-train images (each side: the mean over all)"
    )
    parser.add_argument("--size-speed", type=int, default=64)
    parser.add_argument("--speed-images", type=int, default=512)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--backbones", nargs="+", default=list(BACKBONES))
    parser.add_argument(
        "--target-accuracy",
        type=float,
        default=None,
        help="val top-1 whose epochs-to-reach are printed for each side (default: from scratch's final)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the figures and the load verdict as JSON")
    parser.add_argument("--quick", action="store_true", help="tiny sets and 2 epochs: checks the script runs")
    add_guard_args(parser)
    args = parser.parse_args()
    if args.quick:
        args.source, args.source_epochs, args.epochs, args.seg_source = 60, 1, 2, 16
        args.speed_images, args.backbones, args.seeds, args.seg_sets = 32, ["mobilenet_v3_small"], [0], 1
    with tempfile.TemporaryDirectory(prefix="digits-transfer-") as tmp:
        os.environ["DIGITS_ZOO"] = str(Path(tmp) / "zoo")
        os.environ["KERAS_HOME"] = str(Path(tmp) / "keras")
        os.environ["DIGITS_OFFLINE"] = "1"
        jobs = Path(tmp) / "jobs"
        jobs.mkdir()
        parts = {"classification": classification, "segmentation": segmentation, "throughput": throughput}
        results = {}
        with LoadGuard.from_args(args) as guard:
            print(f"load guard: {guard.cores} cores, 1-minute load {guard.samples[0]:.1f} at start", flush=True)
            for name, run in parts.items():
                if args.only in (None, name):
                    results[name] = run(args, jobs)
        summary(results, guard)
        if args.json:
            record = {"quick": args.quick, "load": guard.summary(), **results}
            Path(args.json).write_text(json.dumps(record, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
