"""Which plugin keeps an id two plugins claim (part of :mod:`digits_core.plugins.registry`).

A bundled plugin keeps its id unless the newcomer sets ``replaces_bundled =
True``; an in-process registration with ``replace=True`` wins; two
third-party entry points claiming one id both fail; the losers are marked
failed (or disabled, when replaced on purpose) with a message naming the winner.
"""

from __future__ import annotations

from .discovery import DATA, DISABLE_ENV, DISABLED, FAILED, VIEW, Origin, PluginRecord, is_bundled


def _where(record: PluginRecord) -> str:
    cls = record.obj
    place = "bundled" if is_bundled(record.distribution) else (record.distribution or "in-process")
    return f"{cls.__module__}.{cls.__qualname__} ({place})"


def _winner(group: list[tuple[PluginRecord, Origin]]) -> tuple[PluginRecord | None, str]:
    """The record that keeps the id (``None``: nobody), and how the others lose.

    How: ``replaced`` (the winner replaces them on purpose), ``bundled`` (the
    winner is bundled) or ``taken`` (otherwise).
    """
    if len(group) == 1:
        return group[0][0], "taken"
    explicit = [r for r, o in group if o.source == "in-process" and o.replace]
    bundled = [r for r, o in group if o.source != "in-process" and is_bundled(r.distribution)]
    on_purpose = [r for r, _o in group if r not in bundled and getattr(r.obj, "replaces_bundled", False) is True]
    entry_points = [r for r, o in group if o.source != "in-process"]
    winner = None
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
    if winner is not None and (winner in explicit or winner in on_purpose):
        return winner, "replaced"
    return winner, "bundled" if winner is not None and winner in bundled else "taken"


def resolve_clashes(candidates: list[tuple[PluginRecord, Origin]]) -> dict[str, dict[str, type]]:
    """Decide which plugin keeps each id; mark the others failed (or disabled when replaced on purpose).

    Args:
        candidates: The loaded data/view records with their origins.

    Returns:
        kind -> plugin id -> the winning class.
    """
    groups: dict[tuple[str, str], list[tuple[PluginRecord, Origin]]] = {}
    for record, origin in candidates:
        assert record.id is not None  # validated records have an id
        groups.setdefault((record.kind, record.id), []).append((record, origin))
    classes: dict[str, dict[str, type]] = {DATA: {}, VIEW: {}}
    for (kind, plugin_id), group in groups.items():
        winner, how = _winner(group)
        for record, _origin in group:
            if record is winner:
                continue
            if winner is not None and how == "replaced":
                record.status = DISABLED
                record.error = f'replaced by {_where(winner)}, which takes over the id "{plugin_id}" on purpose'
            elif winner is not None and how == "bundled":
                record.status = FAILED
                record.error = (
                    f'id "{plugin_id}" is already used by the bundled plugin {_where(winner)}; rename this '
                    f"plugin (its get_id() or plugin_id), or disable the bundled one with {DISABLE_ENV}="
                    f"{winner.distribution}, or set `replaces_bundled = True` on its class to replace the "
                    "bundled one on purpose"
                )
            elif winner is not None:
                record.status = FAILED
                record.error = (
                    f'id "{plugin_id}" is already used by {_where(winner)}; rename one of them '
                    "or register with replace=True"
                )
            else:
                rivals = ", ".join(_where(r) for r, _ in group if r is not record)
                record.status = FAILED
                record.error = (
                    f'id "{plugin_id}" is also claimed by {rivals}; neither loads. Uninstall one, or '
                    f"disable one by distribution name in {DISABLE_ENV}"
                )
        if winner is not None:
            classes[kind][plugin_id] = winner.obj
    return classes
