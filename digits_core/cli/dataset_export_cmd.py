"""``digits dataset export DATASET --format coco|yolo|voc OUT``: a detection or segmentation dataset
back to the files a labelling tool reads (:mod:`digits_core.datasets.annotation_export`)."""

from __future__ import annotations

import argparse
from typing import Any

from .output import print_json

FORMATS = ("coco", "yolo", "voc")


def add_export(sub: Any) -> None:
    """Add ``dataset export`` to the ``dataset`` sub-commands."""
    export = sub.add_parser(
        "export",
        help="write a detection or segmentation dataset as COCO, YOLO or Pascal VOC files",
        description="Write a detection or segmentation dataset's images (PNG) and labels as COCO, YOLO or "
        "Pascal VOC files, which the image plugins (and labelling tools) read back without loss.",
    )
    export.add_argument("id", help="dataset job id (or a unique prefix)")
    export.add_argument("--format", required=True, choices=FORMATS, help="annotation format")
    export.add_argument("out", metavar="OUT", help="output folder (new, or empty)")
    export.add_argument("--json", action="store_true", help="print the summary as JSON")
    export.set_defaults(handler=run_export)


def run_export(args: argparse.Namespace) -> int:
    """Export one dataset; print what was written."""
    from ..datasets import open_dataset  # startup stays light: `digits --help` never opens LMDB
    from ..datasets.annotation_export import export_dataset  # startup stays light, as open_dataset

    dataset = open_dataset(args.id, jobs_dir=args.jobs_dir)
    summary = export_dataset(dataset, args.format, args.out)
    if args.json:
        print_json(summary)
        return 0
    for stage, images in summary["stages"].items():
        print(f"{stage}: {images} images, {summary['objects'][stage]} objects")
    print(f"wrote {args.format} files to {summary['out']}")
    return 0
