"""``digits plugin new data|view|network NAME [--dir DIR]``: start a new plugin package;
``digits plugin check ID``: run the whole plugin contract on an installed plugin (a network: by its name);
``digits plugin wrap-digits6 PATH``: package a DIGITS 6 built-in view (or data) folder.

The generated package (see :mod:`digits_core.scaffold`) pip-installs and is
listed by ``digits plugins`` without edits; the guide
``docs/writing-plugins.md`` walks through turning it into your own plugin.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``plugin`` command and its ``new`` sub-command."""
    parser = subparsers.add_parser(
        "plugin",
        help="create a new plugin package",
        description="Tools for plugin authors. See docs/writing-plugins.md.",
    )
    actions = parser.add_subparsers(dest="plugin_action", metavar="ACTION")
    new = actions.add_parser(
        "new",
        help="generate a working plugin package",
        description="Generate a plugin package (pyproject.toml with the entry point, the plugin class, "
        "its WTForms form, Jinja2 templates, a README and a pytest test) in DIR/digits-<kind>-<NAME>/. "
        "It installs with `pip install -e DIR/digits-<kind>-<NAME>` and then shows in `digits plugins`.",
    )
    new.add_argument(
        "kind",
        choices=["data", "view", "network"],
        help="data: a DataIngestion plugin; view: a View plugin; network: networks for digits_register_networks",
    )
    new.add_argument("name", metavar="NAME", help="plugin id, e.g. my-dicom (lower-case letters, digits, - and _)")
    new.add_argument("--dir", default=".", metavar="DIR", help="folder to create the package in (default: .)")
    new.add_argument("--title", default=None, help="title shown in menus (default: NAME in words)")
    new.set_defaults(handler=run_new)
    check = actions.add_parser(
        "check",
        help="run the plugin contract on an installed plugin",
        description="Check a data or view plugin where its mistakes are made: its forms build, its templates "
        "render, itemize_entries runs on the form defaults (or --form values) and a few encode_entry results "
        "have an allowed dtype, an H×W×C shape and a valid label; a view's process_data and templates run on "
        "synthetic output. A network (network:NAME, or a name only a network has): its declared metadata, a "
        "model built for every declared task with the task's output shape, and its declared minimum input size "
        "honoured (loads TensorFlow). Exit status 1 when a check fails.",
    )
    check.add_argument(
        "plugin_id",
        metavar="ID",
        help="plugin id (see `digits plugins`) or network name (see `digits networks`); data:ID, view:ID or "
        "network:NAME when two kinds share it",
    )
    check.add_argument(
        "--form",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a dataset form value (data plugins) or config value (views); repeatable",
    )
    check.add_argument("--entries", type=int, default=3, metavar="N", help="entries encoded per stage (default: 3)")
    check.add_argument(
        "--data-root",
        action="append",
        default=[],
        metavar="DIR",
        dest="data_roots",
        help="run the data plugin confined to DIR, as the web server does, and warn about files it "
        "reads outside without the path gate (digits_core.paths); repeatable",
    )
    check.add_argument(
        "--shape", default=None, metavar="HxWxC", help="networks: the input to build for (default: its minimum, >= 32)"
    )
    check.add_argument("--task", default=None, help="networks: check this task only (default: every declared task)")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.set_defaults(handler=run_check)
    wrap = actions.add_parser(
        "wrap-digits6",
        help="package a DIGITS 6 built-in view folder as an installable plugin",
        description="Copy a DIGITS 6 built-in extension folder (e.g. digits/extensions/view/imageSegmentation) "
        "into DIR/digits6-<kind>-<name>/ with a setup.py and its entry point, and rewrite its relative "
        "`from ..interface import` to digits6-compat's module; the folder itself is left as it is. "
        "See docs/porting-digits6.md.",
    )
    wrap.add_argument("path", metavar="PATH", help="the extension folder (it has an __init__.py)")
    wrap.add_argument("--dir", default=".", metavar="DIR", help="folder to create the distribution in (default: .)")
    wrap.set_defaults(handler=run_wrap_digits6)
    parser.set_defaults(handler=lambda args: parser.print_help() or 0)


def run_wrap_digits6(args: argparse.Namespace) -> int:
    """Write the distribution folder and print how to install it (and any id clash)."""
    from ..scaffold.digits6 import wrap_digits6  # commands import their code when they run (light --help)

    wrapped = wrap_digits6(args.path, args.dir)
    print(f"Wrote {wrapped.folder} ({wrapped.distribution}, {wrapped.kind} entry point {wrapped.entry_point})")
    for name in wrapped.fixed_imports:
        print(f"  {name}: from ..interface import -> from digits.extensions.{wrapped.kind}.interface import")
    print(f"Install it next to digits6-compat:\n  pip install --no-build-isolation {wrapped.folder}")
    if wrapped.plugin_id:
        _warn_if_id_taken(wrapped.kind, wrapped.plugin_id, digits6=True)
    return 0


def run_new(args: argparse.Namespace) -> int:
    """Create the package and print what to do next."""
    import os

    from ..scaffold import create_plugin, plugin_names

    names = plugin_names(args.kind, args.name, args.title)
    target = create_plugin(args.kind, args.name, args.dir, title=args.title)
    _warn_if_id_taken(args.kind, names.plugin_id)
    relative = os.path.relpath(target)
    # "./name" so that pip takes it for a folder, never for a package name to download.
    shown = str(target) if relative.startswith("..") else os.path.join(os.curdir, relative)
    noun = f"{args.kind} plugin"
    print(f'Created {noun} "{names.plugin_id}" ({names.distribution}) in {shown}:')
    for path in sorted(p for p in target.rglob("*") if p.is_file()):
        print(f"  {path.relative_to(target)}")
    print("\nNext steps:")
    print(f"  pip install -e {shown}")
    print("  digits plugins")
    if args.kind == "data":
        print(f"  digits dataset create {names.plugin_id} --help")
    if args.kind == "network":
        print(f"  digits plugin check network:{names.plugin_id.replace('-', '_')}")
    print(f"  python -m pytest {os.path.join(shown, 'tests')}")
    print("Guide: docs/writing-plugins.md")
    return 0


def run_check(args: argparse.Namespace) -> int:
    """Run :func:`digits_core.plugins.testing.check_plugin` on an installed plugin and print the report."""
    import sys

    from ..errors import FormValidationError
    from ..plugins.check import check_plugin
    from ..plugins.registry import registry
    from .output import print_json

    kind, sep, plugin_id = args.plugin_id.partition(":")
    if not sep:
        kind, plugin_id = "", args.plugin_id
    found: list[type] = []
    if kind == "network" or (not kind and _only_a_network(plugin_id)):
        return _run_network_check(args, plugin_id)
    if kind in ("", "data") and plugin_id in registry.data_ingestions():
        found.append(registry.get_data_ingestion(plugin_id))
    if kind in ("", "view") and plugin_id in registry.views():
        found.append(registry.get_view(plugin_id))
    if not found:
        if kind in ("", "data"):
            registry.get_data_ingestion(plugin_id)  # raises, saying why (failed, disabled, unknown)
        registry.get_view(plugin_id)
    values = {}
    for item in args.form:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise FormValidationError({"form": [f"expected FIELD=VALUE, got {item!r}"]}, "--form")
        values[key.strip().replace("-", "_")] = value
    reports = [
        check_plugin(cls, form_values=values, entries=args.entries, data_roots=args.data_roots or None) for cls in found
    ]
    if args.json:
        print_json([r.to_dict() for r in reports])
    else:
        for report in reports:
            print(report)
            if args.verbose:
                for check in report.checks:
                    if check.detail:
                        print(f"\n{check.name}:\n{check.detail}", file=sys.stderr)
    return 0 if all(r.ok for r in reports) else 1


def _networks() -> list:
    from ..engine.networks import list_networks  # metadata only: TensorFlow loads when a model is built

    return list_networks()


def _only_a_network(name: str) -> bool:
    """True when ``name`` is a registered network and no data or view plugin has that id."""
    from ..plugins.registry import registry  # (as run_check)

    if name in registry.data_ingestions() or name in registry.views():
        return False
    return name.lower() in {spec.name.lower() for spec in _networks()}


def _run_network_check(args: argparse.Namespace, name: str) -> int:
    """Run :func:`digits_core.engine.network_check.check_network` and print its report."""
    import sys  # (as run_check: the command's modules load when it runs)

    from ..engine.network_check import check_network  # loads TensorFlow: only when a network is checked
    from ..errors import FormValidationError  # (as run_check)
    from ..tf_quiet import quiet_tensorflow_startup  # (as run_check)
    from .output import print_json  # (as run_check)

    shape = None
    if args.shape:
        parts = args.shape.lower().replace("×", "x").split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise FormValidationError({"shape": [f"expected HxWxC such as 64x64x3, got {args.shape!r}"]}, "--shape")
        shape = tuple(int(p) for p in parts)
    quiet_tensorflow_startup()
    report = check_network(name, shape=shape, task=args.task)
    if args.json:
        print_json([report.to_dict()])
    else:
        print(report)
        if args.verbose:
            for check in report.checks:
                if check.detail:
                    print(f"\n{check.name}:\n{check.detail}", file=sys.stderr)
    return 0 if report.ok else 1


def _warn_if_id_taken(kind: str, plugin_id: str, digits6: bool = False) -> None:
    """Warn when an installed plugin of the same kind already uses ``plugin_id`` (they would clash)."""
    import sys

    from ..plugins.discovery import DISABLE_ENV  # (as the registry below)
    from ..plugins.registry import registry

    try:
        if kind == "network":
            installed = {s.name.replace("_", "-"): s.build for s in _networks()}
        else:
            installed = registry.data_ingestions() if kind == "data" else registry.views()
    except Exception:  # noqa: BLE001 - a broken plugin must not stop the scaffold
        return
    other = installed.get(plugin_id)
    if other is not None and digits6:
        record = next((r for r in registry.records() if r.kind == kind and r.id == plugin_id and r.obj is other), None)
        distribution = getattr(record, "distribution", None) or "its distribution"
        print(
            f"warning: the installed {kind} plugin {other.__module__}.{other.__qualname__} ({distribution}) "
            f'already uses the id "{plugin_id}": the DIGITS 6 one will fail to load. Either disable that one '
            f"({DISABLE_ENV}={distribution}) or rename this one (its get_id()). See docs/porting-digits6.md, "
            '"Id clashes".',
            file=sys.stderr,
        )
    elif other is not None:
        print(
            f"warning: the installed {kind} plugin {other.__module__}.{other.__qualname__} already uses the id "
            f'"{plugin_id}"; installing this one too makes one of them fail to load. Rename it unless you '
            "mean to replace that plugin.",
            file=sys.stderr,
        )
