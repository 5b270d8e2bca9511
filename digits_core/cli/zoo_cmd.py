"""``digits zoo``: the lab's model zoo (weights for ``--weights zoo:NAME``); see docs/backbones.md.

Also :func:`check_train_weights`, which ``digits train`` runs before TensorFlow starts, so a missing
weights file fails at once and leaves no job.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..engine import zoo
from ..engine.trainer import check_weights
from ..engine.weights import zoo_dir
from ..errors import FormValidationError
from ..tf_quiet import quiet_tensorflow_startup
from .output import print_json, print_table


def register(subparsers: Any) -> None:
    """Add the ``zoo`` command and its sub-commands."""
    parser = subparsers.add_parser(
        "zoo",
        help="list, add, remove and export backbone weights of the model zoo",
        description="The model zoo ($DIGITS_ZOO, default ~/.digits/zoo): weight files with a manifest.json "
        "(name, file, sha256, source, license, input channels, network), used by "
        "`digits train --network BACKBONE --weights zoo:NAME`.",
    )
    sub = parser.add_subparsers(dest="zoo_command", metavar="ACTION")
    listing = sub.add_parser("list", help="list the zoo's entries")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    listing.set_defaults(handler=run_list)
    add = sub.add_parser(
        "add",
        help="add a weights file, or the encoder of a trained model job",
        description="Add FILE (a .weights.h5 or Keras .h5 file) or, with --from-model, the backbone of a model "
        "job's snapshot (its job, dataset and best metric recorded as provenance).",
    )
    add.add_argument("file", nargs="?", metavar="FILE", help="the weights file")
    add.add_argument("--name", required=True, help="the entry's name (use it as --weights zoo:NAME)")
    add.add_argument("--from-model", metavar="JOB", help="publish the backbone of this model job")
    add.add_argument("--epoch", type=float, default=None, help="the snapshot's epoch (default: the last)")
    add.add_argument("--network", default="", help="FILE: the network the weights fit (e.g. mobilenet_v3_small)")
    add.add_argument("--channels", type=int, default=None, help="FILE: input channels the weights expect")
    add.add_argument("--source", default="", help="FILE: where the weights come from (URL, paper, job)")
    add.add_argument("--license", default="", help="the weights' license")
    add.set_defaults(handler=run_add)
    remove = sub.add_parser("remove", help="remove an entry and its file")
    remove.add_argument("name", help="the entry")
    remove.set_defaults(handler=run_remove)
    export = sub.add_parser("export", help="copy an entry (file and manifest entry) into another zoo folder")
    export.add_argument("name", help="the entry")
    export.add_argument("dir", metavar="DIR", help="the other zoo folder (created if missing)")
    export.set_defaults(handler=run_export)
    parser.set_defaults(handler=lambda args: parser.print_help() or 0)


def run_list(args: argparse.Namespace) -> int:
    """Print the entries."""
    entries = zoo.list_entries()
    if args.json:
        print_json(entries)
        return 0
    if not entries:
        print(f"The zoo ({zoo_dir()}) is empty: add weights with `digits zoo add`.")
        return 0
    rows = [
        (e["name"], e.get("network", ""), e.get("input_channels", ""), str(e.get("sha256", ""))[:12], e.get("source"))
        for e in entries
    ]
    print_table(["name", "network", "channels", "sha256", "source"], rows)
    return 0


def run_add(args: argparse.Namespace) -> int:
    """Add a file or a model job's backbone."""

    if bool(args.file) == bool(args.from_model):
        raise FormValidationError({"file": ["give FILE or --from-model JOB (one of them)"]}, "digits zoo add")
    if args.from_model:
        quiet_tensorflow_startup()
        entry = zoo.add_from_model(
            args.from_model, args.name, epoch=args.epoch, jobs_dir=args.jobs_dir, license=args.license
        )
    else:
        entry = zoo.add_file(
            args.file,
            args.name,
            network=args.network,
            source=args.source,
            license=args.license,
            input_channels=args.channels,
        )
    print(
        f"Added zoo:{entry['name']} ({entry['file']}, sha256 {entry['sha256']}); train with --weights zoo:{args.name}"
    )
    return 0


def run_remove(args: argparse.Namespace) -> int:
    """Remove an entry."""

    zoo.remove(args.name)
    print(f"Removed zoo:{args.name}")
    return 0


def run_export(args: argparse.Namespace) -> int:
    """Copy an entry to another zoo folder."""

    print(f"Exported zoo:{args.name} to {zoo.export(args.name, args.dir)}")
    return 0


def check_train_weights(args: argparse.Namespace) -> None:
    """Resolve ``digits train``'s weights for a named network before TensorFlow starts (no job is made).

    Raises:
        WeightsError: Missing, tampered or unknown weights (see :mod:`digits_core.engine.weights`).
    """
    if getattr(args, "resume", None) or not getattr(args, "network", None) or getattr(args, "workers", None):
        return

    check_weights(args.network, {"weights": getattr(args, "weights", None)})
