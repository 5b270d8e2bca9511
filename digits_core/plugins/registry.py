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

The registry is four modules with one job each: this one (the registry and
hook calls), :mod:`digits_core.plugins.discovery` (records, the environment's
lists, the entry-point scan, checks of one class), :mod:`digits_core.plugins.hooks`
(plugins into pluggy) and :mod:`digits_core.plugins.clashes` (id clashes).
Their public names are importable from here.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any

import pluggy

from ..errors import InferenceError, PluginLoadError, PluginNotFoundError
from ..interfaces import DataIngestion, View
from ..jobs.status import add_status_listener
from . import hookspecs
from .clashes import resolve_clashes
from .contract import check_at_load, inference_form, plugin_code, strip_reserved
from .discovery import (  # noqa: F401  (re-exported: the registry's public names)
    BUNDLED_DISTRIBUTIONS,
    DATA,
    DISABLE_ENV,
    DISABLED,
    ENTRY_POINT_GROUPS,
    FAILED,
    HOOKS,
    INTERFACES,
    LOAD_ENV,
    LOADED,
    REGISTER_HOOKS,
    STRICT_ENV,
    VIEW,
    Origin,
    PluginRecord,
    checked_class_id,
    class_id,
    describe,
    failed_record,
    is_bundled,
    kind_of,
    scan_entry_points,
    validate_class,
)
from .hooks import add_to_manager

logger = logging.getLogger("digits_core.plugins")


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
        self._templates_checked = False
        self._pm: pluggy.PluginManager | None = None
        self._records: list[PluginRecord] = []
        self._classes: dict[str, dict[str, type]] = {DATA: {}, VIEW: {}}
        self._extra_specs: list[Any] = []

    # -- public API ----------------------------------------------------------

    def register(self, plugin: Any, *, replace: bool = False, check: bool = True) -> Any:
        """Register a plugin class or hook module in this process.

        A data or view class is checked at once, so a mistake shows where
        it was made (a notebook cell, a script) rather than as a "failed"
        line in a listing later.

        Args:
            plugin: A :class:`~digits_core.DataIngestion` or
                :class:`~digits_core.View` subclass, or a module/object with
                ``@digits_core.hookimpl`` functions.
            replace: Let a class take over an id already registered: an
                edited class re-registered from a notebook cell replaces the
                old one, or a class swaps in for a loaded plugin (e.g. a
                bundled view).
            check: Raise on a contract error or a clashing id (default). With
                ``False`` the class is registered as is and a problem shows
                as a ``failed`` record, as for installed plugins.

        Returns:
            ``plugin`` unchanged, so this works as a class decorator.

        Raises:
            PluginLoadError: The class breaks the plugin contract (the
                message names the method and why), or its id is taken by
                another class registered in this process or by a loaded
                plugin, and ``replace`` is not set.
        """
        kind = kind_of(plugin)
        plugin_id = checked_class_id(kind, plugin) if check and kind in INTERFACES else None
        with self._lock:
            if any(p is plugin for p, _r in self._in_process):
                return plugin  # registering the same class twice is a no-op
            if plugin_id is not None:
                taken = [p for p, _r in self._in_process if kind_of(p) == kind and class_id(p) == plugin_id]
                if replace:
                    self._in_process = [(p, r) for p, r in self._in_process if not any(p is t for t in taken)]
                elif taken:
                    raise PluginLoadError(
                        plugin_id,
                        f"the id is already registered in this process by "
                        f"{taken[0].__qualname__}; pass replace=True to use the new class "
                        f"(e.g. a re-run notebook cell), or give it another plugin_id",
                    )
                elif self._built and plugin_id in self._classes.get(kind, {}):
                    raise PluginLoadError(
                        plugin_id,
                        "the id is already used by a loaded plugin; pass "
                        "replace=True to swap this class in, or give it another plugin_id",
                    )
            self._in_process.append((plugin, replace))
            self._built = False
        return plugin

    def add_hookspecs(self, module_or_class: Any) -> None:
        """Declare more hooks (``@hookspec`` functions), e.g. for plugins extending other plugins.

        Args:
            module_or_class: A module or class with :data:`digits_core.plugins.hookspecs.hookspec`
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

    def records(self, *, include_disabled: bool = True, check_templates: bool = True) -> list[PluginRecord]:
        """Return every plugin discovery saw, loaded, disabled or failed.

        Listing runs :meth:`check_templates` first (unless ``check_templates=False``),
        so a plugin whose template does not compile is listed ``failed``.
        """
        self._ensure_built()
        if check_templates:
            self.check_templates()
        return [r for r in self._records if include_disabled or r.status != DISABLED]

    def check_templates(self) -> None:
        """Compile the templates of every loaded data and view plugin, once per discovery.

        Loading a plugin checks its forms only; a plugin whose template does
        not compile (or imports a missing template) becomes ``failed`` here
        and leaves the lookups. Listing the plugins and the web server (at
        start) call this; a lookup by id does not (start-up of
        ``digits dataset create``), see :func:`digits_core.plugins.contract.check_at_load`.
        """
        self._ensure_built()
        with self._lock:
            if self._templates_checked:
                return
            self._templates_checked = True
            failed = []
            for record in self._records:
                if record.status == LOADED and record.kind in INTERFACES:
                    problem = check_at_load(record.kind, record.obj)
                    if problem:
                        record.status, record.error = FAILED, problem
                        if record.id is not None and self._classes[record.kind].get(record.id) is record.obj:
                            del self._classes[record.kind][record.id]
                        failed.append(record)
            self._report_failures(failed)

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
    def hook(self) -> Any:
        """The pluggy hook relay (``registry.hook.digits_dataset_created(dataset=...)``)."""
        return self._manager().hook

    def call_hook(self, name: str, /, **kwargs: Any) -> Any:
        """Call hook ``name`` through pluggy, containing plugin failures.

        Wrappers, ``tryfirst``/``trylast`` and ``firstresult`` apply as in
        pluggy. A plain implementation that raises is logged with its plugin's
        name and skipped, so one broken plugin cannot stop a job (the same
        holds for ``registry.hook.<name>(...)``). A mistake of the caller (an
        unknown hook, a missing or unexpected argument) raises ``TypeError``
        and is never blamed on a plugin.

        Args:
            name: Hook name from :mod:`digits_core.plugins.hookspecs` (or a spec added
                with :meth:`add_hookspecs`).
            **kwargs: The hook's arguments (implementations may take fewer).

        Returns:
            The non-``None`` results in pluggy's call order, or for a
            ``firstresult`` hook the first non-``None`` result (or ``None``).

        Raises:
            TypeError: No such hook, or arguments that do not match its spec.
        """
        caller = getattr(self._manager().hook, name, None)
        if caller is None or caller.spec is None:
            raise TypeError(f"call_hook: no hook named {name!r} is declared (see digits_core.plugins.hookspecs)")
        expected = set(caller.spec.argnames)
        if set(kwargs) != expected:
            missing, extra = sorted(expected - set(kwargs)), sorted(set(kwargs) - expected)
            raise TypeError(
                f"call_hook({name!r}): arguments must be {sorted(expected)}"
                + (f"; missing {missing}" if missing else "")
                + (f"; unexpected {extra}" if extra else "")
            )
        return caller(**kwargs)

    # -- building ------------------------------------------------------------

    def _manager(self) -> pluggy.PluginManager:
        self._ensure_built()
        assert self._pm is not None  # set by _build
        return self._pm

    def _get(self, kind: str, plugin_id: str) -> Any:
        self._ensure_built()
        try:
            return self._classes[kind][plugin_id]
        except KeyError:
            pass
        noun = "data plugin" if kind == DATA else "view plugin"
        for record in self._records:
            if record.kind == kind and plugin_id in (record.id, record.name) and record.status != LOADED:
                raise PluginNotFoundError(
                    plugin_id,
                    f'The {noun} "{plugin_id}" is {record.status}: {record.error}. '
                    "Run `digits plugins --all` for details.",
                )
        available = ", ".join(sorted(self._classes[kind])) or "none"
        raise PluginNotFoundError(
            plugin_id,
            f'No {noun} with id "{plugin_id}" is installed (available: {available}). '
            "Install the plugin's package with pip, then check `digits plugins`.",
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
        origins: dict[str, Origin] = {}
        replacing: set[str] = set()

        if self._use_entry_points:
            if self._scan is None:
                self._scan = list(scan_entry_points())
            for record, obj in self._scan:
                record = PluginRecord(**{**record.to_dict(), "obj": obj})  # a fresh copy per build
                if record.status != LOADED:
                    records.append(record)
                    continue
                add_to_manager(pm, record, obj, origins, records)

        for index, (obj, replace) in enumerate(self._in_process):
            kind = kind_of(obj)
            name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)
            record = PluginRecord(kind=kind, name=name, source="in-process", obj=obj)
            plugin_name = f"in-process:{index}:{name}"
            if replace:
                replacing.add(plugin_name)
            add_to_manager(pm, record, obj, origins, records, plugin_name=plugin_name)

        try:  # unknown hooks were attributed and their plugins unregistered above; this is pluggy's own word
            pm.check_pending()
        except pluggy.PluginValidationError as exc:  # pragma: no cover - a case the per-plugin check missed
            logger.warning("Plugin hook validation: %s", exc)

        classes = resolve_clashes(self._collect_classes(pm, origins, replacing, records))
        for record in records:
            if record.status == LOADED and record.kind in INTERFACES:
                problem = check_at_load(record.kind, record.obj, templates=False)  # forms only: cheap
                if problem:
                    record.status, record.error = FAILED, problem
                    if record.id is not None:
                        classes[record.kind].pop(record.id, None)

        self._report_failures([r for r in records if r.status == FAILED])
        self._pm, self._records, self._classes = pm, records, classes
        self._templates_checked = False

    @staticmethod
    def _report_failures(records: list[PluginRecord]) -> None:
        """Log each failed plugin; with ``DIGITS_STRICT_PLUGINS`` set, raise for the first instead."""
        strict = os.environ.get(STRICT_ENV, "").strip().lower() in {"1", "true", "yes", "on"}
        for record in records:
            logger.warning(
                'Plugin "%s" (%s %s) failed to load and is skipped: %s',
                record.id or record.name,
                record.distribution or record.source,
                record.version or "",
                record.error,
            )
            if strict:
                raise PluginLoadError(record.id or record.name, record.error or "failed to load")

    @staticmethod
    def _collect_classes(
        pm: pluggy.PluginManager, origins: dict[str, Origin], replacing: set[str], records: list[PluginRecord]
    ) -> list[tuple[PluginRecord, Origin]]:
        """Classes from every ``digits_register_*`` implementation, each attributed to (and contained in) its plugin."""
        candidates: list[tuple[PluginRecord, Origin]] = []
        for kind, hook_name in REGISTER_HOOKS.items():
            for impl in getattr(pm.hook, hook_name).get_hookimpls():
                origin = origins[impl.plugin_name]
                origin.replace = impl.plugin_name in replacing
                function = getattr(impl.plugin, "plugin", None)
                function = getattr(function, hook_name, None) if function is not None else None
                try:
                    provided = list((function or impl.function)() or [])
                except Exception as exc:  # noqa: BLE001 - contain plugin failures
                    records.append(failed_record(kind, origin, None, f"{hook_name}() raised {describe(exc)}"))
                    continue
                for plugin_class in provided:
                    record = validate_class(kind, plugin_class, origin)
                    records.append(record)
                    if record.status == LOADED:
                        candidates.append((record, origin))
        return candidates


#: The process-wide registry used by the CLI, the web UI and the API.
registry = PluginRegistry()


def _status_changed(job: Any, old_status: str, new_status: str) -> None:
    registry.call_hook("digits_job_status_changed", job=job, old_status=old_status, new_status=new_status)


# The job store tells listeners; the plugin layer owns the hook (storage never calls up into it).
add_status_listener(_status_changed)


def inference_plugin(
    plugin_id: str,
    userdata: dict,
    form_data: dict | None,
    no_form: str = "give image files, a folder or a list file instead",
) -> tuple[Any, dict]:
    """The data plugin ``plugin_id`` for inference (the dataset's userdata plus its inference form's values).

    Args:
        plugin_id: The dataset's data plugin.
        userdata: The dataset's userdata.
        form_data: Values of the plugin's inference form, validated by it (``None`` or empty: none).
        no_form: What to do instead, said when values are given and the plugin has no inference form.

    Returns:
        ``(plugin instance, the validated form values)``.

    Raises:
        InferenceError: Values given to a plugin without an inference form.
        FormValidationError: A value the form refuses (on its field).
    """
    from ..forms import validate_values  # forms loads WTForms: only when a plugin is instantiated for inference

    plugin = registry.get_data_ingestion(plugin_id)
    userdata = strip_reserved("data", userdata, plugin_id)
    values: dict = {}
    if form_data:
        form = inference_form(plugin, userdata)
        if form is None:
            raise InferenceError(f'Data plugin "{plugin_id}" has no inference form; {no_form}.')
        values = validate_values(form, form_data, f'inference form of plugin "{plugin_id}"')
    with plugin_code(plugin_id, "__init__"):
        return plugin(is_inference_db=True, **{**userdata, **values}), values
