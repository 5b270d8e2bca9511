"""``digits evaluate``: a trained model on a held-out test set (an ``evaluation`` job, its report and metrics)."""

from __future__ import annotations

import json
import shutil
import sys


def register(subparsers) -> None:
    """Add the ``evaluate`` command."""
    parser = subparsers.add_parser(
        "evaluate",
        help="evaluate a trained model on a held-out test set (metrics, report, an evaluation job)",
        description="Run a model once over a test set with known labels and store an evaluation job: metrics.json, "
        "predictions.csv, per_class.csv, report.html (segmentation also nnU-Net's summary.json). The test set is a "
        "stage of a stored dataset (default: the model's own dataset, stage test) or labelled files read as "
        "digits infer reads them.",
    )
    parser.add_argument("--model", required=True, metavar="ID", help="model job id (or unique prefix)")
    parser.add_argument("--epoch", type=float, default=None, metavar="N", help="snapshot epoch (default: the last)")
    parser.add_argument(
        "--dataset", default=None, metavar="ID", help="dataset job of the test set (default: the model's)"
    )
    parser.add_argument(
        "--stage",
        default="test",
        choices=["test", "val", "train"],
        help="the dataset's stage to evaluate on (default: test)",
    )
    parser.add_argument(
        "--folder", action="append", default=[], metavar="DIR", help="a folder of class folders (repeatable)"
    )
    parser.add_argument(
        "--list",
        action="append",
        default=[],
        dest="lists",
        metavar="FILE",
        help="a list file, 'path label' per line (volume models: 'image label-file') (repeatable)",
    )
    parser.add_argument("--name", default=None, help="the evaluation job's name")
    parser.add_argument(
        "--bootstrap",
        type=int,
        default=1000,
        metavar="N",
        help="bootstrap resamples of the 95%% intervals (default: 1000; 0: none)",
    )
    parser.add_argument(
        "--nsd-tolerance",
        type=float,
        default=1.0,
        metavar="MM",
        help="tolerance of the normalised surface Dice (default: 1 mm)",
    )
    parser.add_argument("--report", default=None, metavar="FILE.html", help="also copy the standalone HTML report here")
    parser.add_argument(
        "--mlflow",
        metavar="URI",
        default=None,
        help="log the evaluation (parameters, metrics, report) to this MLflow tracking server "
        "(default: $MLFLOW_TRACKING_URI; needs digits-core[mlflow])",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(handler=run)


def run(args) -> int:
    """Evaluate, then print the summary (or its JSON) and where the results are."""
    from ..evaluation import EvaluationError, evaluate  # TensorFlow loads with it: only when the command runs

    progress = None
    if sys.stderr.isatty():  # as digits infer shows it

        def progress(done: int, total: int) -> None:
            print(f"\revaluation: {done}/{total} inputs", end="" if done < total else "\n", file=sys.stderr)

    inputs = [*args.folder, *args.lists]
    if inputs and args.dataset:
        raise EvaluationError("Give either --dataset (with --stage) or --folder/--list, not both.")
    result = evaluate(
        args.model,
        epoch=args.epoch,
        dataset_id=args.dataset,
        stage=args.stage,
        inputs=inputs or None,
        name=args.name,
        jobs_dir=args.jobs_dir,
        bootstrap=args.bootstrap,
        nsd_tolerance_mm=args.nsd_tolerance,
        progress=progress,
        mlflow=args.mlflow,
    )
    if args.report:
        shutil.copyfile(result.folder / "report.html", args.report)
    summary = result.summary()
    if args.json:
        print(json.dumps(summary, sort_keys=True))
        return 0
    for key, value in summary.get("metrics", {}).items():
        if isinstance(value, float):
            print(f"{key}: {value:.4f}")
    print(f"evaluation {result.job.id}: {result.folder}")
    return 0
