"""Serve plugins' static files under ``/plugins/<kind>/<id>/static/<path>``.

DIGITS 6 templates link them as ``/extension-static/<kind>/<id>/<path>``
(DIGITS 6's route): the same files, served from the same folders. Only files
inside the folder a view's :meth:`View.static_file` searches (or a data
plugin's ``static`` folder) are served; anything that resolves outside it
(``..``, ``%2e%2e``, absolute paths, symlinks) is a 404.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, send_file

from ..errors import PluginNotFoundError
from .security import safe_join

bp = Blueprint("plugin_static", __name__)


@bp.get("/plugins/view/<plugin_id>/static/<path:filename>")
def view_static(plugin_id: str, filename: str) -> Any:
    """One static file of a view plugin."""
    from ..plugins.registry import registry

    try:
        view_class = registry.get_view(plugin_id)
    except PluginNotFoundError:
        abort(404)
    target = view_class.static_file(filename)
    if target is None:
        abort(404)
    return send_file(target, max_age=3600)


@bp.get("/extension-static/<kind>/<plugin_id>/<path:filename>")
@bp.get("/digits/extension-static/<kind>/<plugin_id>/<path:filename>")  # DIGITS 6.1 templates hard-code /digits
def extension_static(kind: str, plugin_id: str, filename: str) -> Any:
    """DIGITS 6's address of a plugin's static file (``kind`` is ``view`` or ``data``)."""
    if kind == "view":
        return view_static(plugin_id, filename)
    if kind == "data":
        return data_static(plugin_id, filename)
    abort(404)


@bp.get("/plugins/data/<plugin_id>/static/<path:filename>")
def data_static(plugin_id: str, filename: str) -> Any:
    """One static file of a data plugin (a ``static`` folder next to its module)."""
    import inspect
    from pathlib import Path

    from ..plugins.registry import registry

    try:
        cls = registry.get_data_ingestion(plugin_id)
    except PluginNotFoundError:
        abort(404)
    folder = Path(inspect.getfile(cls)).resolve().parent / "static"
    if not folder.is_dir():
        abort(404)
    target = safe_join(folder, filename)
    if not target.is_file():
        abort(404)
    return send_file(target, max_age=3600)
