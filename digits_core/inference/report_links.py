"""Static files a view's template links itself, inlined into an offline HTML report.

A view's templates may write ``<link rel="stylesheet" href="...">`` and
``<script src="..."></script>`` to its own static files, at any of the
addresses the web UI serves them (DIGITS 6 templates do:
``/extension-static/view/<id>/css/app.css``)::

    /plugins/view/<id>/static/<path>
    /extension-static/view/<id>/<path>
    /digits/extension-static/view/<id>/<path>

On the web page those addresses work; in a report written to a file they
would point nowhere, so :func:`inline_static_links` replaces each one that
names the report's own view by the file's content, read through
:meth:`digits_core.View.static_file` (never outside the view's static
folders). A link to another plugin, or to a file the view lacks, is left as
it is and logged.
"""

from __future__ import annotations

import html
import logging
import re
from typing import Any

logger = logging.getLogger("digits_core.inference")

_ADDRESS = r"(?:/digits)?/extension-static/view/(?P<id>[^/\"']+)/(?P<path>[^\"'?#]+)|/plugins/view/(?P<id2>[^/\"']+)/static/(?P<path2>[^\"'?#]+)"
_STYLESHEET = re.compile(
    r"<link\b(?=[^>]*\brel=[\"']?stylesheet)[^>]*\bhref=[\"'](?:" + _ADDRESS + r")[^\"']*[\"'][^>]*>", re.I
)
_SCRIPT = re.compile(r"<script\b[^>]*\bsrc=[\"'](?:" + _ADDRESS + r")[^\"']*[\"'][^>]*>\s*</script>", re.I)


def _linked_file(view: Any, match: re.Match) -> tuple[str, str] | None:
    """``(path, text)`` of the view's static file ``match`` names, or ``None`` (another view's, or missing)."""
    plugin_id = match.group("id") or match.group("id2")
    path = match.group("path") or match.group("path2")
    own_id = type(view).get_id()
    if plugin_id != own_id:
        logger.warning(
            'View "%s": the report keeps the link to %s (a file of view "%s", not inlined)', own_id, path, plugin_id
        )
        return None
    target = type(view).static_file(path)
    if target is None:
        logger.warning('View "%s": its template links %s, which its static folder lacks', own_id, path)
        return None
    return path, target.read_text(encoding="utf-8").replace("</", "<\\/")


def inline_static_links(page: str, view: Any) -> str:
    """``page`` with each ``<link>``/``<script src>`` to the view's own static files replaced by the file inline."""

    def style(match: re.Match) -> str:
        found = _linked_file(view, match)
        return (
            match.group(0)
            if found is None
            else (f'<style data-view-static="{html.escape(found[0])}">\n{found[1]}\n</style>')
        )

    def script(match: re.Match) -> str:
        found = _linked_file(view, match)
        return (
            match.group(0)
            if found is None
            else (f'<script data-view-static="{html.escape(found[0])}">\n{found[1]}\n</script>')
        )

    return _SCRIPT.sub(script, _STYLESHEET.sub(style, page))
