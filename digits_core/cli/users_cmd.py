"""``digits users``: the accounts of a shared server (users, roles, API tokens) in the jobs folder.

Passwords are read from a prompt (twice), or from standard input with
``--password-stdin`` (one line), never from the command line, where other
users of the machine could read them in the process list.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from .output import print_json, print_table

if TYPE_CHECKING:
    from ..accounts import AccountStore
    from ..accounts.audit import AuditLog

ROLES = ("viewer", "annotator", "trainer", "admin")  # digits_core.accounts.ROLES, without importing argon2 for --help


def register(subparsers: Any) -> None:
    """Add the ``users`` command and its sub-commands."""
    parser = subparsers.add_parser(
        "users",
        help="manage the user accounts of a shared server",
        description="Users, roles and API tokens of the jobs folder's server (digits serve). A jobs folder "
        "without users has no accounts: the server is then loopback-only or uses --auth-token, as before. "
        "The first admin is made here: digits users add NAME --role admin.",
    )
    sub = parser.add_subparsers(dest="users_command", metavar="ACTION", required=True)
    add = sub.add_parser("add", help="add a user (asks for its password)")
    add.add_argument("name")
    add.add_argument("--role", choices=ROLES, required=True, help="what the user may do")
    add.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    lst = sub.add_parser("list", help="list users")
    lst.add_argument("--json", action="store_true", help="print JSON instead of a table")
    pwd = sub.add_parser("passwd", help="set a user's password (asks for it)")
    pwd.add_argument("name")
    pwd.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    role = sub.add_parser("role", help="change a user's role")
    role.add_argument("name")
    role.add_argument("role", choices=ROLES)
    rm = sub.add_parser("remove", help="remove a user and its API tokens")
    rm.add_argument("name")
    dis = sub.add_parser("disable", help="disable a user (no login, its tokens refused)")
    dis.add_argument("name")
    ena = sub.add_parser("enable", help="enable a disabled user again")
    ena.add_argument("name")
    tok = sub.add_parser("token", help="create an API token for a user (printed once)")
    tok.add_argument("name", help="the user")
    tok.add_argument("token_name", metavar="TOKEN_NAME", help="a name for the token, e.g. laptop")
    tok.add_argument("--days", type=float, default=90, help="days until it expires (default: 90; 0: never)")
    tokens = sub.add_parser("tokens", help="list API tokens (never their secrets)")
    tokens.add_argument("name", nargs="?", help="only this user's")
    revoke = sub.add_parser("revoke", help="revoke an API token")
    revoke.add_argument("name", help="the user")
    revoke.add_argument("token_name", metavar="TOKEN_NAME")
    group = sub.add_parser("group", help="groups of users (jobs shared with a group are readable to its members)")
    gsub = group.add_subparsers(dest="group_command", metavar="ACTION", required=True)
    gadd = gsub.add_parser("add", help="make a group (if new) and add users to it")
    gadd.add_argument("group")
    gadd.add_argument("users", nargs="*", metavar="USER")
    grm = gsub.add_parser("remove", help="take users out of a group; without users, remove the group")
    grm.add_argument("group")
    grm.add_argument("users", nargs="*", metavar="USER")
    glist = gsub.add_parser("list", help="list groups and their members")
    glist.add_argument("--json", action="store_true", help="print JSON instead of a table")
    roots = sub.add_parser(
        "roots",
        help="data roots of a user or group (inside the server's --data-root folders)",
        description="Give a user or a group data roots of its own: its requests may then name server paths only "
        "under these (and its groups') roots, inside the server's own data roots, which stay the outer bound. "
        "A user without any keeps the server's roots; admins always have the server's.",
    )
    rsub = roots.add_subparsers(dest="roots_command", metavar="ACTION", required=True)
    radd = rsub.add_parser("add", help="give a user (or, with --group, a group) data roots")
    radd.add_argument("name", help="the user, or the group with --group")
    radd.add_argument("paths", nargs="+", metavar="FOLDER")
    radd.add_argument("--group", action="store_true", help="NAME is a group")
    rrm = rsub.add_parser("remove", help="take data roots from a user or group (no FOLDER: all of them)")
    rrm.add_argument("name", help="the user, or the group with --group")
    rrm.add_argument("paths", nargs="*", metavar="FOLDER")
    rrm.add_argument("--group", action="store_true", help="NAME is a group")
    rlist = rsub.add_parser("list", help="list the data roots given to users and groups")
    rlist.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=run)


def _password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    import getpass

    from ..errors import DigitsError

    first = getpass.getpass(f"Password for {args.name}: ")
    if getpass.getpass("Again: ") != first:
        raise DigitsError("the two passwords differ: nothing was changed; run the command again.")
    return first


def run(args: argparse.Namespace) -> int:
    """Run one ``digits users`` action."""
    from ..accounts import AccountStore
    from ..accounts.audit import AuditLog
    from ..config import resolve_jobs_dir

    root = resolve_jobs_dir(args.jobs_dir)
    store, audit = AccountStore(root), AuditLog(root)
    action, name = args.users_command, str(getattr(args, "name", None) or "")
    if action in ("group", "roots"):
        return _groups_and_roots(args, store, audit)
    if action == "list":
        users = store.list_users()
        if args.json:
            print_json(
                [
                    {
                        "name": u.name,
                        "role": u.role,
                        "disabled": u.disabled,
                        "created": u.created,
                        "groups": list(u.groups),
                    }
                    for u in users
                ]
            )
        elif not users:
            print("No users: this server has no accounts. Add the first admin with: digits users add NAME --role admin")
        else:
            rows = [[u.name, u.role, "disabled" if u.disabled else "active", ", ".join(u.groups)] for u in users]
            print_table(["name", "role", "status", "groups"], rows)
        return 0
    if action == "tokens":
        rows = [
            [t.user, t.name, _when(t.expires), "revoked" if t.revoked else "live"]
            for t in store.list_tokens(name or None)
        ]
        print_table(["user", "token", "expires", "status"], rows) if rows else print("No API tokens.")
        return 0
    if action == "add":
        store.add_user(name, args.role, _password(args))
        print(f"Added {args.role} {name}.")
    elif action == "passwd":
        store.set_password(name, _password(args))
        print(f"Password of {name} changed.")
    elif action == "role":
        store.set_role(name, args.role)
        print(f"{name} is now {args.role}.")
    elif action == "remove":
        store.remove_user(name)
        print(f"Removed {name}.")
    elif action in ("disable", "enable"):
        store.set_disabled(name, action == "disable")
        print(f"{name} {action}d.")
    elif action == "token":
        token = store.create_token(name, args.token_name, days=args.days or None)
        print(token)
        print(
            f"(API token {args.token_name} of {name}: shown only now; send it as 'Authorization: Bearer ...')",
            file=sys.stderr,
        )
    elif action == "revoke":
        store.revoke_token(name, args.token_name)
        print(f"Revoked token {args.token_name} of {name}.")
    audit.record("cli", f"users {action}", name, allowed=True, address="local")
    return 0


def _groups_and_roots(args: argparse.Namespace, store: AccountStore, audit: AuditLog) -> int:
    """``digits users group ...`` and ``digits users roots ...``."""
    if args.users_command == "group":
        action, name = args.group_command, args.group if args.group_command != "list" else ""
        if action == "list":
            groups = store.list_groups()
            if args.json:
                print_json(groups)
            else:
                rows = [[g, ", ".join(m)] for g, m in groups.items()]
                print_table(["group", "members"], rows) if rows else print("No groups.")
            return 0
        if action == "add":
            store.add_to_group(name, args.users)
            print(f"Group {name}: " + (f"added {', '.join(args.users)}." if args.users else "made."))
        else:
            store.remove_from_group(name, args.users)
            print(f"Group {name}: " + (f"took out {', '.join(args.users)}." if args.users else "removed."))
        audit.record("cli", f"users group {action}", name, allowed=True, address="local")
        return 0
    action = args.roots_command
    if action == "list":
        given = store.list_roots()
        if args.json:
            print_json([{"kind": k, "name": n, "path": p} for k, n, p in given])
        else:
            rows = [[f"{k} {n}", p] for k, n, p in given]
            print_table(["given to", "data root"], rows) if rows else print(
                "No data roots given: all use the server's."
            )
        return 0
    kind = "group" if args.group else "user"
    if action == "add":
        added = store.add_roots(kind, args.name, args.paths)
        print(f"{kind} {args.name} may read under: {', '.join(added)} (inside the server's data roots).")
    else:
        store.remove_roots(kind, args.name, args.paths)
        print(f"{kind} {args.name}: data roots removed.")
    audit.record("cli", f"users roots {action}", args.name, allowed=True, address="local")
    return 0


def _when(stamp: float | None) -> str:
    import time

    return "never" if stamp is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))
