"""Results pages: run a view over samples and render its templates.

A results page is the view's header template, one view template per
sample, then its summary template (see :class:`digits_core.View`). This
module is shared by ``digits infer``, the Python API and the web UI:

* :func:`run_view` calls ``process_data`` on each sample, in order;
* :func:`render_fragments` renders the header, the samples and the summary
  into HTML fragments (the web UI places them in its own page and serves
  the view's static files itself);
* :func:`render_html` composes the fragments into ONE self-contained HTML
  file: images are already PNG data URIs in the view's output, and the
  view's :attr:`~digits_core.View.stylesheets` and
  :attr:`~digits_core.View.scripts` are inlined from its static folder;
* :func:`report_json` gives the same content for machines: the data each
  ``process_data`` returned and the header/summary template contexts,
  converted to JSON types.

Every template is rendered by Jinja2 with autoescaping on.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import PluginError
from .report_links import inline_static_links

logger = logging.getLogger("digits_core.inference")

#: Styles of the page around the view's fragments.
BASE_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 1.5em auto; max-width: 70em;
  padding: 0 1em; color: #222; background: #fafafa; }
.digits-report-head h1 { font-size: 1.5em; margin-bottom: 0.2em; }
.digits-report-info { display: grid; grid-template-columns: max-content auto; gap: 0.1em 1em; color: #555; font-size: 0.9em; }
.digits-report-info dt { font-weight: bold; }
.digits-report-info dd { margin: 0; }
section { margin: 1em 0; }
"""

PAGE_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="DIGITS Core">
<title>{{ title }}</title>
<style>{{ base_css|safe }}</style>
{% for sheet in stylesheets %}<style data-view-static="{{ sheet.name }}">
{{ sheet.text|safe }}
</style>
{% endfor %}</head>
<body>
<header class="digits-report-head">
<h1>{{ title }}</h1>
{% if info %}<dl class="digits-report-info">{% for key, value in info.items() %}<dt>{{ key }}</dt><dd>{{ value }}</dd>{% endfor %}</dl>{% endif %}
</header>
{% if header %}<section class="digits-view-header">
{{ header }}
</section>
{% endif %}<section class="digits-samples">
{% for sample in samples %}<article class="digits-sample" id="sample-{{ loop.index }}">
{{ sample }}
</article>
{% endfor %}</section>
{% if summary %}<section class="digits-view-summary">
{{ summary }}
</section>
{% endif %}{% for script in scripts %}<script data-view-static="{{ script.name }}">
{{ script.text|safe }}
</script>
{% endfor %}</body>
</html>
"""


@dataclass
class ProcessedSample:
    """One sample after :meth:`View.process_data`.

    Attributes:
        input_id: The sample's name.
        data: What ``process_data`` returned.
    """

    input_id: str
    data: Any


def _environment():
    from ..templating import plugin_environment

    return plugin_environment()


def _view_id(view) -> str:
    try:
        return type(view).get_id() or type(view).__name__
    except Exception:  # noqa: BLE001
        return type(view).__name__


def run_view(view, samples: Iterable[Sequence[Any]]) -> list[ProcessedSample]:
    """Call ``view.process_data`` on each sample, in order.

    Args:
        view: A :class:`~digits_core.View` instance.
        samples: ``(input_id, input_data, output_data, ground_truth)`` tuples.

    Returns:
        One :class:`ProcessedSample` per sample.

    Raises:
        PluginError: The view raised; the message names the view and the sample.
    """
    processed = []
    for input_id, input_data, output_data, ground_truth in samples:
        try:
            data = view.process_data(input_id, input_data, output_data, ground_truth)
        except Exception as exc:  # noqa: BLE001 - a broken view is reported by name
            raise PluginError(
                _view_id(view), f'View "{_view_id(view)}" failed on input "{input_id}": {type(exc).__name__}: {exc}'
            ) from exc
        processed.append(ProcessedSample(str(input_id), data))
    return processed


def _render(env, view, what: str, pair) -> str | None:
    if not pair or pair[0] is None:
        return None
    source, context = pair
    try:
        return env.from_string(source).render(**(context or {}))
    except Exception as exc:  # noqa: BLE001
        raise PluginError(
            _view_id(view), f'View "{_view_id(view)}": its {what} template failed: {type(exc).__name__}: {exc}'
        ) from exc


def render_fragments(view, processed: Sequence[ProcessedSample]) -> dict[str, Any]:
    """Render the view's templates into HTML fragments.

    The header and summary templates are asked for after every sample was
    processed, so they can show statistics gathered in ``process_data``.

    Args:
        view: The view that processed the samples.
        processed: The output of :func:`run_view`.

    Returns:
        ``{"header": str | None, "samples": [str, ...], "summary": str | None}``.

    Raises:
        PluginError: A template failed to render.
    """
    import markupsafe

    env = _environment()
    samples = []
    for sample in processed:
        try:
            pair = view.get_view_template(sample.data)
        except Exception as exc:  # noqa: BLE001
            raise PluginError(
                _view_id(view), f'View "{_view_id(view)}": get_view_template failed on "{sample.input_id}": {exc}'
            ) from exc
        samples.append(markupsafe.Markup(_render(env, view, "view", pair) or ""))
    header = _render(env, view, "header", view.get_header_template())
    summary = _render(env, view, "summary", view.get_summary_template())
    return {
        "header": markupsafe.Markup(header) if header is not None else None,
        "samples": samples,
        "summary": markupsafe.Markup(summary) if summary is not None else None,
    }


def view_static_files(view, kind: str = "stylesheets") -> list[dict[str, str]]:
    """Read the view's CSS (``kind="stylesheets"``) or JS (``"scripts"``) files from its static folder.

    A listed file that is missing is logged and skipped. ``</`` is escaped
    as ``<\\/`` so the text can sit inside a ``<style>``/``<script>`` element.

    Returns:
        ``[{"name": file name, "text": content}]``.
    """
    names = list(getattr(view, kind, ()) or ())
    if not names:
        return []
    folder = type(view).get_static_folder()
    files = []
    for name in names:
        path = type(view).static_file(name) if hasattr(type(view), "static_file") else None
        if path is None:
            logger.warning(
                'View "%s" lists %s "%s" but its static folder %s lacks it', _view_id(view), kind, name, folder
            )
            continue
        files.append({"name": name, "text": path.read_text(encoding="utf-8").replace("</", "<\\/")})
    return files


def render_html(
    view, processed: Sequence[ProcessedSample], *, title: str | None = None, info: dict[str, Any] | None = None
) -> str:
    """Render one self-contained HTML page: header, one block per sample, summary.

    Args:
        view: The view that processed the samples.
        processed: The output of :func:`run_view`.
        title: Page title (default: the view's title).
        info: Key/value pairs listed under the title (model, epoch, dataset...).

    Returns:
        The HTML document, with the view's CSS and JS inlined and no
        external references (links its templates write to its own static
        files are inlined too: :mod:`.report_links`).
    """
    import markupsafe

    fragments = render_fragments(view, processed)
    env = _environment()
    return inline_static_links(
        env.from_string(PAGE_TEMPLATE).render(
            title=title or f"Inference results: {type(view).get_title()}",
            info=info or {},
            base_css=markupsafe.Markup(BASE_CSS),
            stylesheets=view_static_files(view, "stylesheets"),
            scripts=view_static_files(view, "scripts"),
            **fragments,
        ),
        view,
    )


def to_jsonable(value: Any, *, include_images: bool = False) -> Any:
    """Convert numpy values, tuples and sets to JSON types, recursively.

    Strings that are ``data:`` URIs are replaced by ``None`` unless
    ``include_images`` is true (they are large and meant for HTML).
    """
    if isinstance(value, dict):
        return {str(k): to_jsonable(v, include_images=include_images) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [to_jsonable(v, include_images=include_images) for v in value]
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist(), include_images=include_images)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, str):
        if not include_images and value.startswith("data:"):
            return None
        return value
    if value is None or isinstance(value, (bool, int, float)):
        if isinstance(value, float) and not np.isfinite(value):
            return None
        return value
    if hasattr(value, "__html__"):
        return html.unescape(str(value))
    return str(value)


def report_json(view, processed: Sequence[ProcessedSample], *, include_images: bool = False) -> dict[str, Any]:
    """Return the results page's content as JSON-serializable data.

    Args:
        view: The view that processed the samples.
        processed: The output of :func:`run_view`.
        include_images: Keep PNG data URIs (dropped by default).

    Returns:
        ``{"view": id, "samples": [{"input_id", "data"}], "header": context,
        "summary": context}`` where the contexts are those the view's
        header/summary templates received (``None`` when it has none).
    """

    def context(pair):
        if not pair or pair[0] is None:
            return None
        return to_jsonable({k: v for k, v in (pair[1] or {}).items() if k != "form"}, include_images=include_images)

    return {
        "view": _view_id(view),
        "samples": [
            {"input_id": s.input_id, "data": to_jsonable(s.data, include_images=include_images)} for s in processed
        ],
        "header": context(view.get_header_template()),
        "summary": context(view.get_summary_template()),
    }
