"""Render plugin forms and templates inside our pages.

Plugin templates (``get_dataset_template``, ``get_inference_template``,
``get_config_template``, view templates) are Jinja2 sources rendered with
autoescaping on, with the web UI's template folder on the loader path, so
they can ``{% from "helper.html" import render_field %}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flask import current_app
from markupsafe import Markup
from werkzeug.datastructures import CombinedMultiDict, MultiDict

from ..datasets.reader import resolve_job_files
from ..errors import FormValidationError
from ..forms import bind_form, user_fields, validate_form
from .context import web_context

if TYPE_CHECKING:
    from flask import Request
    from jinja2 import Environment
    from wtforms import Form

    from ..jobs import Job


def plugin_env() -> Environment:
    """The Jinja2 environment for plugin templates (autoescape always on)."""
    env = web_context().plugin_env
    if env is None:
        env = current_app.jinja_env.overlay(autoescape=True)
        web_context().plugin_env = env
    return env


def render_source(source: str | None, context: dict | None, **extra: Any) -> Markup:
    """Render a plugin's Jinja2 source with ``context`` (plus ``extra``); empty for ``None``."""
    if not source:
        return Markup("")
    from flask_wtf.csrf import generate_csrf

    ctx = {"csrf_token": generate_csrf, **(context or {}), **extra}
    return Markup(plugin_env().from_string(source).render(**ctx))


def _plugin_of(function: object, method: str) -> str | None:
    """The id of the loaded plugin whose ``method`` is ``function`` (to name it in an error)."""
    from ..plugins.registry import registry

    try:
        for cls in (*registry.data_ingestions().values(), *registry.views().values()):
            if getattr(cls, method, None) == function:
                return cls.get_id()
    except Exception:  # noqa: BLE001 - only used to word an error
        return None
    return None


def render_plugin_form(form: Form, template_func: Callable[[Form], tuple[str | None, dict | None]] | None) -> Markup:
    """Render ``template_func(form)`` (a plugin's ``get_*_template``) or, without one, every field.

    An exception from the plugin's method or template is shown inline, as one
    line naming the plugin, the method and the cause (the page still renders).
    """
    from ..errors import PluginCodeError

    qualname = getattr(template_func, "__qualname__", "plugin")
    owner, _, method = qualname.rpartition(".")
    plugin = _plugin_of(template_func, method) or owner or "plugin"
    try:
        source, context = (None, None)
        if template_func is not None:
            source, context = template_func(form)
        if not source:
            source, context = '{% from "helper.html" import render_form %}{{ render_form(form) }}', {}
        return render_source(source, context, form=form)
    except Exception as exc:  # noqa: BLE001 - a plugin's bug is reported on the page, not as HTTP 500
        error = exc if isinstance(exc, PluginCodeError) else PluginCodeError(plugin, method or "template", exc)
        current_app.logger.warning("%s", error, exc_info=exc)
        return Markup('<div class="alert alert-bad plugin-error" role="alert">{}</div>').format(f"error: {error}")


def dataset_userdata(ds_job: Job) -> dict:
    """The persisted userdata of a dataset job (what a DIGITS 6 style plugin instance is re-created from)."""
    for path in (ds_job.path / "dataset" / "dataset.json", ds_job.path / "dataset.json"):
        try:
            return resolve_job_files(
                dict(json.loads(path.read_text(encoding="utf-8")).get("userdata") or {}), ds_job.path
            )
        except (OSError, ValueError, AttributeError):
            continue
    return {}


def form_from_request(form_class: type[Form] | Form, request: Request, prefix: str | None = None) -> Form:
    """Bind a plugin form to a browser POST (fields and uploaded files)."""
    parts: list[MultiDict[str, Any]] = [request.files, request.form]
    formdata = CombinedMultiDict(parts) if request.files else request.form
    return bind_form(form_class, formdata=formdata, meta={"csrf": False})


def blank_form(form_class: type[Form] | Form, values: dict | None = None) -> Form:
    """A form showing defaults, or pre-filled from saved values (clone); ``form_class`` may be an instance."""
    from ..forms import form_class as _form_class

    form_class = _form_class(form_class)
    if values:
        known = {f.name for f in user_fields(form_class(meta={"csrf": False}))}
        return bind_form(form_class, {k: v for k, v in values.items() if k in known}, meta={"csrf": False})
    return form_class(meta={"csrf": False})


def jsonable(data: dict) -> dict:
    """Form data made JSON-serializable (file uploads become their file name)."""

    def convert(value: Any) -> Any:
        if hasattr(value, "filename") and hasattr(value, "stream"):
            return value.filename
        return value

    return json.loads(json.dumps({k: convert(v) for k, v in data.items()}, default=str))


def validated(form: Form, form_name: str) -> dict:
    """Validate a bound form; raises FormValidationError (the form keeps per-field errors).

    Values naming server paths outside the data roots fail first (see
    :func:`digits_core.paths.check_form_paths`), so the form's own
    validators never look at (or describe) such a path.
    """
    from ..paths import check_form_paths

    try:
        check_form_paths({field.name: field.data for field in user_fields(form)}, form_name)
    except FormValidationError as exc:
        for name, messages in exc.errors.items():
            form[name].errors = list(messages)
        raise
    return validate_form(form, form_name)


def errors_multidict(errors: dict) -> MultiDict:
    """``{field: [messages]}`` as a MultiDict (for templates)."""
    return MultiDict([(k, m) for k, msgs in errors.items() for m in msgs])
