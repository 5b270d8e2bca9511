"""The web app's state, typed: built once by :func:`digits_core.web.app.create_app`, read through :func:`web_context`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flask import current_app, g, has_request_context

from ..accounts.authz import JobAccess, authorize
from ..jobs import JobStore
from ..paths import fence

if TYPE_CHECKING:
    from jinja2 import Environment

    from ..accounts.store import User
    from ..scheduler import Scheduler
    from .inference_worker import InferenceWorker
    from .login import LoginState


@dataclass
class WebContext:
    """What every web handler reads of the server: kept as ``app.extensions["digits"]``.

    Attributes:
        jobs_dir: The server's jobs folder.
        store: The job store over it.
        scheduler: The queue of dataset and training jobs.
        inference_worker: The process that runs inference requests (started on the first one).
        login: Login sessions and throttling.
        plugin_env: The Jinja environment plugin templates render in (made on first use).
        sweeps: The searches started by this server, by sweep id.
    """

    jobs_dir: Path
    store: JobStore
    scheduler: Scheduler
    inference_worker: InferenceWorker
    login: LoginState
    plugin_env: Environment | None = None
    sweeps: dict[str, Any] = field(default_factory=dict)

    # Read as a mapping too (``ext["store"]``): embedding code and tests written before the dataclass.
    def __getitem__(self, key: str) -> Any:
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        setattr(self, key, value)

    def get(self, key: str, default: Any = None) -> Any:
        """The field ``key``, or ``default`` when it is unset (``None``) or not a field."""
        value = getattr(self, key, None) if key in self.__dataclass_fields__ else None
        return default if value is None else value


def web_context() -> WebContext:
    """The running app's :class:`WebContext` (inside a request or an app context)."""
    return current_app.extensions["digits"]


def may_read(record: Mapping[str, Any]) -> bool:
    """Whether this request's signed-in user may read a job or sweep record (always without accounts).

    For lists a view builds from records of its own (the sweeps index), as the job store's listings do for jobs.
    """
    user = g.get("digits_user") if has_request_context() else None
    return user is None or authorize(user, "read", JobAccess.of(dict(record)))


def request_data_roots() -> list[str]:
    """The data roots of this request: the server's, or narrower for a user given roots of its own.

    The accounts gate sets ``g.digits_data_roots`` for such a user (:func:`digits_core.accounts.narrow_roots`);
    a job made in the request records these roots, so its worker reads under them too. With accounts, the jobs
    folder is fenced (:func:`digits_core.paths.fence`): inside it, only the folders of the jobs the signed-in
    user may read (another user's private job reads as outside the roots, as a job that does not exist).
    """
    return request_roots_lister()()


def request_roots_lister() -> Callable[[], list[str]]:
    """:func:`request_data_roots` later: who asks and which roots are taken now, the readable jobs listed when called.

    Every request runs confined to it (listing the jobs only when the request checks a path).
    """
    narrowed = g.get("digits_data_roots") if has_request_context() else None
    roots = list(narrowed) if narrowed is not None else list(current_app.config["DIGITS_DATA_ROOTS"])
    if not (has_request_context() and "digits_user" in g):  # no accounts: the server's roots, as before
        return lambda: list(roots)
    jobs_dir, user = web_context().jobs_dir, g.digits_user
    return lambda: [*roots, *fence(jobs_dir, _readable_job_folders(jobs_dir, user))]


def _readable_job_folders(jobs_dir: Path, user: User | None) -> list[Path]:
    """The folders of the jobs ``user`` may read (none for nobody); a folder without a readable job.json is none."""
    if user is None:
        return []
    jobs, _ = JobStore(jobs_dir).scan(reap=False)
    return [job.path for job in jobs if authorize(user, "read", JobAccess.of(dict(job.data)))]
