"""User accounts of a shared server: users and roles, API tokens, the one authorisation rule, the audit log.

Everything lives in the jobs folder: ``accounts.sqlite3`` (users and tokens,
:mod:`.store`) and ``audit.jsonl`` (:mod:`.audit`). A jobs folder without
users has no accounts: the server then behaves exactly as before (loopback
only, or ``digits serve --auth-token``). See ``docs/accounts.md``.
"""

from __future__ import annotations

from .authz import ACTIONS, ROLES, JobAccess, authorize, narrow_roots
from .store import AccountStore, User

__all__ = ["ACTIONS", "ROLES", "AccountStore", "JobAccess", "User", "authorize", "narrow_roots"]
