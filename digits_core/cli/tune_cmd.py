"""``digits tune`` (a hyper-parameter search on Ray Tune) and ``digits sweep list|show|abort|promote``.

Thin wrappers over :mod:`digits_core.sweeps.tune` and :mod:`digits_core.sweeps.report`;
Ray and TensorFlow are imported only when a search runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from ..engine.option_specs import add_cli_arguments, options_from_cli
from ..errors import DigitsError, FormValidationError
from .output import print_json, print_table, print_unreadable
from .tracking import add_mlflow_argument, use_mlflow

if TYPE_CHECKING:
    from ..sweeps.tune import TuneHandle


def register(subparsers: Any) -> None:
    """Add ``tune`` and ``sweep``."""
    p = subparsers.add_parser(
        "tune",
        help="search hyper-parameters on Ray Tune (grid, random or ASHA); one model job per trial",
        description="Search training options: each --search OPTION=EXPR gives one option's space, a list "
        "(0.1,0.01), choice(a,b,...), uniform(LOW,HIGH) or loguniform(LOW,HIGH). Every trial is a model job in "
        "one group; ASHA cuts hopeless trials at its rungs (status Stopped early). Runs Ray on this machine "
        "(127.0.0.1 only) unless --ray-address names a cluster. Ctrl-C aborts the sweep: running trials stop "
        "at their next step, finished ones stay. Other training flags apply to every trial.",
    )
    p.add_argument("--dataset", metavar="ID", required=True, help="dataset job id (or unique prefix)")
    p.add_argument(
        "--network",
        metavar="NAME|FILE.py",
        help="network of every trial (a network=choice(...) space overrides it; default: the task's)",
    )
    p.add_argument("--name", help="sweep name: the start of every trial's job name and the default group")
    p.add_argument("--group", metavar="NAME", help="job group of every trial (default: --name)")
    p.add_argument(
        "--search",
        metavar="OPTION=EXPR",
        action="append",
        default=[],
        required=True,
        help='a search space, e.g. "learning_rate=loguniform(1e-4,1e-1)" or "batch_size=choice(32,64)"; repeatable',
    )
    p.add_argument(
        "--scheduler",
        choices=("grid", "random", "asha"),
        default="asha",
        help="grid: every combination; random: --trials points; asha: random points, hopeless ones "
        "cut at ASHA's rungs (default: asha)",
    )
    p.add_argument("--trials", type=int, default=16, help="random / asha: how many points (default 16)")
    p.add_argument("--max-epochs", type=int, default=10, help="epochs of a trial that is not cut (default 10)")
    p.add_argument("--metric", default="val_accuracy", help="validation metric to rank by (default val_accuracy)")
    p.add_argument(
        "--mode",
        choices=("auto", "min", "max"),
        default="auto",
        help="better when the metric is lower (min) or higher (max); auto: from its name",
    )
    p.add_argument("--grace-period", type=int, default=1, help="asha: epochs before a trial may be cut (default 1)")
    p.add_argument(
        "--reduction-factor",
        type=float,
        default=3.0,
        help="asha: each rung keeps the best 1/N of the trials (default 3)",
    )
    p.add_argument(
        "--max-concurrent",
        type=int,
        default=None,
        metavar="N",
        help="at most N trials at the same time (default: one per CPU Ray has)",
    )
    p.add_argument("--search-seed", type=int, default=None, help="seed of the random points (default: random)")
    p.add_argument(
        "--ray-address",
        metavar="HOST:PORT",
        default=None,
        help="run the trials on this Ray cluster (default: $DIGITS_RAY_ADDRESS, else Ray on this machine)",
    )
    add_cli_arguments(p)
    add_mlflow_argument(p)
    p.add_argument("--json", action="store_true", help="print the sweep's summary as JSON at the end")
    p.set_defaults(handler=run_tune)

    s = subparsers.add_parser("sweep", help="list, show, abort or promote hyper-parameter sweeps (digits tune)")
    ssub = s.add_subparsers(dest="sweep_command", metavar="ACTION")
    sl = ssub.add_parser("list", help="list sweeps")
    sl.add_argument("--json", action="store_true", help="print JSON")
    sl.set_defaults(handler=run_sweep_list)
    ss = ssub.add_parser("show", help="a sweep's trials ranked by its metric, and the epochs it spent")
    ss.add_argument("sweep")
    ss.add_argument("--json", action="store_true", help="print JSON (the comparison page's twin)")
    ss.set_defaults(handler=run_sweep_show)
    sa = ssub.add_parser("abort", help="stop a sweep: running trials stop at their next step, no new one starts")
    sa.add_argument("sweep")
    sa.set_defaults(handler=run_sweep_abort)
    sr = ssub.add_parser("resume", help="run an aborted sweep's unfinished trials (aborted ones from their snapshot)")
    sr.add_argument("sweep")
    sr.add_argument("--json", action="store_true", help="print the sweep's summary as JSON at the end")
    sr.set_defaults(handler=run_sweep_resume)
    sp = ssub.add_parser("promote", help="mark a sweep's best trial (or --job) as its result")
    sp.add_argument("sweep")
    sp.add_argument("--job", help="promote this trial instead of the best")
    sp.add_argument("--name", help="rename the promoted model job (default: it keeps its trial name)")
    sp.set_defaults(handler=run_sweep_promote)
    s.set_defaults(handler=lambda args: s.print_help() or 0)


def _print_summary(summary: dict) -> None:
    from ..sweeps.report import budget_line  # the sweep code loads when a command runs

    print(
        f'sweep {summary["id"]} ({summary["name"]}, group "{summary["group"]}"): {summary["status"]}; '
        f"{summary['scheduler']} over {' '.join(summary['search'])}; ranked by {summary['metric']} "
        f"({summary['mode']})"
    )
    rows = [
        [
            row["index"] + 1 if row["index"] is not None else "",
            row["job_id"],
            row["status"],
            "" if row["best"] is None else f"{row['best']:.4g}",
            f"{row['epochs']:g}",
            " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in row["values"].items()),
            row["status_note"] or "",
        ]
        for row in summary["trials"]
    ]
    print_table(["trial", "job", "status", summary["metric"], "epochs", "options", "note"], rows)
    if summary["pending"]:
        print(f"{len(summary['pending'])} trials not started")
    if summary["best"]:
        print(
            f"best: trial {summary['best']['index'] + 1} ({summary['best']['job_id']}) "
            f"{summary['metric']} {summary['best']['best']:.4g}"
        )
    print(budget_line(summary))


def run_tune(args: argparse.Namespace) -> int:
    """Run a search to its end (Ctrl-C aborts it) and print the ranked trials and the budget."""
    from ..sweeps.tune import tune  # the sweep code loads when a command runs

    use_mlflow(args)
    options = options_from_cli(args)
    options.pop("epochs", None)  # the tuner's --max-epochs
    handle = tune(
        args.dataset,
        args.network,
        args.name,
        search=args.search,
        scheduler=args.scheduler,
        trials=args.trials,
        max_epochs=args.max_epochs,
        metric=args.metric,
        mode=args.mode,
        grace_period=args.grace_period,
        reduction_factor=args.reduction_factor,
        max_concurrent=args.max_concurrent,
        search_seed=args.search_seed,
        group=args.group,
        jobs_dir=args.jobs_dir,
        ray_address=args.ray_address,
        **options,
    )
    print(
        f'sweep {handle.sweep_id}: trials run as model jobs in group "{handle.group}" '
        f"(digits sweep show {handle.sweep_id})",
        file=sys.stderr,
    )
    return _follow(handle, args.json)


def _follow(handle: TuneHandle, as_json: bool) -> int:
    """Wait for a sweep (Ctrl-C aborts it), then print its summary."""
    try:
        while handle.running:
            time.sleep(1.0)
    except KeyboardInterrupt:
        print("aborting the sweep: running trials stop at their next step", file=sys.stderr)
        handle.abort()
        while handle.running:
            time.sleep(1.0)
    summary = handle.wait()
    if as_json:
        print_json(summary)
    else:
        _print_summary(summary)
    return 0 if summary["status"] == "Done" else 3


def run_sweep_resume(args: argparse.Namespace) -> int:
    from ..sweeps.tune import resume_sweep  # the sweep code loads when a command runs

    return _follow(resume_sweep(args.sweep, args.jobs_dir), args.json)


def run_sweep_list(args: argparse.Namespace) -> int:
    """Print the sweeps; a sweep whose ``sweep.json`` cannot be read is listed Unreadable, with the file and why."""
    from ..jobs.readers import UnreadableRecordError  # as tuning below: `digits tune --help` stays light
    from ..sweeps.record import SWEEP_FILE  # the sweep code loads when a command runs
    from ..sweeps.report import index_row, sweep_summary  # the sweep code loads when a command runs
    from ..sweeps.tune import read_sweep, sweeps_root  # the sweep code loads when a command runs

    root = sweeps_root(args.jobs_dir)
    records, unreadable = [], []
    for path in sorted(root.iterdir(), reverse=True) if root.is_dir() else []:
        if (path / SWEEP_FILE).is_file():
            try:
                record = read_sweep(path.name, args.jobs_dir)
            except UnreadableRecordError as exc:
                unreadable.append(exc)
                continue
            try:  # the web index's fields: trials done of all, the best metric and its trial
                record.update(index_row(sweep_summary(path.name, args.jobs_dir)))
            except (DigitsError, KeyError, TypeError):
                pass  # a record without settings or trials: listed with what it has
            records.append(record)
    if args.json:
        gone = [
            {"id": e.file.parent.name, "status": "Unreadable", "file": str(e.file), "reason": e.reason}
            for e in unreadable
        ]
        print_json(records + gone)
        return 0
    print_table(
        ["id", "name", "status", "scheduler", "done", "best", "best trial"],
        [
            [
                r.get("id"),
                r.get("name"),
                r.get("status"),
                (r.get("settings") or {}).get("scheduler"),
                f"{r.get('trials_done', 0)}/{r.get('trials_total', len(r.get('trials') or []))}",
                "" if r.get("best") is None else f"{r.get('metric')} {r['best']:.4g}",
                r.get("best_job") or "",
            ]
            for r in records
        ]
        + [[e.file.parent.name, "", "Unreadable", "", "", "", ""] for e in unreadable],
    )
    print_unreadable(unreadable)
    return 0


def run_sweep_show(args: argparse.Namespace) -> int:
    from ..sweeps.report import sweep_summary  # the sweep code loads when a command runs

    summary = sweep_summary(args.sweep, args.jobs_dir)
    if args.json:
        print_json(summary)
    else:
        _print_summary(summary)
    return 0


def run_sweep_abort(args: argparse.Namespace) -> int:
    from ..sweeps.tune import abort_sweep  # the sweep code loads when a command runs

    asked = abort_sweep(args.sweep, args.jobs_dir)
    print(f"sweep {args.sweep}: no new trial starts; asked {len(asked)} running trials to stop")
    return 0


def run_sweep_promote(args: argparse.Namespace) -> int:
    from ..sweeps.report import promote  # the sweep code loads when a command runs

    row = promote(args.sweep, args.job, args.jobs_dir, name=args.name)
    if row["best"] is None:
        raise FormValidationError({"job": ["that trial has no metric yet"]}, "digits sweep promote")
    print(
        f"sweep {args.sweep}: promoted {row['job_id']} ({row['name']}); export it with `digits export {row['job_id']}`"
    )
    return 0
