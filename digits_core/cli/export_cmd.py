"""``digits export``: a trained model as a ``.tar.gz`` (SavedModel or Keras file, labels, mean, info.json)."""

from __future__ import annotations


def register(subparsers) -> None:
    """Add the ``export`` command."""
    parser = subparsers.add_parser(
        "export", help="export a trained model (.tar.gz with a SavedModel, labels, mean, info.json)",
        description="Write one epoch of a model job as a .tar.gz: a TensorFlow SavedModel whose serving "
        "signature takes raw images (resize, mean subtraction and crop inside), or the Keras file, plus "
        "labels.txt, mean.npy, info.json and the custom network file when there is one.",
    )
    parser.add_argument("--model", required=True, metavar="ID", help="model job id (or unique prefix)")
    parser.add_argument("--epoch", type=float, default=None, metavar="N", help="snapshot epoch (default: the last)")
    parser.add_argument("--format", choices=["savedmodel", "keras"], default="savedmodel",
                        help="savedmodel (default; preprocessing inside) or keras (the bare network)")
    parser.add_argument("--out", required=True, metavar="FILE.tar.gz", help="archive to write")
    parser.set_defaults(handler=run)


def run(args) -> int:
    """Export the model and print the archive's path."""
    from ..inference.export import export_model

    path = export_model(args.model, args.out, epoch=args.epoch, format=args.format, jobs_dir=args.jobs_dir)
    print(f"wrote {path}")
    return 0
