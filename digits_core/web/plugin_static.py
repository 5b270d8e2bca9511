"""Serve view plugins' static files under ``/plugins/view/<id>/static/<path>``.

Only files inside the folder :meth:`View.get_static_folder` returns are
served; anything that resolves outside it (``..``, ``%2e%2e``, absolute
paths, symlinks) is a 404.
"""

from __future__ import annotations

from flask import Blueprint, abort, send_file

from ..errors import PluginNotFoundError
from .security import safe_join

bp = Blueprint("plugin_static", __name__)


@bp.get("/plugins/view/<plugin_id>/static/<path:filename>")
def view_static(plugin_id: str, filename: str):
    """One static file of a view plugin."""
    from ..plugin_registry import registry

    try:
        view_class = registry.get_view(plugin_id)
    except PluginNotFoundError:
        abort(404)
    folder = view_class.get_static_folder()
    if folder is None:
        abort(404)
    target = safe_join(folder, filename)
    if not target.is_file():
        abort(404)
    return send_file(target, max_age=3600)


@bp.get("/plugins/data/<plugin_id>/static/<path:filename>")
def data_static(plugin_id: str, filename: str):
    """One static file of a data plugin (a ``static`` folder next to its module)."""
    import inspect
    from pathlib import Path

    from ..plugin_registry import registry

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
