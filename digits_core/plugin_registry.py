"""Plugin discovery and the registry every front door asks for plugins.

Three sources feed one registry, all through pluggy (project name ``digits``):

* entry points in ``digits.plugins.data`` (a :class:`~digits_core.DataIngestion`
  subclass), ``digits.plugins.view`` (a :class:`~digits_core.View` subclass) and
  ``digits.plugins.hooks`` (a module or object with ``@digits_core.hookimpl``
  functions, which may also return classes from the ``digits_register_*`` hooks);
* hook implementations returning classes from ``digits_register_data_ingestions``
  and ``digits_register_views``;
* in-process registration by embedding tools: ``registry.register(MyIngestion)``.

Entry points are scanned once and cached. A plugin that fails to import, is
not a subclass of the right interface, lacks required methods, or has a
malformed or clashing id is recorded as ``failed`` with its distribution,
version and error, a warning is logged, and it is skipped: one broken plugin
never takes the core down. Set ``DIGITS_STRICT_PLUGINS=1`` to raise
:class:`~digits_core.errors.PluginLoadError` instead.

Hooks are called through pluggy's hook callers, so ``wrapper=True`` /
``hookwrapper=True`` implementations, ``tryfirst``/``trylast`` and
``firstresult`` specs behave as in pluggy. Each plain implementation runs
contained: one that raises is logged (plugin, hook, cause) and skipped.
An implementation of a hook no spec declares (a misspelled name) marks its
plugin ``failed`` naming the hook, as pluggy's ``check_pending()`` would.

Id clashes: a bundled plugin (a distribution in :data:`BUNDLED_DISTRIBUTIONS`)
keeps its id unless the newcomer sets ``replaces_bundled = True`` on purpose;
otherwise the newcomer is reported ``failed``. Two third-party entry points
claiming one id both fail (whatever their distribution names sort as); an
in-process registration clashing with a loaded plugin fails unless
``register(..., replace=True)``.

Environment variables (comma-separated names; a name matches a plugin's id,
its entry-point name or its distribution name; ``data:ID``, ``view:ID`` and
``hooks:NAME`` match one kind only):

* ``DIGITS_LOAD_PLUGINS``: allow-list. When set, only the named plugins load
  (set but empty: none). In-process registrations are not filtered.
* ``DIGITS_DISABLE_PLUGINS``: block-list, applied after the allow-list.

Loading a plugin imports only its module: plugins must keep heavy imports
(TensorFlow, pydicom) inside the functions that need them.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import logging
import os
import re
import threading
from dataclasses import dataclass, field, fields
from importlib import metadata
from typing import Any, Callable, Iterable

import pluggy

from . import hookspecs
from .errors import PluginLoadError, PluginNotFoundError
from .interfaces import PLUGIN_ID_PATTERN, DataIngestion, View

logger = logging.getLogger("digits_core.plugins")

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
BUNDLED_DISTRIBUTIONS = frozenset({
    "digits-core", "digits-data-images", "digits-data-sunnybrook",
    "digits-data-dicomweb", "digits-view-classification", "digits-view-segmentation",
    "digits-view-detection", "digits-view-generic",
})

_INTERFACES = {DATA: DataIngestion, VIEW: View}
_REGISTER_HOOKS = {DATA: "digits_register_data_ingestions", VIEW: "digits_register_views"}


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

    def to_dict(self) -> dict:
        """Return the record as a JSON-serializable dict (without ``obj``)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "obj"} | {"hooks": list(self.hooks)}


@dataclass
class _Origin:
    """Where a pluggy plugin came from, to attribute what it registers."""

    name: str
    distribution: str | None
    version: str | None
    source: str
    order: int = 0
    replace: bool = False


class _ClassProvider:
    """Adapts a plugin class to the ``digits_register_*`` hook of its kind."""

    def __init__(self, kind: str, plugin_class: Any):
        self.kind = kind
        self.plugin_class = plugin_class

    @hookspecs.hookimpl
    def digits_register_data_ingestions(self):
        return [self.plugin_class] if self.kind == DATA else []

    @hookspecs.hookimpl
    def digits_register_views(self):
        return [self.plugin_class] if self.kind == VIEW else []


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _names_from_env(variable: str) -> set[str] | None:
    raw = os.environ.get(variable)
    if raw is None:
        return None
    return {_normalize(part.strip()) for part in raw.split(",") if part.strip()}


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def is_bundled(distribution: str | None) -> bool:
    """Return whether ``distribution`` ships with DIGITS Core (see :data:`BUNDLED_DISTRIBUTIONS`)."""
    return bool(distribution) and _normalize(distribution) in BUNDLED_DISTRIBUTIONS


def _contained(function: Callable, plugin: str, hook_name: str) -> Callable:
    """Wrap a hook implementation so that an exception is logged and the call yields ``None``."""

    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - one plugin must not stop the others
            logger.warning('Plugin "%s" failed in hook %s: %s', plugin, hook_name, _describe(exc),
                           exc_info=logger.isEnabledFor(logging.INFO))
            return None

    return call


class _ContainedHooks:
    """What pluggy sees of a hook plugin: its plain implementations wrapped by :func:`_contained`."""

    def __init__(self, pm: pluggy.PluginManager, plugin: Any, label: str):
        self.plugin = plugin
        for name in dir(plugin):
            try:
                opts = pm.parse_hookimpl_opts(plugin, name)
            except Exception:  # noqa: BLE001 - odd attributes are not hooks
                opts = None
            if opts is None:
                continue
            function = getattr(plugin, name)
            if not (opts.get("wrapper") or opts.get("hookwrapper")):
                function = _contained(function, label, name)
            setattr(self, name, function)


def _missing_abstract_methods(cls: type) -> list[str]:
    return sorted(getattr(cls, "__abstractmethods__", ()) or ())


class PluginRegistry:
    """The plugins DIGITS Core knows about, discovered once and cached.

    Use the shared instance ``digits_core.registry``. Embedding tools can add
    plugin classes or hook modules without entry points::

        from digits_core import registry
        registry.register(MyIngestion)      # a DataIngestion or View subclass
        registry.register(my_hooks_module)  # @digits_core.hookimpl functions
        ...
        registry.unregister(MyIngestion)
    """

    def __init__(self, *, use_entry_points: bool = True):
        self._use_entry_points = use_entry_points
        self._lock = threading.RLock()
        self._scan: list[tuple[PluginRecord, Any]] | None = None
        self._in_process: list[tuple[Any, bool]] = []
        self._built = False
        self._pm: pluggy.PluginManager | None = None
        self._records: list[PluginRecord] = []
        self._classes: dict[str, dict[str, type]] = {DATA: {}, VIEW: {}}
        self._extra_specs: list[Any] = []

    # -- public API ----------------------------------------------------------

    def register(self, plugin: Any, *, replace: bool = False) -> Any:
        """Register a plugin class or hook module in this process.

        Args:
            plugin: A :class:`~digits_core.DataIngestion` or
                :class:`~digits_core.View` subclass, or a module/object with
                ``@digits_core.hookimpl`` functions.
            replace: Let a class take over the id of an already loaded plugin
                (e.g. to swap a bundled view); otherwise a clashing id is
                recorded as a failure.

        Returns:
            ``plugin`` unchanged, so this works as a class decorator.
        """
        with self._lock:
            self._in_process.append((plugin, replace))
            self._built = False
        return plugin

    def add_hookspecs(self, module_or_class: Any) -> None:
        """Declare more hooks (``@hookspec`` functions), e.g. for plugins extending other plugins.

        Args:
            module_or_class: A module or class with :data:`digits_core.hookspecs.hookspec`
                marked functions, as pluggy's ``PluginManager.add_hookspecs``.
        """
        with self._lock:
            self._extra_specs.append(module_or_class)
            self._built = False

    def unregister(self, plugin: Any) -> None:
        """Remove a plugin registered with :meth:`register`.

        Args:
            plugin: The same object that was registered.
        """
        with self._lock:
            self._in_process = [(p, r) for p, r in self._in_process if p is not plugin]
            self._built = False

    def reload(self) -> None:
        """Forget the cached entry-point scan; the next lookup scans again."""
        with self._lock:
            self._scan = None
            self._built = False

    def records(self, *, include_disabled: bool = True) -> list[PluginRecord]:
        """Return every plugin discovery saw, loaded, disabled or failed."""
        self._ensure_built()
        return [r for r in self._records if include_disabled or r.status != DISABLED]

    def data_ingestions(self) -> dict[str, type[DataIngestion]]:
        """Return the loaded data plugins, by id."""
        self._ensure_built()
        return dict(self._classes[DATA])

    def views(self) -> dict[str, type[View]]:
        """Return the loaded view plugins, by id."""
        self._ensure_built()
        return dict(self._classes[VIEW])

    def get_data_ingestion(self, plugin_id: str) -> type[DataIngestion]:
        """Return the data plugin with this id.

        Raises:
            PluginNotFoundError: No loaded data plugin has this id; the
                message says whether it is disabled or failed and lists the
                available ids.
        """
        return self._get(DATA, plugin_id)

    def get_view(self, plugin_id: str) -> type[View]:
        """Return the view plugin with this id.

        Raises:
            PluginNotFoundError: No loaded view plugin has this id.
        """
        return self._get(VIEW, plugin_id)

    def networks(self) -> dict[str, Callable]:
        """Return networks added by plugins through ``digits_register_networks``."""
        found: dict[str, Callable] = {}
        for result in self.call_hook("digits_register_networks"):
            if isinstance(result, dict):
                found.update(result)
        return found

    @property
    def hook(self):
        """The pluggy hook relay (``registry.hook.digits_dataset_created(dataset=...)``)."""
        self._ensure_built()
        return self._pm.hook

    def call_hook(self, name: str, /, **kwargs: Any) -> Any:
        """Call hook ``name`` through pluggy, containing plugin failures.

        Wrappers, ``tryfirst``/``trylast`` and ``firstresult`` apply as in
        pluggy. A plain implementation that raises is logged with its plugin's
        name and skipped, so one broken plugin cannot stop a job (the same
        holds for ``registry.hook.<name>(...)``). A mistake of the caller (an
        unknown hook, a missing or unexpected argument) raises ``TypeError``
        and is never blamed on a plugin.

        Args:
            name: Hook name from :mod:`digits_core.hookspecs` (or a spec added
                with :meth:`add_hookspecs`).
            **kwargs: The hook's arguments (implementations may take fewer).

        Returns:
            The non-``None`` results in pluggy's call order, or for a
            ``firstresult`` hook the first non-``None`` result (or ``None``).

        Raises:
            TypeError: No such hook, or arguments that do not match its spec.
        """
        self._ensure_built()
        caller = getattr(self._pm.hook, name, None)
        if caller is None or caller.spec is None:
            raise TypeError(f"call_hook: no hook named {name!r} is declared (see digits_core.hookspecs)")
        expected = set(caller.spec.argnames)
        if set(kwargs) != expected:
            missing, extra = sorted(expected - set(kwargs)), sorted(set(kwargs) - expected)
            raise TypeError(f"call_hook({name!r}): arguments must be {sorted(expected)}"
                            + (f"; missing {missing}" if missing else "") + (f"; unexpected {extra}" if extra else ""))
        return caller(**kwargs)

    # -- building ------------------------------------------------------------

    def _get(self, kind: str, plugin_id: str):
        self._ensure_built()
        try:
            return self._classes[kind][plugin_id]
        except KeyError:
            pass
        noun = "data plugin" if kind == DATA else "view plugin"
        for record in self._records:
            if record.kind == kind and plugin_id in (record.id, record.name) and record.status != LOADED:
                raise PluginNotFoundError(
                    plugin_id, f'The {noun} "{plugin_id}" is {record.status}: {record.error}. '
                    "Run `digits plugins --all` for details."
                )
        available = ", ".join(sorted(self._classes[kind])) or "none"
        raise PluginNotFoundError(
            plugin_id, f'No {noun} with id "{plugin_id}" is installed (available: {available}). '
            "Install the plugin's package with pip, then check `digits plugins`."
        )

    def _ensure_built(self) -> None:
        with self._lock:
            if not self._built:
                self._build()
                self._built = True

    def _build(self) -> None:
        pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        pm.add_hookspecs(hookspecs)
        for specs in self._extra_specs:
            pm.add_hookspecs(specs)
        records: list[PluginRecord] = []
        origins: dict[str, _Origin] = {}
        replacing: set[str] = set()

        if self._use_entry_points:
            if self._scan is None:
                self._scan = list(self._scan_entry_points())
            for record, obj in self._scan:
                record = PluginRecord(**{**record.to_dict(), "obj": obj})  # a fresh copy per build
                if record.status != LOADED:
                    records.append(record)
                    continue
                self._add_to_manager(pm, record, obj, origins, records)

        for index, (obj, replace) in enumerate(self._in_process):
            kind = self._kind_of(obj)
            name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)
            record = PluginRecord(kind=kind, name=name, source="in-process", obj=obj)
            plugin_name = f"in-process:{index}:{name}"
            if replace:
                replacing.add(plugin_name)
            self._add_to_manager(pm, record, obj, origins, records, plugin_name=plugin_name)

        try:  # unknown hooks were attributed and their plugins unregistered above; this is pluggy's own word
            pm.check_pending()
        except pluggy.PluginValidationError as exc:  # pragma: no cover - a case the per-plugin check missed
            logger.warning("Plugin hook validation: %s", exc)

        # Collect classes from every digits_register_* implementation, one at a
        # time so each result is attributed to (and contained within) its plugin.
        candidates: list[tuple[PluginRecord, _Origin]] = []
        for kind, hook_name in _REGISTER_HOOKS.items():
            for impl in getattr(pm.hook, hook_name).get_hookimpls():
                origin = origins[impl.plugin_name]
                origin.replace = impl.plugin_name in replacing
                function = getattr(impl.plugin, "plugin", None)
                function = getattr(function, hook_name, None) if function is not None else None
                try:
                    provided = list((function or impl.function)() or [])
                except Exception as exc:  # noqa: BLE001 - contain plugin failures
                    records.append(self._failed(kind, origin, None, f"{hook_name}() raised {_describe(exc)}"))
                    continue
                for plugin_class in provided:
                    record = self._validate_class(kind, plugin_class, origin)
                    records.append(record)
                    if record.status == LOADED:
                        candidates.append((record, origin))
        classes = self._resolve_clashes(candidates)
        from .contract import check_at_load

        for record in records:
            if record.status == LOADED and record.kind in _INTERFACES:
                problem = check_at_load(record.kind, record.obj)
                if problem:
                    record.status, record.error = FAILED, problem
                    classes[record.kind].pop(record.id, None)

        strict = os.environ.get(STRICT_ENV, "").strip().lower() in {"1", "true", "yes", "on"}
        for record in records:
            if record.status == FAILED:
                logger.warning(
                    'Plugin "%s" (%s %s) failed to load and is skipped: %s',
                    record.id or record.name, record.distribution or record.source, record.version or "", record.error,
                )
                if strict:
                    raise PluginLoadError(record.id or record.name, record.error)

        self._pm, self._records, self._classes = pm, records, classes

    def _add_to_manager(self, pm, record, obj, origins, records, plugin_name=None) -> None:
        """Register ``obj`` with pluggy; data/view classes go through a provider."""
        plugin_name = plugin_name or f"{ENTRY_POINT_GROUPS[record.kind]}:{record.distribution}:{record.name}"
        origins[plugin_name] = _Origin(record.name, record.distribution, record.version, record.source,
                                       order=len(origins))
        if record.kind in _INTERFACES:
            pm.register(_ClassProvider(record.kind, obj), name=plugin_name)
            return
        label = record.name if record.source == "in-process" else f"{record.name} ({record.distribution})"
        proxy = _ContainedHooks(pm, obj, label)
        try:
            pm.register(proxy, name=plugin_name)
        except Exception as exc:  # noqa: BLE001 - pluggy validation errors
            record.status, record.error = FAILED, _describe(exc)
        else:
            callers = pm.get_hookcallers(proxy) or []
            record.hooks = sorted(caller.name for caller in callers)
            unknown = [c.name for c in callers if c.spec is None
                       and not any(i.optionalhook for i in c.get_hookimpls() if i.plugin is proxy)]
            if unknown:
                known = [n for n in dir(pm.hook) if getattr(getattr(pm.hook, n), "spec", None) is not None]
                hints = []
                for name in unknown:
                    close = difflib.get_close_matches(name, known, n=1)
                    hints.append(f"{name} (did you mean {close[0]}?)" if close else name)
                record.status = FAILED
                record.error = (f"implements unknown hook {', '.join(hints)}: no such hook in "
                                "digits_core.hookspecs (see the hook table in docs/writing-plugins.md)")
                pm.unregister(proxy)
            elif not record.hooks and record.status == LOADED:
                record.status, record.error = FAILED, "implements no digits hook (use @digits_core.hookimpl)"
                pm.unregister(proxy)
        records.append(record)

    def _validate_class(self, kind, plugin_class, origin) -> PluginRecord:
        interface = _INTERFACES[kind]
        record = PluginRecord(
            kind=kind, name=origin.name, distribution=origin.distribution,
            version=origin.version, source=origin.source, obj=plugin_class,
        )
        if not (inspect.isclass(plugin_class) and issubclass(plugin_class, interface)):
            record.status = FAILED
            record.error = f"{plugin_class!r} is not a subclass of digits_core.{interface.__name__}"
            return record
        try:
            record.id = plugin_class.get_id()
            record.title = plugin_class.get_title()
            if kind == DATA:
                record.category = plugin_class.get_category()
        except Exception as exc:  # noqa: BLE001
            record.status, record.error = FAILED, f"reading its id/title raised {_describe(exc)}"
            return record
        missing = _missing_abstract_methods(plugin_class)
        if missing:
            record.status = FAILED
            record.error = f"{plugin_class.__name__} does not implement required methods: {', '.join(missing)}"
        elif not isinstance(record.id, str) or not PLUGIN_ID_PATTERN.match(record.id):
            record.status = FAILED
            record.error = f"malformed plugin id {record.id!r}: it must match {PLUGIN_ID_PATTERN.pattern}"
        elif origin.source != "in-process" and self._blocked(kind, record.id, origin.name, origin.distribution):
            record.status, record.error = DISABLED, self._blocked(kind, record.id, origin.name, origin.distribution)
        return record

    @staticmethod
    def _resolve_clashes(candidates: list[tuple[PluginRecord, _Origin]]) -> dict[str, dict[str, type]]:
        """Decide which plugin keeps each id; mark the others failed (or disabled when replaced on purpose)."""
        groups: dict[tuple[str, str], list[tuple[PluginRecord, _Origin]]] = {}
        for record, origin in candidates:
            groups.setdefault((record.kind, record.id), []).append((record, origin))
        classes: dict[str, dict[str, type]] = {DATA: {}, VIEW: {}}

        def where(record: PluginRecord) -> str:
            cls = record.obj
            place = "bundled" if is_bundled(record.distribution) else (record.distribution or "in-process")
            return f"{cls.__module__}.{cls.__qualname__} ({place})"

        for (kind, plugin_id), group in groups.items():
            winner = None
            if len(group) == 1:
                winner = group[0][0]
            else:
                explicit = [r for r, o in group if o.source == "in-process" and o.replace]
                bundled = [r for r, o in group if o.source != "in-process" and is_bundled(r.distribution)]
                others = [r for r, o in group if r not in bundled]
                on_purpose = [r for r in others if getattr(r.obj, "replaces_bundled", False) is True]
                entry_points = [r for r, o in group if o.source != "in-process"]
                if explicit:
                    winner = explicit[-1]
                elif bundled and len(on_purpose) == 1:
                    winner = on_purpose[0]
                elif bundled:
                    winner = bundled[0]
                elif len(entry_points) == 1:
                    winner = entry_points[0]
                elif not entry_points:
                    winner = min(group, key=lambda pair: pair[1].order)[0]
                for record, _origin in group:
                    if record is winner:
                        continue
                    if winner is not None and (winner in explicit or winner in on_purpose):
                        record.status = DISABLED
                        record.error = f'replaced by {where(winner)}, which takes over the id "{plugin_id}" on purpose'
                    elif winner is not None and winner in bundled:
                        record.status = FAILED
                        record.error = (
                            f'id "{plugin_id}" is already used by the bundled plugin {where(winner)}; rename this '
                            "plugin, or set `replaces_bundled = True` on its class to replace the bundled one "
                            "on purpose"
                        )
                    elif winner is not None:
                        record.status = FAILED
                        record.error = (f'id "{plugin_id}" is already used by {where(winner)}; rename one of them '
                                        "or register with replace=True")
                    else:
                        rivals = ", ".join(where(r) for r, _ in group if r is not record)
                        record.status = FAILED
                        record.error = (
                            f'id "{plugin_id}" is also claimed by {rivals}; neither loads. Uninstall one, or '
                            f"disable one by distribution name in {DISABLE_ENV}"
                        )
            if winner is not None:
                classes[kind][plugin_id] = winner.obj
        return classes

    @staticmethod
    def _failed(kind, origin, plugin_id, error) -> PluginRecord:
        return PluginRecord(
            kind=kind, name=origin.name, id=plugin_id, distribution=origin.distribution,
            version=origin.version, source=origin.source, status=FAILED, error=error,
        )

    @staticmethod
    def _kind_of(obj: Any) -> str:
        if inspect.isclass(obj) and issubclass(obj, DataIngestion):
            return DATA
        if inspect.isclass(obj) and issubclass(obj, View):
            return VIEW
        return HOOKS

    @staticmethod
    def _blocked(kind: str, *names: str | None) -> str | None:
        """Return why a plugin of ``kind`` known by ``names`` (id, entry-point name, distribution) is disabled."""
        wanted = {_normalize(n) for n in names if n}
        wanted |= {f"{kind}:{n}" for n in wanted}
        allow = _names_from_env(LOAD_ENV)
        if allow is not None and not wanted & allow:
            return f"not listed in {LOAD_ENV}"
        block = _names_from_env(DISABLE_ENV) or set()
        if wanted & block:
            return f"listed in {DISABLE_ENV}"
        return None

    def _scan_entry_points(self) -> Iterable[tuple[PluginRecord, Any]]:
        """Load every entry point of the three groups once, deduplicated."""
        seen: set[tuple[str, str, str]] = set()
        all_entry_points = metadata.entry_points()
        for kind, group in ENTRY_POINT_GROUPS.items():
            found = sorted(
                all_entry_points.select(group=group),
                key=lambda ep: (_normalize(ep.dist.name) if ep.dist else "", ep.name),
            )
            for entry_point in found:
                dist = entry_point.dist
                dist_name = dist.name if dist else None
                key = (group, entry_point.name, _normalize(dist_name or ""))
                if key in seen:  # the same distribution seen twice (editable installs, duplicate paths)
                    continue
                seen.add(key)
                record = PluginRecord(
                    kind=kind, name=entry_point.name, distribution=dist_name,
                    version=dist.version if dist else None,
                )
                reason = self._blocked(kind, entry_point.name, dist_name)
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
                    record.error = f"import of {entry_point.value} raised {_describe(exc)}"
                    yield record, None
                    continue
                yield record, obj


#: The process-wide registry used by the CLI, the web UI and the API.
registry = PluginRegistry()
