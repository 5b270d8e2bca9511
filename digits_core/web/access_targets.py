"""What a request names, for the accounts gate (:mod:`digits_core.web.accounts_views`), and the job store that
hides from a signed-in user the jobs it may not read.

A rule's location (``RULES``) says where the request names its object: a URL part (``"job_id"``, ``"name"``, ...),
a form or JSON field (``"param:KEY"``), a sweep's URL part (``"sweep:ARG"``: its ``sweep.json`` holds owner and
sharing) or a query argument listing job ids (``"jobs:KEY"``). :func:`request_target` turns it into the object's id
and :class:`~digits_core.accounts.JobAccess`.
"""

from __future__ import annotations

import re

from flask import g, has_request_context, request

from ..accounts import JobAccess, User, authorize
from ..errors import DigitsError, JobNotFoundError
from ..jobs import Job, JobStore
from ..sweeps.record import read_sweep_record, sweeps_root
from .context import web_context


def _sweep_target(arg: str) -> tuple[str | None, JobAccess | None]:
    """A sweep named by the URL part ``arg`` (``ID`` or ``ID.json``): its ``sweep.json`` holds its owner."""
    value = (request.view_args or {}).get(arg)
    if not isinstance(value, str) or not value:
        return None, None
    sweep_id = value[: -len(".json")] if value.endswith(".json") else value
    root = sweeps_root(web_context().jobs_dir)
    g.digits_missing = f'No sweep "{sweep_id}" in {root}'  # the sweep views' own words for a missing sweep
    if not re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*", sweep_id):
        return sweep_id, None
    try:
        return sweep_id, JobAccess.of(dict(read_sweep_record(root / sweep_id)))
    except (DigitsError, ValueError, OSError):  # none or unreadable: the view answers as without accounts
        return sweep_id, None


def _jobs_target(key: str, user: User) -> tuple[str | None, JobAccess | None]:
    """Of the jobs a query argument lists (``?jobs=A,B``), the first one ``user`` may not read, if any."""
    store = web_context().store
    for value in [part.strip() for part in request.args.get(key, "").split(",") if part.strip()]:
        try:
            job = JobStore.get(store, value)
        except (DigitsError, ValueError, OSError):
            continue  # the view names a missing one as without accounts
        access = JobAccess.of(dict(job.data))
        if not authorize(user, "read", access):
            g.digits_target_text = value
            return job.id, access
    return None, None


def request_target(where: str | None, user: User) -> tuple[str | None, JobAccess | None]:
    """The id and access facts of the job a request names (``(None, None)``: none, or none found)."""
    if where is None:
        return None, None
    if where.startswith("sweep:"):
        return _sweep_target(where[len("sweep:") :])
    if where.startswith("jobs:"):
        return _jobs_target(where[len("jobs:") :], user)
    if where.startswith("param:"):
        key = where[len("param:") :]
        body = request.get_json(silent=True) if request.is_json else None
        value = body.get(key) if isinstance(body, dict) else request.values.get(key)
    else:
        value = (request.view_args or {}).get(where)
    if not isinstance(value, str) or not value:
        return None, None
    g.digits_target_text = value
    store = web_context().store
    try:
        job = JobStore.get(store, value)  # unfiltered: the gate itself decides
    except (DigitsError, ValueError, OSError):  # none, ambiguous or unreadable: the view answers as without accounts
        if where != "name":
            return value, None
        # TF Serving names a model by its job name too: the strictest of the models of that name decides
        named = [j for j in JobStore.scan(store, "model")[0] if j.name == value]
        private = [JobAccess.of(dict(j.data)) for j in named]
        return value, (min(private, key=lambda a: (a.public, a.owner is None, bool(a.groups))) if private else None)
    return job.id, JobAccess.of(dict(job.data))


class AccountJobStore(JobStore):
    """The app's job store: inside a signed-in request, lists and lookups show only the jobs its user may read.

    Pages and the JSON API list jobs through it, so another trainer's private
    jobs are neither listed nor found by id (``JobNotFoundError``: 404).
    """

    def _reader(self) -> User | None:
        return g.get("digits_user") if has_request_context() else None

    def scan(self, kind: str | None = None, *, reap: bool = True):
        jobs, unreadable = super().scan(kind, reap=reap)
        user = self._reader()
        if user is None:
            return jobs, unreadable
        visible = [j for j in jobs if authorize(user, "read", JobAccess.of(dict(j.data)))]
        return visible, (unreadable if user.role == "admin" else [])

    def get(self, job_id: str, kind: str | None = None) -> Job:
        job = super().get(job_id, kind)
        user = self._reader()
        if user is not None and not authorize(user, "read", JobAccess.of(dict(job.data))):
            raise JobNotFoundError(f'Job "{job_id}" does not exist in {self.root}.')
        return job
