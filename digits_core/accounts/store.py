"""Users and API tokens in the jobs folder's own SQLite file (``accounts.sqlite3``).

* **Passwords** are hashed with argon2id (``argon2-cffi``) at OWASP's
  minimum or above (:data:`ARGON2_MEMORY_KIB` = 19 MiB, :data:`ARGON2_TIME`
  = 2, :data:`ARGON2_PARALLELISM` = 1); a hash made with weaker parameters is
  upgraded at the next right login. There is no default user or password:
  the first admin is made with ``digits users add NAME --role admin``.
* **API tokens** are 32 random bytes shown once; the file keeps only their
  SHA-256 (a fast hash is right for a random secret: there is nothing to
  guess), their name, expiry and whether they were revoked. A revoked or
  expired token, or one of a disabled user, is refused on its next use.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from ..errors import DigitsError
from .authz import ROLES

#: The file in the jobs folder.
FILENAME = "accounts.sqlite3"
#: argon2id memory in KiB (OWASP: at least 19 MiB with t=2, p=1).
ARGON2_MEMORY_KIB = 19 * 1024
#: argon2id passes.
ARGON2_TIME = 2
#: argon2id lanes.
ARGON2_PARALLELISM = 1
#: Shortest password accepted.
MIN_PASSWORD_LENGTH = 8
#: Prefix of every API token (so a leaked one is recognisable in logs and scanners).
TOKEN_PREFIX = "dgt_"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS users (
    name TEXT PRIMARY KEY, role TEXT NOT NULL, password_hash TEXT NOT NULL,
    disabled INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL, source TEXT NOT NULL DEFAULT 'local');
CREATE TABLE IF NOT EXISTS tokens (
    digest TEXT PRIMARY KEY, user TEXT NOT NULL REFERENCES users(name) ON DELETE CASCADE, name TEXT NOT NULL,
    created REAL NOT NULL, expires REAL, revoked INTEGER NOT NULL DEFAULT 0, UNIQUE (user, name));
CREATE TABLE IF NOT EXISTS groups (name TEXT PRIMARY KEY, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS members (
    grp TEXT NOT NULL REFERENCES groups(name) ON DELETE CASCADE,
    user TEXT NOT NULL REFERENCES users(name) ON DELETE CASCADE, PRIMARY KEY (grp, user));
CREATE TABLE IF NOT EXISTS roots (kind TEXT NOT NULL, name TEXT NOT NULL, path TEXT NOT NULL, PRIMARY KEY (kind, name, path));
"""


class AccountError(DigitsError):
    """A users or tokens command that cannot be done (unknown user, bad role, short password, ...)."""


@dataclass(frozen=True)
class User:
    """One account.

    Attributes:
        name: The login name.
        role: One of :data:`~digits_core.accounts.authz.ROLES`.
        disabled: A disabled account cannot log in, and its tokens are refused.
        created: Unix time.
        groups: The groups it is a member of (jobs shared with one of them are readable to it).
    """

    name: str
    role: str
    disabled: bool = False
    created: float = 0.0
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class TokenInfo:
    """An API token as listed (never its secret)."""

    user: str
    name: str
    created: float
    expires: float | None
    revoked: bool


def _hasher() -> PasswordHasher:
    return PasswordHasher(time_cost=ARGON2_TIME, memory_cost=ARGON2_MEMORY_KIB, parallelism=ARGON2_PARALLELISM)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class AccountStore:
    """The accounts of one jobs folder.

    Args:
        jobs_dir: The jobs folder; the database is ``jobs_dir/accounts.sqlite3`` (made on the first write).
    """

    def __init__(self, jobs_dir: str | os.PathLike):
        self.path = Path(jobs_dir) / FILENAME
        self._dummy_hash: str | None = None

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=30)
        try:
            conn.execute("PRAGMA foreign_keys = ON")
            conn.executescript(_SCHEMA)
            columns = {row[1] for row in conn.execute("PRAGMA table_info(users)")}
            if "source" not in columns:  # a file made before single sign-on: its users are all local
                conn.execute("ALTER TABLE users ADD COLUMN source TEXT NOT NULL DEFAULT 'local'")
            with conn:  # one transaction: committed, or rolled back on error
                yield conn
        finally:
            conn.close()
        if os.name == "posix":
            os.chmod(self.path, 0o600)  # password hashes: the owner only

    def enabled(self) -> bool:
        """True when this jobs folder has at least one user (the server then asks everyone to sign in)."""
        if not self.path.exists():
            return False
        with self._db() as db:
            return db.execute("SELECT 1 FROM users LIMIT 1").fetchone() is not None

    # -- users ------------------------------------------------------------------------------

    def add_user(self, name: str, role: str, password: str) -> User:
        """Add a user.

        Raises:
            AccountError: The name is taken or malformed, the role unknown or the password too short.
        """
        _check_name(name)
        _check_role(role)
        _check_password(password)
        user = User(name, role, False, time.time())
        with self._db() as db:
            if db.execute("SELECT 1 FROM users WHERE name = ?", (name,)).fetchone():
                raise AccountError(f'user "{name}" exists already: pick another name, or use "digits users passwd".')
            db.execute(
                "INSERT INTO users (name, role, password_hash, disabled, created) VALUES (?, ?, ?, 0, ?)",
                (name, role, _hasher().hash(password), user.created),
            )
        return user

    def get_user(self, name: str) -> User | None:
        """The user ``name``, or ``None``."""
        if not self.path.exists():
            return None
        with self._db() as db:
            row = db.execute("SELECT name, role, disabled, created FROM users WHERE name = ?", (name,)).fetchone()
            groups = _groups_of(db, name)
        return User(row[0], row[1], bool(row[2]), row[3], groups) if row else None

    def list_users(self) -> list[User]:
        """Every user, by name."""
        if not self.path.exists():
            return []
        with self._db() as db:
            rows = db.execute("SELECT name, role, disabled, created FROM users ORDER BY name").fetchall()
            return [User(r[0], r[1], bool(r[2]), r[3], _groups_of(db, r[0])) for r in rows]

    def _require(self, db: sqlite3.Connection, name: str) -> None:
        if not db.execute("SELECT 1 FROM users WHERE name = ?", (name,)).fetchone():
            raise AccountError(f'no user "{name}": see "digits users list".')

    def set_password(self, name: str, password: str) -> None:
        """Give ``name`` a new password."""
        _check_password(password)
        with self._db() as db:
            self._require(db, name)
            db.execute("UPDATE users SET password_hash = ? WHERE name = ?", (_hasher().hash(password), name))

    def set_role(self, name: str, role: str) -> None:
        """Give ``name`` another role."""
        _check_role(role)
        with self._db() as db:
            self._require(db, name)
            db.execute("UPDATE users SET role = ? WHERE name = ?", (role, name))

    def set_disabled(self, name: str, disabled: bool = True) -> None:
        """Disable (or enable again) ``name``: a disabled user cannot log in and its tokens are refused."""
        with self._db() as db:
            self._require(db, name)
            db.execute("UPDATE users SET disabled = ? WHERE name = ?", (int(disabled), name))

    def remove_user(self, name: str) -> None:
        """Remove ``name`` and its tokens (its jobs keep its name as owner: admins manage them)."""
        with self._db() as db:
            self._require(db, name)
            db.execute("DELETE FROM users WHERE name = ?", (name,))
            db.execute("DELETE FROM roots WHERE kind = 'user' AND name = ?", (name,))

    def verify_password(self, name: str, password: str) -> User | None:
        """The user when ``password`` is right and the account enabled, else ``None``.

        An unknown name costs one hash too, so timing does not tell which names exist.
        """
        hasher = _hasher()
        with self._db() as db:
            row = db.execute(
                "SELECT name, role, disabled, created, password_hash FROM users WHERE name = ?", (name,)
            ).fetchone()
            if row is None:
                if self._dummy_hash is None:
                    self._dummy_hash = hasher.hash(secrets.token_hex(16))
                _verify(hasher, self._dummy_hash, password)
                return None
            if not _verify(hasher, row[4], password) or row[2]:
                return None
            if hasher.check_needs_rehash(row[4]):
                db.execute("UPDATE users SET password_hash = ? WHERE name = ?", (hasher.hash(password), name))
            groups = _groups_of(db, name)
        return User(row[0], row[1], bool(row[2]), row[3], groups)

    def sign_in_external(self, name: str, role: str, source: str = "oidc") -> User | None:
        """The user ``name`` signed in by an identity provider, made or given ``role`` now; ``None`` when refused.

        Refused when a local (password) user has that name, so a provider can never
        take over a local account, or when the user is disabled.
        """
        _check_name(name)
        _check_role(role)
        with self._db() as db:
            row = db.execute("SELECT disabled, created, source FROM users WHERE name = ?", (name,)).fetchone()
            if row is None:
                created = time.time()
                db.execute(
                    "INSERT INTO users (name, role, password_hash, disabled, created, source) VALUES (?, ?, '!', 0, ?, ?)",
                    (name, role, created, source),
                )
                return User(name, role, False, created)
            if row[2] != source or row[0]:
                return None
            db.execute("UPDATE users SET role = ? WHERE name = ?", (role, name))
            groups = _groups_of(db, name)
        return User(name, role, False, row[1], groups)

    # -- API tokens -----------------------------------------------------------------------------

    def create_token(self, user: str, name: str, *, days: float | None = 90) -> str:
        """A new API token of ``user`` named ``name``, valid ``days`` (``None``: no expiry); returned once.

        Raises:
            AccountError: No such user, a bad name, or ``user`` has a token of that name already.
        """
        _check_name(name, what="token name")
        if days is not None and days <= 0:
            raise AccountError(f"--days {days}: give a positive number of days.")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        now = time.time()
        with self._db() as db:
            self._require(db, user)
            if db.execute("SELECT 1 FROM tokens WHERE user = ? AND name = ?", (user, name)).fetchone():
                raise AccountError(f'user "{user}" has a token named "{name}" already: revoke it or pick another name.')
            db.execute(
                "INSERT INTO tokens (digest, user, name, created, expires, revoked) VALUES (?, ?, ?, ?, ?, 0)",
                (_digest(token), user, name, now, None if days is None else now + days * 86400),
            )
        return token

    def token_user(self, token: str | None) -> User | None:
        """The user an API token belongs to, if it is live (not revoked or expired, its user enabled)."""
        if not token or not token.startswith(TOKEN_PREFIX) or not self.path.exists():
            return None
        digest = _digest(token)
        with self._db() as db:
            row = db.execute(
                "SELECT u.name, u.role, u.disabled, u.created, t.expires, t.revoked, t.digest FROM tokens t "
                "JOIN users u ON u.name = t.user WHERE t.digest = ?",
                (digest,),
            ).fetchone()
            groups = _groups_of(db, row[0]) if row else ()
        if row is None or not hmac.compare_digest(row[6], digest) or row[5] or row[2]:
            return None
        if row[4] is not None and row[4] <= time.time():
            return None
        return User(row[0], row[1], False, row[3], groups)

    def list_tokens(self, user: str | None = None) -> list[TokenInfo]:
        """The tokens of ``user`` (``None``: everyone's), never their secrets."""
        if not self.path.exists():
            return []
        query = "SELECT user, name, created, expires, revoked FROM tokens"
        with self._db() as db:
            rows = db.execute(
                query + (" WHERE user = ?" if user else "") + " ORDER BY user, name", (user,) if user else ()
            ).fetchall()
        return [TokenInfo(r[0], r[1], r[2], r[3], bool(r[4])) for r in rows]

    def revoke_token(self, user: str, name: str) -> None:
        """Revoke the token ``name`` of ``user``: refused from its next use on."""
        with self._db() as db:
            done = db.execute("UPDATE tokens SET revoked = 1 WHERE user = ? AND name = ?", (user, name)).rowcount
        if not done:
            raise AccountError(f'user "{user}" has no token named "{name}": see "digits users tokens {user}".')

    # -- groups -------------------------------------------------------------------------------

    def add_to_group(self, group: str, users: list[str] | tuple[str, ...] = ()) -> None:
        """Make ``group`` (if new) and add ``users`` to it.

        Raises:
            AccountError: A malformed group name, or one of ``users`` does not exist (nothing is changed).
        """
        _check_name(group, what="group name")
        with self._db() as db:
            for name in users:
                self._require(db, name)
            db.execute("INSERT OR IGNORE INTO groups (name, created) VALUES (?, ?)", (group, time.time()))
            db.executemany("INSERT OR IGNORE INTO members (grp, user) VALUES (?, ?)", [(group, u) for u in users])

    def remove_from_group(self, group: str, users: list[str] | tuple[str, ...] = ()) -> None:
        """Take ``users`` out of ``group``; without users, remove the group itself (and its data roots).

        Jobs shared with a removed group keep its name: nobody reads them through it until a group of that name
        is made again.
        """
        with self._db() as db:
            if not db.execute("SELECT 1 FROM groups WHERE name = ?", (group,)).fetchone():
                raise AccountError(f'no group "{group}": see "digits users group list".')
            if users:
                db.executemany("DELETE FROM members WHERE grp = ? AND user = ?", [(group, u) for u in users])
            else:
                db.execute("DELETE FROM groups WHERE name = ?", (group,))
                db.execute("DELETE FROM roots WHERE kind = 'group' AND name = ?", (group,))

    def list_groups(self) -> dict[str, list[str]]:
        """Every group, by name, with its members."""
        if not self.path.exists():
            return {}
        with self._db() as db:
            groups: dict[str, list[str]] = {r[0]: [] for r in db.execute("SELECT name FROM groups ORDER BY name")}
            for grp, user in db.execute("SELECT grp, user FROM members ORDER BY grp, user"):
                groups.setdefault(grp, []).append(user)
        return groups

    def sync_groups(self, name: str, wanted: list[str], managed: list[str]) -> User | None:
        """Make ``name`` a member of the ``wanted`` groups and of no other of the ``managed`` ones (single sign-on).

        Groups outside ``managed`` (made by an admin with ``digits users group``) are left as they are; wanted
        groups that do not exist yet are made. Returns the user as it now is.
        """
        for group in {*wanted, *managed}:
            _check_name(group, what="group name")
        with self._db() as db:
            self._require(db, name)
            for group in wanted:
                db.execute("INSERT OR IGNORE INTO groups (name, created) VALUES (?, ?)", (group, time.time()))
                db.execute("INSERT OR IGNORE INTO members (grp, user) VALUES (?, ?)", (group, name))
            for group in set(managed) - set(wanted):
                db.execute("DELETE FROM members WHERE grp = ? AND user = ?", (group, name))
        return self.get_user(name)

    def group_exists(self, group: str) -> bool:
        """True when ``group`` was made (``digits users group add``)."""
        return group in self.list_groups()

    # -- data roots per user or group ----------------------------------------------------------

    def add_roots(self, kind: str, name: str, paths: list[str] | tuple[str, ...]) -> list[str]:
        """Give the user or group ``name`` (``kind``: ``"user"`` or ``"group"``) these data roots; returns them resolved.

        Raises:
            AccountError: No such user or group, or a path that is not an existing folder.
        """
        resolved = [_root_path(p) for p in paths]
        with self._db() as db:
            self._require_owner(db, kind, name)
            db.executemany(
                "INSERT OR IGNORE INTO roots (kind, name, path) VALUES (?, ?, ?)", [(kind, name, p) for p in resolved]
            )
        return resolved

    def remove_roots(self, kind: str, name: str, paths: list[str] | tuple[str, ...] = ()) -> None:
        """Take these data roots (none given: all of them) from the user or group ``name``."""
        with self._db() as db:
            self._require_owner(db, kind, name)
            if not paths:
                db.execute("DELETE FROM roots WHERE kind = ? AND name = ?", (kind, name))
            for p in paths:
                db.execute(
                    "DELETE FROM roots WHERE kind = ? AND name = ? AND path IN (?, ?)",
                    (kind, name, p, os.path.realpath(os.path.expanduser(p))),
                )

    def list_roots(self) -> list[tuple[str, str, str]]:
        """Every data root given: ``(kind, name, path)``, by kind, name and path."""
        if not self.path.exists():
            return []
        with self._db() as db:
            return [tuple(r) for r in db.execute("SELECT kind, name, path FROM roots ORDER BY kind, name, path")]

    def roots_of(self, user: User) -> list[str]:
        """The data roots given to ``user`` and to its groups (empty: none given)."""
        if not self.path.exists():
            return []
        names = [("user", user.name)] + [("group", g) for g in user.groups]
        with self._db() as db:
            found = [
                r[0]
                for kind, name in names
                for r in db.execute("SELECT path FROM roots WHERE kind = ? AND name = ? ORDER BY path", (kind, name))
            ]
        return list(dict.fromkeys(found))

    def _require_owner(self, db: sqlite3.Connection, kind: str, name: str) -> None:
        if kind == "user":
            self._require(db, name)
        elif kind != "group" or not db.execute("SELECT 1 FROM groups WHERE name = ?", (name,)).fetchone():
            raise AccountError(f'no group "{name}": make it with "digits users group add {name}".')


def _groups_of(db: sqlite3.Connection, name: str) -> tuple[str, ...]:
    return tuple(r[0] for r in db.execute("SELECT grp FROM members WHERE user = ? ORDER BY grp", (name,)))


def _root_path(path: str) -> str:
    real = os.path.realpath(os.path.expanduser(path))
    if not os.path.isdir(real):
        raise AccountError(f"data root {path}: not an existing folder; give the folder's path on the server.")
    return real


def _verify(hasher: PasswordHasher, stored: str, password: str) -> bool:
    try:
        return hasher.verify(stored, password)
    except (VerificationError, InvalidHashError):
        return False


def _check_name(name: str, what: str = "user name") -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise AccountError(
            f'{what} "{name}": use 1-64 letters, digits, ".", "_", "-" or "@", starting with a letter or digit.'
        )


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise AccountError(f'role "{role}": choose one of {", ".join(ROLES)}.')


def _check_password(password: str) -> None:
    if not isinstance(password, str) or len(password) < MIN_PASSWORD_LENGTH:
        raise AccountError(f"the password is too short: give at least {MIN_PASSWORD_LENGTH} characters.")
