"""``digits job share``: who besides its owner may read a job of a server with accounts (docs/accounts.md).

Run on the server, by whoever may write its jobs folder (as ``digits users``):
``--group G`` shares the job with the members of group ``G``, ``--public``
makes it readable to every account, ``--private`` undoes both.
"""

from __future__ import annotations

import argparse
from typing import Any

from .output import print_json


def register(subparsers: Any) -> None:
    """Add the ``job`` command and its ``share`` sub-command."""
    parser = subparsers.add_parser(
        "job", help="change a job's sharing (servers with accounts)", description="Work on one job of the jobs folder."
    )
    sub = parser.add_subparsers(dest="job_command", metavar="ACTION", required=True)
    share = sub.add_parser(
        "share",
        help="share a job with a group, make it public, or private again",
        description="A job of a server with accounts is readable by its owner and admins only, unless shared "
        "with a group (its members may read it) or made public (every account may). Only its owner and admins "
        "may change, abort or delete it, shared or not.",
    )
    share.add_argument("job_id", metavar="ID")
    how = share.add_mutually_exclusive_group(required=True)
    how.add_argument("--group", action="append", metavar="G", help="share with group G (repeatable)")
    how.add_argument("--unshare", action="append", metavar="G", help="no longer share with group G (repeatable)")
    how.add_argument("--public", action="store_true", help="every account may read it")
    how.add_argument("--private", action="store_true", help="its owner and admins only: not public, no groups")
    share.add_argument("--json", action="store_true", help="print the job's sharing as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run ``digits job share``."""
    from ..accounts import AccountStore, JobAccess
    from ..accounts.audit import AuditLog
    from ..accounts.store import AccountError
    from ..config import resolve_jobs_dir
    from ..jobs import JobStore

    root = resolve_jobs_dir(args.jobs_dir)
    job = JobStore(root).get(args.job_id)
    known = AccountStore(root).list_groups()
    for group in args.group or ():
        if group not in known:
            raise AccountError(f'--group {group}: no such group; make it with "digits users group add {group}".')
    access = JobAccess.of(dict(job.data))
    groups = [] if args.private else [g for g in access.groups if g not in (args.unshare or ())]
    groups = list(dict.fromkeys([*groups, *(args.group or ())]))
    if args.public:
        job.update(visibility="public")
    elif args.private:
        job.forget("visibility")
    job.update(shared_with=groups) if groups else job.forget("shared_with")
    access = JobAccess.of(dict(job.data))
    AuditLog(root).record("cli", "job share", job.id, allowed=True, address="local")
    state = {"id": job.id, "visibility": "public" if access.public else "private", "groups": list(access.groups)}
    if args.json:
        print_json(state)
    else:
        shared = f", shared with {', '.join(access.groups)}" if access.groups else ""
        print(f"{job.id}: {state['visibility']}{shared}.")
    return 0
