"""``digits train``, ``digits model list|show|abort|delete``, ``digits lr-preview``, ``digits networks``.

Thin wrappers over :mod:`digits_core.engine`; TensorFlow is imported only
when a command trains or loads a model.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..engine.jobio import load_model_job, read_metrics, read_model_info
from ..engine.lr_policies import lr_schedule_preview
from ..engine.networks import list_networks
from ..engine.option_specs import LR_PREVIEW_OPTIONS, add_cli_arguments, options_from_cli
from ..engine.options import lr_preview_schedule
from ..engine.trainer import request_abort, resume_training, train
from ..errors import FormValidationError, JobStateError
from ..jobs import JobStore
from ..jobs.checks import check_job_name
from ..jobs.model import MODEL_FILE
from ..jobs.record import JobRecordError
from ..sweeps import expand_sweep, is_sweep, sweep_group, train_sweep
from .model_list import run_list
from .output import print_json, print_table
from .tracking import add_mlflow_argument, use_mlflow


def register(subparsers: Any) -> None:
    """Add ``train``, ``model``, ``lr-preview`` and ``networks``."""
    p = subparsers.add_parser(
        "train",
        help="train a network on a dataset (a model job)",
        description="Train a built-in, plugin or custom network on a dataset. The task (classification, "
        "segmentation, regression) comes from the dataset's labels. Ctrl-C or `digits model abort` stops "
        "at the next step (status Aborted); `--resume JOB` continues from the last snapshot. Several "
        "comma-separated values of --learning-rate / --batch-size make a sweep: one model job per "
        "combination, all in one group, trained one after the other in this process (a server queues them "
        "instead: use the web form or POST /api/models).",
    )
    p.add_argument("--dataset", metavar="ID", help="dataset job id (or unique prefix)")
    p.add_argument(
        "--network",
        metavar="NAME|FILE.py",
        help="lenet, alexnet, googlenet, unet, fcn, regression, a plugin network, or a .py file "
        "defining build_model(input_shape, num_outputs, **params) (default: the task's)",
    )
    p.add_argument("--name", help="model job name (of a sweep: the start of every job's name and the default group)")
    p.add_argument("--group", metavar="NAME", help="job group shown on the web home page (a sweep's default: --name)")
    p.add_argument("--resume", metavar="JOB", help="continue an aborted model job from its last snapshot")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="train with N workers (MultiWorkerMirroredStrategy) on the Ray cluster at --ray-address, "
        "through Ray Train: one CPU per worker, one GPU each with --gpus; the dataset and jobs "
        "folder must be at the same path on every node (needs the digits-core[ray] extra)",
    )
    p.add_argument(
        "--ray-address",
        metavar="HOST:PORT",
        default=None,
        help="the Ray cluster for --workers (default: $DIGITS_RAY_ADDRESS)",
    )
    add_cli_arguments(p)
    p.add_argument(
        "--network-param",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="extra build_model keyword argument (VALUE parsed as JSON when possible); repeatable",
    )
    add_mlflow_argument(p)
    p.add_argument("--json", action="store_true", help="print model.json at the end instead of a summary")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=run_train)

    m = subparsers.add_parser("model", help="list, show, abort or delete model jobs")
    msub = m.add_subparsers(dest="model_command", metavar="ACTION")
    ml = msub.add_parser("list", help="list model jobs")
    ml.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ml.add_argument("--group", metavar="NAME", help="only the jobs of this group (e.g. a sweep's)")
    ml.set_defaults(handler=run_list)
    ms = msub.add_parser("show", help="show a model job: options, snapshots, last metrics")
    ms.add_argument("job")
    ms.add_argument("--json", action="store_true", help="print model.json (with the status) as JSON")
    ms.set_defaults(handler=run_show)
    ma = msub.add_parser("abort", help="ask a running training to stop at its next step")
    ma.add_argument("job")
    ma.set_defaults(handler=run_abort)
    md = msub.add_parser("delete", help="delete a model job folder")
    md.add_argument("job")
    md.add_argument("--force", action="store_true", help="also delete a running job")
    md.set_defaults(handler=run_delete)
    m.set_defaults(handler=lambda args: m.print_help() or 0)

    lp = subparsers.add_parser(
        "lr-preview",
        help="show a learning-rate schedule as numbers and a PNG plot",
        description="Evaluate the learning-rate policy exactly as training will (it = training progress in percent).",
    )
    add_cli_arguments(lp, LR_PREVIEW_OPTIONS, sweep=False)  # the training options' own flags, help and types
    lp.add_argument("--epochs", type=int, default=30, help="epochs of the run (default: 30)")
    lp.add_argument("--steps-per-epoch", type=int, default=100, help="optimizer steps per epoch (default: 100)")
    lp.add_argument("--points", type=int, default=11, help="how many rows to print (default 11)")
    lp.add_argument("--plot", metavar="FILE.png", help="write a PNG plot of the schedule")
    lp.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    lp.set_defaults(handler=run_lr_preview)

    n = subparsers.add_parser("networks", help="list the networks `digits train --network` accepts")
    n.add_argument("--json", action="store_true", help="print JSON (with each network's recommended options)")
    n.set_defaults(handler=run_networks)


def _parse_network_params(items: Any) -> dict:
    params = {}
    for item in items or []:
        if "=" not in item:
            raise FormValidationError({"network_param": [f'"{item}" is not KEY=VALUE']}, "training options")
        key, value = item.split("=", 1)
        try:
            params[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            params[key.strip()] = value
    return params


def _options_from_args(args: argparse.Namespace) -> dict:
    options = options_from_cli(args)
    params = _parse_network_params(args.network_param)
    if params:
        options["network_params"] = params
    return options


class _ProgressBar:
    """tqdm bar: epoch, step, loss, ETA; validation results printed above it."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.bar: Any = None

    def __call__(self, event: dict) -> None:
        if self.quiet:
            return
        from tqdm import tqdm

        if self.bar is None:
            self.bar = tqdm(
                total=event["total_steps"],
                initial=event["step"] - (event["phase"] == "train"),
                unit="step",
                dynamic_ncols=True,
                file=sys.stderr,
            )
        if event["phase"] == "train":
            self.bar.update(event["step"] - self.bar.n)
            self.bar.set_postfix_str(
                f"epoch {event['epoch']:.2f}/{event['epochs']} loss {event['loss']:.4f}", refresh=False
            )
        else:
            shown = ", ".join(f"{k} {v:.4f}" for k, v in event.items() if k.startswith("val_"))
            self.bar.write(f"epoch {event['epoch']:.2f}: {shown}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_train(args: argparse.Namespace) -> int:
    """Train (or resume) and print a summary."""
    bar = _ProgressBar(args.quiet)
    use_mlflow(args)
    try:
        if args.resume and args.workers is not None:
            raise FormValidationError(
                {"workers": ["--resume continues on this machine; leave out --workers"]}, "digits train"
            )
        if args.resume:
            job = resume_training(args.resume, jobs_dir=args.jobs_dir, progress=bar, epochs=args.epochs)
        else:
            if not args.dataset:
                raise FormValidationError(
                    {"dataset": ["give --dataset ID (see `digits dataset list`) or --resume JOB"]}, "digits train"
                )
            check_job_name(args.name, "--name", what="digits train")
            options = _options_from_args(args)
            if args.workers is not None:
                bar.close()
                job = _train_on_ray(args, options)
                return _report(args, job)
            if is_sweep(options):
                bar.close()
                return _run_sweep(args, options)
            job = train(
                args.dataset,
                args.network,
                name=args.name,
                jobs_dir=args.jobs_dir,
                progress=bar,
                group=args.group,
                **options,
            )
    finally:
        bar.close()
    return _report(args, job)


def _train_on_ray(args: argparse.Namespace, options: dict) -> Any:
    """``digits train --workers N``: one model trained by N Ray Train workers on the cluster."""
    import os

    from ..executors import RAY_ADDRESS_ENV
    from ..executors.ray_train import train_on_ray

    address = args.ray_address or os.environ.get(RAY_ADDRESS_ENV)
    if not address:
        raise FormValidationError(
            {"ray_address": [f"--workers trains on a Ray cluster: give --ray-address HOST:PORT or ${RAY_ADDRESS_ENV}"]},
            "digits train",
        )
    if is_sweep(options):
        raise FormValidationError(
            {
                "workers": [
                    "a sweep with --workers is not supported: queue the sweep on a "
                    "server with --executor ray (its points run in parallel)"
                ]
            },
            "digits train",
        )
    gpus = options.pop("gpus", None)
    print(f"training on {args.workers} Ray Train workers at {address}", file=sys.stderr)
    return train_on_ray(
        args.dataset,
        args.network,
        workers=args.workers,
        address=address,
        name=args.name,
        jobs_dir=args.jobs_dir,
        use_gpu=bool(gpus) and str(gpus) != "0",
        group=args.group,
        **options,
    )


def _report(args: argparse.Namespace, job: Any) -> int:
    """Print the summary (or model.json) of a finished training; return the exit status."""
    if not (job.path / "model.json").is_file():  # a non-chief worker: outputs belong to the chief
        report = job.data.get("worker_report") or {}
        print(
            f"worker {report.get('worker_index')} of {report.get('num_workers')} finished ({job.status.value}) "
            f"after {report.get('steps')} steps on its shard of {report.get('images_per_epoch')} images per epoch; "
            "the chief wrote the outputs"
        )
        return 0
    info = read_model_info(job.path)
    if args.json:
        print_json({**info, "status": job.status.value})
    else:
        final = info.get("final_metrics") or {}
        shown = ", ".join(f"{k} {v:.4g}" for k, v in sorted(final.items()) if isinstance(v, float))
        print(
            f"model job {job.id} ({job.name}): {job.status.value}; last epoch {info.get('last_epoch')}, "
            f"best epoch {info.get('best_epoch')}"
        )
        if shown:
            print(f"  {shown}")
        print(f"  folder: {job.path}")
        if job.status.value == "Aborted":
            print(f"  resume with: digits train --resume {job.id}")
    return 0 if job.status.value == "Done" else 3


def _run_sweep(args: argparse.Namespace, options: dict) -> int:
    """Train every combination of a sweep in turn; print one line per job (or JSON) at the end."""
    name = args.name or f"{args.network or 'model'}-sweep"
    points = expand_sweep(options, name)
    print(
        f'sweep {name}: {len(points)} jobs in group "{sweep_group(name, args.group)}", '
        "trained one after the other in this process",
        file=sys.stderr,
    )
    bars: dict[int, _ProgressBar] = {}

    def progress(event: dict) -> None:
        index = event["sweep_index"]
        if index not in bars:
            for bar in bars.values():
                bar.close()
            if not args.quiet:
                print(f"[{index + 1}/{event['sweep_size']}] {points[index].name}", file=sys.stderr)
            bars[index] = _ProgressBar(args.quiet)
        bars[index](event)

    try:
        jobs = train_sweep(
            args.dataset, args.network, name, group=args.group, jobs_dir=args.jobs_dir, progress=progress, **options
        )
    finally:
        for bar in bars.values():
            bar.close()
    rows = []
    for job, point in zip(jobs, points):
        info = read_model_info(job.path) if (job.path / MODEL_FILE).is_file() else {}
        rows.append(
            {
                "id": job.id,
                "name": job.name,
                "status": job.status.value,
                "group": job.group,
                **point.values,
                "best_epoch": info.get("best_epoch"),
                "best_metric": info.get("best_metric"),
                "best_metric_name": info.get("best_metric_name"),
                "error": job.error,
            }
        )
    if args.json:
        print_json(rows)
    else:
        swept = list(points[0].values)
        print_table(
            ["id", "name", "status", *swept, "best"],
            [
                [
                    r["id"],
                    r["name"],
                    r["status"],
                    *[r[k] for k in swept],
                    f"{r['best_metric_name'] or ''} {r['best_metric']:.4f}"
                    if isinstance(r["best_metric"], float)
                    else "",
                ]
                for r in rows
            ],
        )
        if len(jobs) < len(points):
            print(f"stopped after job {len(jobs)} of {len(points)} was aborted; the rest were not created")
    return 0 if len(jobs) == len(points) and all(j.status.value == "Done" for j in jobs) else 3


def _store(args: argparse.Namespace) -> Any:
    return JobStore(args.jobs_dir)


def run_show(args: argparse.Namespace) -> int:
    job = load_model_job(_store(args).get(args.job, kind="model"))
    info: dict[str, Any] = {}
    if (job.path / MODEL_FILE).is_file():
        info = dict(read_model_info(job.path))  # a damaged one is an error naming the file and why
    last: dict = {}
    for point in read_metrics(job):
        last[point["name"]] = point["value"]
    if args.json:
        print_json({"job": job.to_dict(), "model": info, "last_metrics": last})
        return 0
    print(f"{job.id}  {job.name}  {job.status.value}")
    if job.group:
        sweep = job.data.get("sweep")
        print(
            f"  group: {job.group}" + (f" (sweep: {', '.join(f'{k}={v}' for k, v in sweep.items())})" if sweep else "")
        )
    if job.error:
        print(f"error: {job.error}")
    for key in (
        "network",
        "dataset_id",
        "task",
        "input_shape",
        "num_outputs",
        "batch_size",
        "seed",
        "mean_subtraction",
        "crop_size",
        "parameters",
        "last_epoch",
        "best_epoch",
        "best_metric",
    ):
        if key in info:
            print(f"  {key}: {info[key]}")
    if info.get("options"):
        opts = info["options"]
        print(f"  solver: {opts.get('solver')} lr {opts.get('learning_rate')} policy {info.get('lr_policy')}")
    if info.get("snapshots"):
        print(f"  snapshots: {', '.join(s['file'] for s in info['snapshots'])}")
    if last:
        print("  last metrics: " + ", ".join(f"{k} {v:.4g}" for k, v in sorted(last.items()) if v is not None))
    print(f"  folder: {job.path}")
    return 0


def run_abort(args: argparse.Namespace) -> int:
    job = _store(args).get(args.job, kind="model")
    if job.status.is_finished:
        raise JobStateError(f'Model job "{job.id}" is not running (status {job.status.value}).')
    request_abort(job)
    print(f"abort requested for {job.id}; it stops at its next step")
    return 0


def run_delete(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        job = store.get(args.job, kind="model")
    except JobRecordError as exc:  # its job.json cannot be read: remove the folder as it is (unless a process owns it)
        store.delete(args.job)
        print(f"deleted {exc.file.parent.name} (its {exc.file.name} could not be read: {exc.reason})")
        return 0
    if job.status.value == "Running" and not args.force:
        raise JobStateError(f'Model job "{job.id}" is running; abort it first or pass --force.')
    store.delete(job.id)
    print(f"deleted {job.id}")
    return 0


def run_lr_preview(args: argparse.Namespace) -> int:
    total = args.epochs * args.steps_per_epoch
    learning_rate, policy = lr_preview_schedule(options_from_cli(args, LR_PREVIEW_OPTIONS))
    rows = lr_schedule_preview(
        total,
        learning_rate=learning_rate,
        lr_policy=policy.pop("policy"),
        points=max(args.points, 2),
        plot=args.plot,
        **policy,
    )
    if args.json:
        print_json(rows)
    else:
        print_table(
            ["step", "epoch", "progress %", "learning rate"],
            [
                [r["step"], f"{r['step'] / args.steps_per_epoch:.2f}", f"{r['progress']:.1f}", f"{r['lr']:.6g}"]
                for r in rows
            ],
        )
        if args.plot:
            print(f"plot written to {args.plot}")
    return 0


def run_networks(args: argparse.Namespace) -> int:
    specs = list_networks()
    if args.json:
        print_json(
            [
                {
                    "name": s.name,
                    "source": s.source,
                    "tasks": list(s.tasks),
                    "batch_size": s.batch_size,
                    "description": s.description,
                    "defaults": s.defaults,
                    "min_size": s.min_size,
                    "weights": sorted(s.weights),
                }
                for s in specs
            ]
        )
        return 0
    print_table(
        ["name", "source", "task", "batch", "min size", "weights", "description"],
        [
            [s.name, s.source, ",".join(s.tasks), s.batch_size, s.min_size or "", ",".join(s.weights), s.description]
            for s in specs
        ],
    )
    print(
        "\nOr pass --network path/to/net.py with build_model(input_shape, num_outputs, **params); "
        "see docs/custom-networks.md."
    )
    return 0
