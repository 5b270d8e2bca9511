"""The one authorisation rule: :func:`authorize` decides every route from (user, action, object)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .store import User

#: Roles, least to most: viewer reads, annotator reads (review queues when they come), trainer creates and manages
#: its own jobs, admin does everything (users included).
ROLES = ("viewer", "annotator", "trainer", "admin")
#: What a request does: read (pages, downloads, inference with a model one may read), create (new jobs, from an
#: object one may read when one is named), manage (change, abort, resume, delete a job), admin (users, audit log,
#: actions over many jobs at once).
ACTIONS = ("read", "create", "manage", "admin")
#: Roles that may create jobs.
CREATORS = ("trainer", "admin")


@dataclass(frozen=True)
class JobAccess:
    """Who a job belongs to, as :func:`authorize` reads it.

    Attributes:
        owner: The account that created it (``owned_by`` in ``job.json``); ``None`` for jobs made before accounts
            or from the command line: readable by every account, managed by admins only.
        public: ``visibility: public`` in ``job.json``: every account may read it.
    """

    owner: str | None
    public: bool = False

    @classmethod
    def of(cls, record: dict) -> JobAccess:
        """The access facts of a job record (a ``job.json`` mapping); odd values count as absent."""
        owner = record.get("owned_by")
        return cls(owner if isinstance(owner, str) and owner else None, record.get("visibility") == "public")


def authorize(user: User | None, action: str, obj: JobAccess | None = None) -> bool:
    """Whether ``user`` may do ``action`` on ``obj`` (``None``: no particular job, e.g. a list or a new job).

    Args:
        user: The signed-in account (``None``: nobody, refused).
        action: One of :data:`ACTIONS`; anything else is refused.
        obj: The job the request targets, or ``None``.
    """
    if user is None or user.disabled or action not in ACTIONS or user.role not in ROLES:
        return False
    if user.role == "admin":
        return True
    if action == "admin":
        return False
    readable = obj is None or obj.public or obj.owner is None or obj.owner == user.name
    if action == "read":
        return readable
    if action == "create":
        return user.role in CREATORS and readable
    # manage: only one's own job (never a job without owner, nor a public one of someone else)
    return user.role in CREATORS and obj is not None and obj.owner == user.name
