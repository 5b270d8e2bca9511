"""``digits model list``: the model jobs, and every model record that cannot be read (marked Unreadable)."""

from __future__ import annotations

import argparse
from typing import Any

from ..engine.jobio import read_model_info
from ..jobs import JobStore
from ..jobs.model import MODEL_FILE, model_record_problem
from ..jobs.store import UnreadableJob
from .output import print_json, print_table, print_unreadable


def run_list(args: argparse.Namespace) -> int:
    """Print the model jobs; a job whose ``job.json`` or ``model.json`` cannot be read is listed Unreadable."""
    jobs, unreadable = JobStore(args.jobs_dir).scan(kind="model")
    group = " ".join(args.group.split()) if args.group else None
    rows: list[list[Any]] = []
    data: list[dict[str, Any]] = []
    problems: list[Any] = list(unreadable if group is None else [])  # (an unreadable job's group is unknown)
    for job in (j for j in jobs if group is None or j.group == group):
        problem = model_record_problem(job.path)
        info: dict[str, Any] = (
            {} if problem else dict(read_model_info(job.path)) if (job.path / MODEL_FILE).is_file() else {}
        )
        best = info.get("best_metric")
        status = "Unreadable" if problem else job.status.value
        rows.append(
            [
                job.id,
                job.name,
                status,
                job.group or "",
                info.get("network", job.network),
                info.get("dataset_id", job.dataset_id),
                info.get("last_epoch"),
                f"{info.get('best_metric_name', '')} {best:.4f}" if isinstance(best, float) else "",
            ]
        )
        extra = {"unreadable": {"file": str(problem.file), "reason": problem.reason}} if problem else {}
        data.append({**job.to_dict(), "model": info, **extra})
        problems += [problem] if problem else []
    if args.json:
        print_json(data + [entry.to_dict() for entry in problems if isinstance(entry, UnreadableJob)])
        return 0
    rows += [[entry.id, "", "Unreadable", "", "", "", "", ""] for entry in problems if isinstance(entry, UnreadableJob)]
    if rows:
        print_table(["id", "name", "status", "group", "network", "dataset", "epoch", "best"], rows)
        print_unreadable(problems)
    elif args.group:
        print(f'No model job in group "{args.group}".')
    else:
        print("No model jobs yet. Train one with `digits train --dataset ID --network lenet`.")
    return 0
