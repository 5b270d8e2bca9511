"""What plugin discovery sees: plugin records, the allow/block lists, the entry-point scan.

Part of the plugin registry (:mod:`digits_core.plugins.registry` documents the
whole; names here are re-exported there). This module finds plugins and
judges each one on its own: loadable, a subclass of the right interface with
its required methods and a well-formed id, not disabled by the environment.
Deciding between plugins (id clashes) is :mod:`digits_core.plugins.clashes`;
wiring them into pluggy is :mod:`digits_core.plugins.hooks`.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from importlib import metadata
from typing import Any

from ..errors import PluginLoadError
from ..interfaces import PLUGIN_ID_PATTERN, DataIngestion, View
from .contract import check_at_load

DATA, VIEW, HOOKS = "data", "view", "hooks"
#: Entry-point group of each plugin kind.
ENTRY_POINT_GROUPS = {
    DATA: "digits.plugins.data",
    VIEW: "digits.plugins.view",
    HOOKS: "digits.plugins.hooks",
}
LOADED, DISABLED, FAILED = "loaded", "disabled", "failed"

LOAD_ENV = "DIGITS_LOAD_PLUGINS"
DISABLE_ENV = "DIGITS_DISABLE_PLUGINS"
STRICT_ENV = "DIGITS_STRICT_PLUGINS"

#: Distributions shipped with DIGITS Core: their plugin ids are replaced only on purpose.
BUNDLED_DISTRIBUTIONS = frozenset(
    {
        "digits-core",
        "digits-data-images",
        "digits-data-sunnybrook",
        "digits-data-dicomweb",
        "digits-view-classification",
        "digits-view-segmentation",
        "digits-view-detection",
        "digits-view-generic",
    }
)

INTERFACES: dict[str, type] = {DATA: DataIngestion, VIEW: View}
REGISTER_HOOKS = {DATA: "digits_register_data_ingestions", VIEW: "digits_register_views"}


@dataclass
class PluginRecord:
    """One plugin as discovery saw it; what ``digits plugins`` lists.

    Attributes:
        kind: ``"data"``, ``"view"`` or ``"hooks"``.
        name: Entry-point name, or the qualified class/module name for
            in-process registrations.
        id: The plugin id (``None`` when it could not be read).
        title: Human-readable title.
        category: Menu group (data plugins).
        distribution: The installed distribution providing it, or ``None``
            for in-process registrations.
        version: That distribution's version.
        status: ``"loaded"``, ``"disabled"`` or ``"failed"``.
        error: Why it failed or is disabled.
        source: ``"entry-point"`` or ``"in-process"``.
        hooks: For hook plugins, the hooks it implements.
        obj: The loaded class or module (not serialized).
    """

    kind: str
    name: str
    id: str | None = None
    title: str | None = None
    category: str | None = None
    distribution: str | None = None
    version: str | None = None
    status: str = LOADED
    error: str | None = None
    source: str = "entry-point"
    hooks: list[str] = field(default_factory=list)
    obj: Any = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """Return the record as a JSON-serializable dict (without ``obj``)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "obj"} | {"hooks": list(self.hooks)}


@dataclass
class Origin:
    """Where a pluggy plugin came from, to attribute what it registers."""

    name: str
    distribution: str | None
    version: str | None
    source: str
    order: int = 0
    replace: bool = False


def normalize(name: str) -> str:
    """A distribution/plugin name compared the way pip compares them (``a_b.c`` = ``a-b-c``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def names_from_env(variable: str) -> set[str] | None:
    """The normalized names in a comma-separated environment variable; ``None`` when it is unset."""
    raw = os.environ.get(variable)
    if raw is None:
        return None
    return {normalize(part.strip()) for part in raw.split(",") if part.strip()}


def describe(exc: BaseException) -> str:
    """``TypeError: message``, as plugin errors are shown."""
    return f"{type(exc).__name__}: {exc}"


def is_bundled(distribution: str | None) -> bool:
    """Return whether ``distribution`` ships with DIGITS Core (see :data:`BUNDLED_DISTRIBUTIONS`)."""
    return distribution is not None and normalize(distribution) in BUNDLED_DISTRIBUTIONS


def blocked(kind: str, *names: str | None) -> str | None:
    """Return why a plugin of ``kind`` known by ``names`` (id, entry-point name, distribution) is disabled."""
    wanted = {normalize(n) for n in names if n}
    wanted |= {f"{kind}:{n}" for n in wanted}
    allow = names_from_env(LOAD_ENV)
    if allow is not None and not wanted & allow:
        return f"not listed in {LOAD_ENV}"
    block = names_from_env(DISABLE_ENV) or set()
    if wanted & block:
        return f"listed in {DISABLE_ENV}"
    return None


def kind_of(obj: Any) -> str:
    """``data``, ``view`` or ``hooks``: the kind of plugin ``obj`` is."""
    if inspect.isclass(obj) and issubclass(obj, DataIngestion):
        return DATA
    if inspect.isclass(obj) and issubclass(obj, View):
        return VIEW
    return HOOKS


def failed_record(kind: str, origin: Origin, plugin_id: str | None, error: str) -> PluginRecord:
    """A record of a plugin that failed, attributed to ``origin``."""
    return PluginRecord(
        kind=kind,
        name=origin.name,
        id=plugin_id,
        distribution=origin.distribution,
        version=origin.version,
        source=origin.source,
        status=FAILED,
        error=error,
    )


def validate_class(kind: str, plugin_class: Any, origin: Origin) -> PluginRecord:
    """Judge one data or view class on its own: interface, required methods, id, the environment's lists."""
    interface = INTERFACES[kind]
    record = PluginRecord(
        kind=kind,
        name=origin.name,
        distribution=origin.distribution,
        version=origin.version,
        source=origin.source,
        obj=plugin_class,
    )
    if not (inspect.isclass(plugin_class) and issubclass(plugin_class, interface)):
        record.status = FAILED
        record.error = f"{plugin_class!r} is not a subclass of digits_core.{interface.__name__}"
        return record
    cls: Any = plugin_class  # a DataIngestion or View subclass, checked above
    try:
        record.id = cls.get_id()
        record.title = cls.get_title()
        if kind == DATA:
            record.category = cls.get_category()
    except Exception as exc:  # noqa: BLE001
        record.status, record.error = FAILED, f"reading its id/title raised {describe(exc)}"
        return record
    missing = sorted(getattr(plugin_class, "__abstractmethods__", ()) or ())
    if missing:
        record.status = FAILED
        record.error = f"{plugin_class.__name__} does not implement required methods: {', '.join(missing)}"
    elif not isinstance(record.id, str) or not PLUGIN_ID_PATTERN.match(record.id):
        record.status = FAILED
        record.error = f"malformed plugin id {record.id!r}: it must match {PLUGIN_ID_PATTERN.pattern}"
    elif origin.source != "in-process":
        reason = blocked(kind, record.id, origin.name, origin.distribution)
        if reason:
            record.status, record.error = DISABLED, reason
    return record


def class_id(plugin: Any) -> str | None:
    """A plugin class's id, or ``None`` when it cannot be read (such a class clashes with nothing)."""
    try:
        return plugin.get_id()
    except Exception:  # noqa: BLE001 - plugin code
        return None


def checked_class_id(kind: str, plugin: Any) -> str:
    """The id of an in-process data/view class that passes the load-time contract checks.

    Raises:
        PluginLoadError: The class is not a plugin of ``kind``, misses a method, has a malformed id, or
            a form the contract refuses (the message names the method and why).
    """
    name = getattr(plugin, "__qualname__", repr(plugin))
    record = validate_class(kind, plugin, Origin(name=name, distribution=None, version=None, source="in-process"))
    # templates are compiled when plugins are listed or the server starts (a lookup stays cheap), not here
    problem = record.error if record.status == FAILED else check_at_load(kind, plugin, templates=False)
    if problem:
        raise PluginLoadError(record.id or name, problem)
    return str(record.id)


def scan_entry_points() -> Iterator[tuple[PluginRecord, Any]]:
    """Load every entry point of the three groups once, deduplicated; yield each record with its object."""
    seen: set[tuple[str, str, str]] = set()
    all_entry_points = metadata.entry_points()
    for kind, group in ENTRY_POINT_GROUPS.items():
        found = sorted(
            all_entry_points.select(group=group),
            key=lambda ep: (normalize(ep.dist.name) if ep.dist else "", ep.name),
        )
        for entry_point in found:
            dist = entry_point.dist
            dist_name = dist.name if dist else None
            key = (group, entry_point.name, normalize(dist_name or ""))
            if key in seen:  # the same distribution seen twice (editable installs, duplicate paths)
                continue
            seen.add(key)
            record = PluginRecord(
                kind=kind,
                name=entry_point.name,
                distribution=dist_name,
                version=dist.version if dist else None,
            )
            reason = blocked(kind, entry_point.name, dist_name)
            if reason:
                record.status, record.error = DISABLED, reason
                yield record, None
                continue
            try:
                obj = entry_point.load()
            except BaseException as exc:  # noqa: BLE001 - a plugin must never take the core down
                if isinstance(exc, KeyboardInterrupt):
                    raise
                record.status = FAILED
                record.error = f"import of {entry_point.value} raised {describe(exc)}"
                yield record, None
                continue
            yield record, obj
