"""``digits export``: a trained model as a ``.tar.gz`` (SavedModel, ONNX, TFLite or Keras file, parity report)."""

from __future__ import annotations

import argparse
import json
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``export`` command."""
    parser = subparsers.add_parser(
        "export",
        help="export a trained model (.tar.gz: SavedModel, ONNX, TFLite or Keras, with a parity report)",
        description="Write one epoch of a model job as a .tar.gz: a TensorFlow SavedModel (TF Serving layout), an "
        "ONNX or a TFLite model whose input is raw images of any size (the dataset's resize mode, mean "
        "subtraction, crop and the task's post-processing inside), or the Keras file, plus labels.txt, mean.npy, "
        "info.json and parity.json: the export run in its own runtime against digits infer on the dataset's "
        "validation images.",
    )
    parser.add_argument("--model", required=True, metavar="ID", help="model job id (or unique prefix)")
    parser.add_argument("--epoch", type=float, default=None, metavar="N", help="snapshot epoch (default: the last)")
    parser.add_argument(
        "--format",
        choices=["savedmodel", "onnx", "tflite", "keras"],
        default="savedmodel",
        help="savedmodel (default), onnx or tflite (preprocessing inside), or keras (the bare network)",
    )
    parser.add_argument(
        "--quantize",
        choices=["dynamic", "float16"],
        default=None,
        help="tflite only: dynamic-range (int8 weights) or float16 quantization (default: float32)",
    )
    parser.add_argument(
        "--input-channels",
        type=int,
        choices=[1, 3],
        default=None,
        metavar="C",
        help="channels of the raw input images when they differ from the dataset's (converted inside)",
    )
    parser.add_argument(
        "--parity-sample",
        type=int,
        default=64,
        metavar="N",
        help="validation images in the parity report (default: 64; 0: no report)",
    )
    parser.add_argument(
        "--allow-mismatch", action="store_true", help="keep an export whose parity report falls below its threshold"
    )
    parser.add_argument("--out", required=True, metavar="FILE.tar.gz", help="archive to write")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Export the model, print its parity report and the archive's path."""
    import tarfile

    from ..inference.export import PARITY_FILE, export_model

    path = export_model(
        args.model,
        args.out,
        epoch=args.epoch,
        format=args.format,
        quantize=args.quantize,
        channels_in=args.input_channels,
        parity_sample=args.parity_sample or None,
        allow_mismatch=args.allow_mismatch,
        jobs_dir=args.jobs_dir,
    )
    with tarfile.open(path) as tar:
        member = next((m for m in tar.getmembers() if m.name.endswith("/" + PARITY_FILE)), None)
        handle = tar.extractfile(member) if member is not None else None
        if handle is not None:
            print("parity: " + json.dumps(json.load(handle), sort_keys=True))
    print(f"wrote {path}")
    return 0
