"""``digits dataset``: create, list, show, explore and delete datasets.

``digits dataset create <plugin-id> [options]`` builds its options from the
plugin's own WTForms dataset form (``--field-name`` per field, help from the
labels and descriptions, defaults and choices from the form), so
``digits dataset create <plugin-id> --help`` lists them. The same form
validates the values through :func:`digits_core.datasets.create_dataset`,
the path the web UI and the Python API use too.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import DatasetError, JobStateError
from .dataset_export_cmd import add_export
from .output import plugin_output_to_stderr, print_json, print_table, print_unreadable


def register(subparsers: Any) -> None:
    """Add the ``dataset`` command and its sub-commands."""
    parser = subparsers.add_parser(
        "dataset",
        help="create, list, show, explore and delete datasets",
        description="Build datasets with data plugins and look at them.",
    )
    sub = parser.add_subparsers(dest="dataset_command", metavar="SUBCOMMAND")
    parser.set_defaults(handler=lambda args: parser.print_help() or 0)

    create = sub.add_parser(
        "create",
        add_help=False,
        help="build a dataset with a data plugin",
        description="Build a dataset with a data plugin: digits dataset create PLUGIN-ID --name NAME "
        "[--workers N] [--max-errors X] --FIELD VALUE ...  Run "
        "`digits dataset create PLUGIN-ID --help` for the plugin's options.",
    )
    create.add_argument("-h", "--help", action="store_true", dest="show_help", help="show this help")
    create.add_argument("plugin_id", nargs="?", metavar="PLUGIN-ID", help="data plugin id (see `digits plugins`)")
    create.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    create.set_defaults(handler=_cleaning(run_create), create_parser=create)

    lister = sub.add_parser("list", help="list dataset jobs", description="List the dataset jobs in the jobs folder.")
    lister.add_argument("--json", action="store_true", help="print JSON instead of a table")
    lister.set_defaults(handler=_cleaning(run_list))

    show = sub.add_parser(
        "show",
        help="show a dataset's counts, shapes, labels and errors",
        description="Show one dataset: counts per stage, feature shape and dtype, labels, skipped entries, timing.",
    )
    show.add_argument("id", help="dataset job id (or a unique prefix)")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.add_argument("--errors", type=int, default=10, metavar="N", help="skipped entries to list (default: 10)")
    show.set_defaults(handler=_cleaning(run_show))

    explore = sub.add_parser(
        "explore",
        help="write a contact sheet of samples with their labels",
        description="Render N records of a stage with their labels into a PNG (DIGITS's Explore DB).",
    )
    explore.add_argument("id", help="dataset job id (or a unique prefix)")
    explore.add_argument("--stage", default="train", choices=["train", "val", "test"], help="stage (default: train)")
    explore.add_argument("-n", type=int, default=24, help="number of samples (default: 24)")
    explore.add_argument("--start", type=int, default=None, help="first record (default: spread over the stage)")
    explore.add_argument("--out", default=None, help="output PNG (default: explore-<id>-<stage>.png)")
    explore.set_defaults(handler=_cleaning(run_explore))

    add_export(sub)

    delete = sub.add_parser("delete", help="delete a dataset job", description="Delete a dataset job folder.")
    delete.add_argument("id", help="dataset job id (or a unique prefix)")
    delete.add_argument("--force", action="store_true", help="also delete a job that is still running")
    delete.set_defaults(handler=_cleaning(run_delete))


def _cleaning(handler: Any) -> Any:
    """Run ``handler`` after removing the build folders killed dataset jobs left behind."""

    def run(args: argparse.Namespace) -> int:
        from ..datasets.publish import remove_stale_builds

        remove_stale_builds(args.jobs_dir)
        return handler(args)

    run.__doc__ = handler.__doc__
    return run


# -- create ----------------------------------------------------------------------


def plugin_create_parser(plugin_id: str, plugin_cls: Any) -> tuple[argparse.ArgumentParser, list[str]]:
    """Return the ``digits dataset create <plugin-id>`` parser and the form field names it has."""
    from ..datasets.options import add_cli_arguments
    from ..forms import add_form_arguments

    parser = argparse.ArgumentParser(
        prog=f"digits dataset create {plugin_id}",
        description=f"Build a dataset with {plugin_cls.get_title()} ({plugin_id}). "
        "Options after the job options come from the plugin's dataset form.",
    )
    job = parser.add_argument_group("job options")
    add_cli_arguments(job)  # declared once in digits_core.datasets.options
    job.add_argument("--json", action="store_true", help="print the result as JSON")
    job.add_argument("--quiet", action="store_true", help="no progress bar")
    reading = parser.add_argument_group("data roots")
    reading.add_argument(
        "--data-root",
        action="append",
        default=[],
        metavar="DIR",
        help="read only under DIR (repeatable; the jobs folder always is one), as the web server "
        "does: path fields and paths inside the plugin's files (list lines, targets rows, "
        "label files, symlinks) elsewhere are refused. Default: no limit",
    )
    cluster = parser.add_argument_group("cluster")
    cluster.add_argument(
        "--ray-address",
        metavar="HOST:PORT",
        default=None,
        help="encode the entries as Ray tasks spread over the Ray cluster at HOST:PORT instead of "
        "local processes (--workers is then ignored); needs the digits-core[ray] extra and "
        "the plugin on every node, and the data at the same path on every node",
    )
    names = add_form_arguments(parser, plugin_cls.get_dataset_form(), title=f"{plugin_id} dataset options")
    return parser, names


class _ProgressBars:
    """A tqdm bar per stage, fed by create_dataset's progress callback."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bar: Any = None  # a tqdm bar while a stage is shown
        self.stage = None
        self.seen = 0

    def __call__(self, snap: dict) -> None:
        if not self.enabled:
            return
        stage = snap.get("stage")
        info = snap.get("stages", {}).get(stage)
        if info is None:
            return
        if stage != self.stage:
            self.close()
            from tqdm import tqdm

            self.bar = tqdm(
                total=info["total"], desc=f"{stage:>5}", unit="img", file=sys.stderr, dynamic_ncols=True, leave=True
            )
            self.stage, self.seen = stage, 0
        self.bar.update(info["done"] - self.seen)
        self.seen = info["done"]
        if info["errors"]:
            self.bar.set_postfix(skipped=info["errors"], refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def run_create(args: argparse.Namespace) -> int:
    """Validate the plugin's form values, build the dataset, print a summary."""
    from ..forms import form_values_from_namespace
    from ..plugins.registry import registry

    if args.show_help or not args.plugin_id:
        args.create_parser.print_help()
        ids = ", ".join(sorted(registry.data_ingestions())) or "none installed"
        print(f"\ndata plugins: {ids}")
        return 0 if args.show_help else 2
    plugin_cls = registry.get_data_ingestion(args.plugin_id)
    parser, names = plugin_create_parser(args.plugin_id, plugin_cls)
    options = parser.parse_args(args.rest)
    values = form_values_from_namespace(options, names)
    from ..config import resolve_jobs_dir
    from ..datasets import create_dataset, open_dataset
    from ..datasets.options import options_from_cli
    from ..paths import check_form_paths, confined_to, resolve_roots

    roots = resolve_roots(options.data_root, resolve_jobs_dir(args.jobs_dir)) if options.data_root else None
    bars = _ProgressBars(enabled=not options.quiet and not options.json)
    try:
        with confined_to(roots), plugin_output_to_stderr():  # the plugin's print()s never precede the JSON
            check_form_paths(values, f'dataset form of plugin "{args.plugin_id}"')
            job = create_dataset(
                args.plugin_id,
                values,
                jobs_dir=args.jobs_dir,
                progress=bars,
                ray_address=options.ray_address,
                **options_from_cli(options),
            )
    finally:
        bars.close()
    ds = open_dataset(job.path)
    if options.json:
        print_json({**ds.summary(), "job": job.to_dict()})
        return 0
    _print_summary(ds, job)
    return 0


def _print_summary(ds: Any, job: Any) -> None:
    counts = ", ".join(f"{s} {ds.count(s)}" for s in ds.stages)
    print(f"Dataset {ds.id} ({ds.name}) created in {job.path}")
    print(f"  records: {counts}")
    print(
        f"  feature: {ds.feature_dtype()} {tuple(ds.feature_shape())}   label: {ds.label_kind} "
        f"{ds.label_dtype} {ds.label_shape}"
    )
    skipped = (ds.info.get("errors") or {}).get("skipped", 0)
    if skipped:
        print(f"  skipped {skipped} entries: see `digits dataset show {ds.id}` or {ds.job_path / 'errors.jsonl'}")
    timing = ds.info.get("timing") or {}
    if timing.get("total_s") is not None:
        print(f"  time: {timing['total_s']:.2f} s ({timing.get('entries_per_s')} entries/s)")


# -- list / show / explore / delete -------------------------------------------------


def job_status_text(job: Any) -> str:
    """Return the status; a Running job whose owner process is gone (killed) shows as Aborted."""
    status = job.status.value
    if status == "Running" and not job.is_alive:
        return "Aborted"
    return status


def run_list(args: argparse.Namespace) -> int:
    """Print the dataset jobs, and the job folders whose records cannot be read (marked Unreadable)."""
    from ..jobs import JobStore
    from ..jobs.health import dataset_record_problem  # as JobStore above: `digits dataset create --help` stays light

    jobs, unreadable = JobStore(args.jobs_dir).scan(kind="dataset")
    problems = {job.id: dataset_record_problem(job.path) for job in jobs}
    if args.json:
        rows_json = []
        for job in jobs:
            problem = problems[job.id]
            status = "Unreadable" if problem else job_status_text(job)
            extra = {"unreadable": {"file": str(problem.file), "reason": problem.reason}} if problem else {}
            rows_json.append({**job.to_dict(), "status": status, **extra})
        print_json(rows_json + [entry.to_dict() for entry in unreadable])
        return 0
    if not jobs and not unreadable:
        print("No datasets yet. Create one with `digits dataset create PLUGIN-ID --help`.")
        return 0
    rows = []
    for job in jobs:
        summary = job.data.get("dataset") or {}
        stages = summary.get("stages") or {}
        counts = " ".join(f"{s}={n}" for s, n in stages.items() if n)
        status = "Unreadable" if problems[job.id] else job_status_text(job)
        rows.append([job.id, job.name, job.plugin_id or "", status, counts, summary.get("skipped", "")])
    rows += [[entry.id, "", "", "Unreadable", "", ""] for entry in unreadable]
    print_table(["id", "name", "plugin", "status", "records", "skipped"], rows)
    print_unreadable([*unreadable, *(p for p in problems.values() if p)])
    return 0


def _raise_record_problem(job_path: Any) -> None:
    """Say which file and why when the dataset's ``dataset.json`` cannot be read as a dataset record."""
    from ..jobs.health import dataset_record_problem  # as JobStore in the commands: `--help` stays light

    problem = dataset_record_problem(job_path)
    if problem is not None:
        raise problem


def run_show(args: argparse.Namespace) -> int:
    """Print one dataset's metadata, labels and skipped entries."""
    from ..datasets import open_dataset
    from ..datasets.reader import DATASET_DIRNAME, read_errors_report
    from ..jobs import JobStore

    job = JobStore(args.jobs_dir).get(args.id, kind="dataset")
    _raise_record_problem(job.path)
    published = (job.path / DATASET_DIRNAME / "dataset.json").is_file()
    ds = open_dataset(job.path) if published else None
    errors = read_errors_report(job.path)
    if args.json:
        data = {
            "job": {**job.to_dict(), "status": job_status_text(job)},
            "dataset": ds.summary() if ds else None,
            "skipped_entries": errors,
        }
        print_json(data)
        return 0
    print(f"Dataset job {job.id}  name: {job.name}  plugin: {job.plugin_id}  status: {job_status_text(job)}")
    print(f"  folder: {job.path}")
    if job.error:
        print(f"  error: {job.error}")
    if ds is None:
        print("  no published dataset")
    else:
        for stage in ds.stages:
            enc = ", ".join(f"{k} {v}" for k, v in ds.feature_encodings(stage).items())
            print(f"  {stage:>5}: {ds.count(stage)} records ({enc})")
        layout = ds.info.get("layout") == "DHWC"  # a volume dataset (issue 29): cases differ in D, H, W
        print(f"  feature: {ds.feature_dtype()} {tuple(ds.feature_shape())} ({'D, H, W, C' if layout else 'H, W, C'})")
        if layout:
            print(f"  median spacing: {ds.info.get('median_spacing')} mm (D, H, W)")
        print(f"  label: {ds.label_kind} {ds.label_dtype} {ds.label_shape}")
        mean = ds.info.get("mean")
        if mean:
            print(
                f"  mean: {mean['file']} (float32, from {mean['images']} train images"
                f"{'' if mean.get('exact') else ', a sample'})"
            )
        labels = ds.class_labels
        if labels:
            per_class = {s: ds.label_histogram(s) or [] for s in ds.stages}
            unit = {"mask": "pixels", "volume": "voxels"}.get(ds.label_kind, "records")
            print(f"  classes ({len(labels)}; {unit} per stage):")
            for i, name in enumerate(labels[:50]):
                counts = " ".join(f"{s}={c[i] if i < len(c) else 0}" for s, c in per_class.items())
                print(f"    {i:>3} {name}  {counts}".rstrip())
            if len(labels) > 50:
                print(f"    ... {len(labels) - 50} more")
        timing = ds.info.get("timing") or {}
        if timing:
            print(
                f"  timing: itemize {timing.get('itemize_s')} s, encode {timing.get('encode_s')} s, "
                f"total {timing.get('total_s')} s, {ds.info.get('workers')} workers"
            )
    if errors:
        print(f"  skipped entries: {len(errors)}")
        for item in errors[: max(0, args.errors)]:
            print(f"    [{item.get('stage')}] {item.get('entry')}: {item.get('error')}")
        if len(errors) > args.errors:
            print(f"    ... {len(errors) - args.errors} more in {job.path / 'errors.jsonl'}")
    return 0


def run_explore(args: argparse.Namespace) -> int:
    """Write a contact sheet PNG of a stage."""
    from ..datasets import open_dataset
    from ..datasets.explore import contact_sheet

    ds = open_dataset(args.id, jobs_dir=args.jobs_dir)
    _raise_record_problem(ds.job_path)
    if args.n < 1:
        raise DatasetError(f"-n must be at least 1, not {args.n}")
    sheet = contact_sheet(ds, args.stage, args.n, start=args.start)
    out = args.out or f"explore-{ds.id}-{args.stage}.png"
    try:
        sheet.save(out, format="PNG")
    except OSError as exc:
        raise DatasetError(f"Cannot write {out}: {exc}") from exc
    print(out)
    return 0


def run_delete(args: argparse.Namespace) -> int:
    """Delete a dataset job folder."""
    from ..jobs import JobStore
    from ..jobs.record import JobRecordError  # as JobStore above: `digits dataset create --help` stays light

    store = JobStore(args.jobs_dir)
    try:
        job = store.get(args.id, kind="dataset")
    except JobRecordError as exc:  # its job.json cannot be read: remove the folder as it is (unless a process owns it)
        store.delete(args.id)
        print(f"Deleted job {exc.file.parent.name} (its {exc.file.name} could not be read: {exc.reason})")
        return 0
    if job_status_text(job) == "Running" and not args.force:
        raise JobStateError(
            f"Dataset job {job.id} is still running (pid {job.data.get('pid')}); wait for it, or use --force."
        )
    store.delete(job.id)
    print(f"Deleted dataset job {job.id}")
    return 0
