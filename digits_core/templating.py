"""The Jinja2 environment every plugin template is rendered in.

Plugin templates (``get_dataset_template``, ``get_inference_template``,
``get_config_template`` and the view templates) are rendered with
autoescaping on, by the web UI and by HTML reports alike, and may import the
form macros of ``helper.html`` as DIGITS plugins did::

    {% from "helper.html" import render_field, render_form, print_errors %}

``render_field(field)`` draws a label, the input, its description and its
errors; ``render_form(form)`` draws every field; ``print_errors(form)``
lists each invalid field with its messages. The other macros of DIGITS 6's
``helper.html`` are there too: ``print_flashes()`` (Flask's flashed
messages, when rendered inside the web UI), ``mark_errors(items)`` (the
`` has-error`` class when any form or field in ``items`` has errors) and
``serve_file(obj, path)`` (the path as text: the core serves no job files
from plugin templates).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

#: The folder holding ``helper.html`` (shared with the web UI's own templates).
HELPER_TEMPLATES = Path(__file__).resolve().parent / "web" / "templates"


@functools.lru_cache(maxsize=1)
def plugin_environment() -> Any:
    """Return the shared Jinja2 environment for plugin templates (autoescape on)."""
    import jinja2

    return jinja2.Environment(autoescape=True, loader=jinja2.FileSystemLoader(str(HELPER_TEMPLATES)))


#: What a plugin template writes as an inline ``<script>``'s nonce (``<script nonce="...">``); the web UI
#: puts the page's Content-Security-Policy nonce in its place (fragments are rendered before the page is).
CSP_NONCE_PLACEHOLDER = "digits-csp-nonce"


def give_csp_nonce(html: Any, nonce: str) -> Any:
    """``html`` (a rendered fragment, or a list of them) with :data:`CSP_NONCE_PLACEHOLDER` nonces set to ``nonce``."""
    if isinstance(html, list):
        return [give_csp_nonce(item, nonce) for item in html]
    if not isinstance(html, str):
        return html
    # str.replace, not Markup.replace (which would escape the quotes it is given)
    return type(html)(str.replace(html, f'nonce="{CSP_NONCE_PLACEHOLDER}"', f'nonce="{nonce}"'))


@functools.lru_cache(maxsize=256)
def template_problem(source: str) -> str | None:
    """Return why a plugin template cannot render, or ``None``: a syntax error or an imported template that is missing.

    Cheap: the source is compiled, not rendered, and the answer is kept per
    source (it depends on nothing else: ``helper.html`` is the core's own),
    so the checks of each plugin discovery and each web app compile a
    template once per process.
    """
    import jinja2
    from jinja2 import meta

    env = plugin_environment()
    try:
        tree = env.parse(source)
        env.compile(tree)
    except jinja2.TemplateSyntaxError as exc:
        return f"template syntax error on line {exc.lineno}: {exc.message}"
    for name in meta.find_referenced_templates(tree):
        if name is None:
            continue  # a computed name: only rendering can tell
        try:
            env.get_template(name)
        except jinja2.TemplateNotFound:
            return f'the template imports "{name}", which does not exist (available: helper.html)'
        except jinja2.TemplateSyntaxError as exc:
            return f'the imported template "{name}" has a syntax error: {exc.message}'
    return None


def render_plugin_template(source: str, context: dict[str, Any] | None = None) -> str:
    """Render a plugin's ``(jinja_source, context)`` pair to HTML.

    Args:
        source: The Jinja2 source a plugin returned.
        context: Its context (``form`` included for form templates).
    """
    return plugin_environment().from_string(source).render(**(context or {}))


__all__ = ["CSP_NONCE_PLACEHOLDER", "plugin_environment", "render_plugin_template", "template_problem"]
