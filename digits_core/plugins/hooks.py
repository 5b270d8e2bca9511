"""Plugins into pluggy: class providers, contained hook calls, unknown-hook checks.

Part of the plugin registry (:mod:`digits_core.plugins.registry`). A data or
view class is registered through a provider implementing its
``digits_register_*`` hook; a hook plugin is registered through a proxy whose
plain implementations are contained (one that raises is logged and skipped);
a hook plugin implementing a hook no spec declares fails, naming the hook and
the closest declared one.
"""

from __future__ import annotations

import difflib
import functools
import logging
from collections.abc import Callable
from typing import Any

import pluggy

from . import hookspecs
from .discovery import (
    DATA,
    ENTRY_POINT_GROUPS,
    FAILED,
    INTERFACES,
    LOADED,
    VIEW,
    Origin,
    PluginRecord,
    describe,
)

logger = logging.getLogger("digits_core.plugins")


class ClassProvider:
    """Adapts a plugin class to the ``digits_register_*`` hook of its kind."""

    def __init__(self, kind: str, plugin_class: Any):
        self.kind = kind
        self.plugin_class = plugin_class

    @hookspecs.hookimpl
    def digits_register_data_ingestions(self) -> list[Any]:
        return [self.plugin_class] if self.kind == DATA else []

    @hookspecs.hookimpl
    def digits_register_views(self) -> list[Any]:
        return [self.plugin_class] if self.kind == VIEW else []


def contained(function: Callable[..., Any], plugin: str, hook_name: str) -> Callable[..., Any]:
    """Wrap a hook implementation so that an exception is logged and the call yields ``None``."""

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - one plugin must not stop the others
            logger.warning(
                'Plugin "%s" failed in hook %s: %s',
                plugin,
                hook_name,
                describe(exc),
                exc_info=logger.isEnabledFor(logging.INFO),
            )
            return None

    return call


class ContainedHooks:
    """What pluggy sees of a hook plugin: its plain implementations wrapped by :func:`contained`."""

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
                function = contained(function, label, name)
            setattr(self, name, function)


def add_to_manager(
    pm: pluggy.PluginManager,
    record: PluginRecord,
    obj: Any,
    origins: dict[str, Origin],
    records: list[PluginRecord],
    plugin_name: str | None = None,
) -> None:
    """Register ``obj`` with pluggy (data/view classes through a provider) and append its record.

    Args:
        pm: The plugin manager being built.
        record: The plugin's record (its status and hooks are updated).
        obj: The plugin class, module or object.
        origins: pluggy plugin name -> where it came from (added to).
        records: Every record of this build (``record`` is appended).
        plugin_name: The pluggy name; by default built from the entry point.
    """
    plugin_name = plugin_name or f"{ENTRY_POINT_GROUPS[record.kind]}:{record.distribution}:{record.name}"
    origins[plugin_name] = Origin(record.name, record.distribution, record.version, record.source, order=len(origins))
    if record.kind in INTERFACES:
        pm.register(ClassProvider(record.kind, obj), name=plugin_name)
        return
    label = record.name if record.source == "in-process" else f"{record.name} ({record.distribution})"
    proxy = ContainedHooks(pm, obj, label)
    try:
        pm.register(proxy, name=plugin_name)
    except Exception as exc:  # noqa: BLE001 - pluggy validation errors
        record.status, record.error = FAILED, describe(exc)
    else:
        callers = pm.get_hookcallers(proxy) or []
        record.hooks = sorted(caller.name for caller in callers)
        unknown = [
            c.name
            for c in callers
            if c.spec is None and not any(i.optionalhook for i in c.get_hookimpls() if i.plugin is proxy)
        ]
        if unknown:
            record.status = FAILED
            record.error = (
                f"implements unknown hook {', '.join(_with_hints(pm, unknown))}: no such hook in "
                "digits_core.plugins.hookspecs (see the hook table in docs/writing-plugins.md)"
            )
            pm.unregister(proxy)
        elif not record.hooks and record.status == LOADED:
            record.status, record.error = FAILED, "implements no digits hook (use @digits_core.hookimpl)"
            pm.unregister(proxy)
    records.append(record)


def _with_hints(pm: pluggy.PluginManager, unknown: list[str]) -> list[str]:
    known = [n for n in dir(pm.hook) if getattr(getattr(pm.hook, n), "spec", None) is not None]
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=1)
        hints.append(f"{name} (did you mean {close[0]}?)" if close else name)
    return hints
