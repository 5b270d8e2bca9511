"""``digits plugins``: list the plugins discovery found, with their status."""

from __future__ import annotations

import argparse
from typing import Any

from .output import print_json, print_table


def register(subparsers: Any) -> None:
    """Add the ``plugins`` command."""
    parser = subparsers.add_parser(
        "plugins",
        help="list installed plugins",
        description="List the data, view and hook plugins found through entry points, "
        "with their distribution, version and status. Failed plugins show their error.",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--all", action="store_true", help="also list disabled plugins")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the plugin records."""
    import logging

    from ..plugins.registry import registry

    # The listing shows each failure itself; the loader's warnings would repeat them.
    logging.getLogger("digits_core.plugins").setLevel(logging.ERROR)
    records = registry.records(include_disabled=args.all)
    if args.json:
        print_json([r.to_dict() for r in records])
        return 0
    if not records:
        print("No plugins found. Install one, e.g. `pip install -e plugins/data_images`.")
        return 0
    rows = []
    for r in records:
        detail = r.title or ""
        if r.kind == "hooks" and r.hooks:
            detail = ", ".join(r.hooks)
        rows.append(
            [r.kind, r.id or r.name, detail, r.category or "", r.distribution or r.source, r.version or "", r.status]
        )
    print_table(["kind", "id", "title", "category", "distribution", "version", "status"], rows)
    for r in records:
        if r.error and r.status != "loaded":
            print(f"\n{r.status}: {r.id or r.name} ({r.distribution or r.source}): {r.error}")
    return 0
