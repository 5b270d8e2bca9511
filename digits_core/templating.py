"""The Jinja2 environment every plugin template is rendered in.

Plugin templates (``get_dataset_template``, ``get_inference_template``,
``get_config_template`` and the view templates) are rendered with
autoescaping on, by the web UI and by HTML reports alike, and may import the
form macros of ``helper.html`` as DIGITS plugins did::

    {% from "helper.html" import render_field, render_form, print_errors %}

``render_field(field)`` draws a label, the input, its description and its
errors; ``render_form(form)`` draws every field; ``print_errors(form)``
draws a summary when the form has errors.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

#: The folder holding ``helper.html`` (shared with the web UI's own templates).
HELPER_TEMPLATES = Path(__file__).resolve().parent / "web" / "templates"


@functools.lru_cache(maxsize=1)
def plugin_environment():
    """Return the shared Jinja2 environment for plugin templates (autoescape on)."""
    import jinja2

    return jinja2.Environment(autoescape=True, loader=jinja2.FileSystemLoader(str(HELPER_TEMPLATES)))


def render_plugin_template(source: str, context: dict[str, Any] | None = None) -> str:
    """Render a plugin's ``(jinja_source, context)`` pair to HTML.

    Args:
        source: The Jinja2 source a plugin returned.
        context: Its context (``form`` included for form templates).
    """
    return plugin_environment().from_string(source).render(**(context or {}))
