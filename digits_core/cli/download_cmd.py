"""``digits download mnist|cifar10|cifar100 DIR``: fetch a standard dataset as class folders."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``download`` command."""
    from ..download.specs import DATASETS

    parser = subparsers.add_parser(
        "download",
        help="download MNIST, CIFAR-10 or CIFAR-100 as folders of PNG images",
        description=(
            "Fetch a standard dataset from its official URL, verify its published MD5 sum and unpack it as "
            "DIR/train/<class>/*.png, DIR/test/<class>/*.png, DIR/labels.txt, DIR/train.txt and DIR/test.txt "
            "(CIFAR-100: one such tree in DIR/fine and one in DIR/coarse), ready for "
            "`digits dataset create image-classification`. A partial download is resumed and finished work is "
            "skipped when the command is run again."
        ),
    )
    parser.add_argument("dataset", choices=sorted(DATASETS), help="the dataset to fetch")
    parser.add_argument("folder", metavar="DIR", help="output folder (created if missing)")
    parser.add_argument(
        "--source",
        metavar="URL_OR_FILE",
        default=None,
        help="fetch from here instead of the official URLs: a folder (or file:// URL) holding the archives "
        "under their official names, an archive file, or a mirror URL",
    )
    parser.add_argument("--force", action="store_true", help="unpack again even if DIR is already complete")
    parser.add_argument(
        "--no-verify",
        dest="verify",
        action="store_false",
        help="do not check the published MD5 sums (only for a trusted mirror that re-packed the files)",
    )
    parser.add_argument(
        "--invert",
        action="store_true",
        help="MNIST: store black digits on white (255 - pixel), as DIGITS 6 did; default keeps the original values",
    )
    parser.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS", help="network timeout (default: 30)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bars")
    parser.set_defaults(handler=run)


class TqdmProgress:
    """A ``progress(task, done, total)`` callback drawing one tqdm bar per task."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.bars: dict = {}

    def __call__(self, task: str, done: int, total: int | None) -> None:
        if not self.enabled:
            return
        from tqdm import tqdm

        bar = self.bars.get(task)
        if bar is None:
            is_bytes = task.startswith("download")
            bar = tqdm(
                total=total,
                desc=task,
                unit="B" if is_bytes else "img",
                unit_scale=is_bytes,
                unit_divisor=1024 if is_bytes else 1000,
                file=sys.stderr,
                leave=True,
                dynamic_ncols=True,
            )
            self.bars[task] = bar
        if total is not None and bar.total != total:
            bar.total = total
        bar.update(done - bar.n)
        if total is not None and done >= total:
            self.close(task)

    def close(self, task: str | None = None) -> None:
        """Close one bar (or all)."""
        for key in [task] if task else list(self.bars):
            bar = self.bars.pop(key, None)
            if bar is not None:
                bar.close()


def run(args: argparse.Namespace) -> int:
    """Download, unpack and print what to do next."""
    from ..download import download_dataset

    progress = TqdmProgress(enabled=not args.quiet and sys.stderr.isatty())
    try:
        result = download_dataset(
            args.dataset,
            args.folder,
            source=args.source,
            force=args.force,
            verify=args.verify,
            invert=args.invert,
            progress=progress,
            timeout=args.timeout,
        )
    finally:
        progress.close()
    if not args.verify:
        print("warning: MD5 sums were not checked (--no-verify).", file=sys.stderr)
        sys.stderr.flush()
    if set(result.skipped) >= {"train", "test"}:
        print(f"{result.dataset} is already complete in {result.folder} (use --force to unpack again).")
    else:
        print(f"{result.dataset} is ready in {result.folder}")
    for tree in result.trees:
        counts = ", ".join(f"{n} {stage}" for stage, n in tree.counts.items())
        print(f"  {tree.folder}: {len(tree.classes)} classes, {counts} images (labels in {tree.folder / 'labels.txt'})")
    print("Create the dataset next with:")
    for command in result.next_steps():
        print(f"  {command}")
    return 0
