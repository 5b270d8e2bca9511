"""The one authorisation rule: :func:`authorize` decides every route from (user, action, object)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .store import User

#: Roles, least to most: viewer reads, annotator reads and reviews (active-learning review queues), trainer creates
#: and manages its own jobs, admin does everything (users included).
ROLES = ("viewer", "annotator", "trainer", "admin")
#: What a request does: read (pages, downloads, inference with a model one may read), review (work a review queue of
#: a pool one may read: claim, correct, accept, reject), create (new jobs, from an object one may read when one is
#: named), manage (change, share, abort, resume, delete a job), admin (users, audit log, actions over many jobs at
#: once).
ACTIONS = ("read", "review", "create", "manage", "admin")
#: Roles that may create jobs.
CREATORS = ("trainer", "admin")
#: Roles that may work review queues.
REVIEWERS = ("annotator", "trainer", "admin")


@dataclass(frozen=True)
class JobAccess:
    """Who a job belongs to, as :func:`authorize` reads it.

    Attributes:
        owner: The account that created it (``owned_by`` in ``job.json``); ``None`` for jobs made before accounts
            or from the command line: readable by every account, managed by admins only.
        public: ``visibility: public`` in ``job.json``: every account may read it.
        groups: ``shared_with`` in ``job.json``: the members of these groups may read it.
    """

    owner: str | None
    public: bool = False
    groups: tuple[str, ...] = ()

    @classmethod
    def of(cls, record: dict) -> JobAccess:
        """The access facts of a job record (a ``job.json`` mapping); odd values count as absent."""
        owner = record.get("owned_by")
        shared = record.get("shared_with")
        groups = tuple(g for g in shared if isinstance(g, str) and g) if isinstance(shared, list) else ()
        return cls(owner if isinstance(owner, str) and owner else None, record.get("visibility") == "public", groups)


def authorize(user: User | None, action: str, obj: JobAccess | None = None) -> bool:
    """Whether ``user`` may do ``action`` on ``obj`` (``None``: no particular job, e.g. a list or a new job).

    A job is readable by its owner, by the members of the groups it is shared with, by everyone when it is
    public or has no owner, and by admins; only its owner and admins manage it (share it, abort, delete).

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
    readable = (
        obj is None
        or obj.public
        or obj.owner is None
        or obj.owner == user.name
        or any(g in user.groups for g in obj.groups)
    )
    if action == "read":
        return readable
    if action == "review":
        return user.role in REVIEWERS and readable
    if action == "create":
        return user.role in CREATORS and readable
    # manage: only one's own job (never a job without owner, nor a shared or public one of someone else)
    return user.role in CREATORS and obj is not None and obj.owner == user.name


def narrow_roots(server_roots: Sequence[str], given: Sequence[str], keep: Sequence[str] = ()) -> list[str]:
    """The data roots of one user's requests: the server's roots narrowed to those given to the user and its groups.

    The server's roots (``digits serve --data-root``) are the outer bound: a given root inside one of them is kept,
    a given root above one of them counts as that server root, anything else is dropped. Nothing given (the user
    and its groups have no roots): the server's roots, as before accounts had roots. Admins are not narrowed
    (the caller decides).

    Args:
        server_roots: The server's data roots, as real paths.
        given: The roots given to the user and its groups (``digits users roots``), as real paths.
        keep: Roots always kept (the jobs folder, where inference uploads are saved).
    """
    if not given:
        return list(server_roots)
    bound = [Path(r) for r in server_roots]
    out: list[str] = []
    for text in given:
        root = Path(text)
        for outer in bound:
            if root == outer or outer in root.parents:
                out.append(str(root))
            elif root in outer.parents:
                out.append(str(outer))
    return list(dict.fromkeys([*out, *keep]))
