"""The plugin contract, checked where mistakes are made.

* :func:`form_class` / :func:`plugin_form` accept what plugins return from
  ``get_dataset_form``, ``get_inference_form`` and ``get_config_form``: a
  WTForms form **class** or a form **instance** (the DIGITS 6 habit), and
  ``get_inference_form`` / ``get_inference_template`` as static, class or
  instance methods.
* :func:`check_at_load` is the contract check of a data or view plugin's
  forms and templates: forms constructible, no form field named after
  something the framework owns, templates compile and the templates they
  import exist. A plugin failing it is listed ``failed`` with the method and
  the reason. The registry runs the form part (``templates=False``) when it
  loads a plugin and the whole check, which compiles every template (the
  costly half), only where templates matter: when the plugins are listed
  (``digits plugins``, the web server, which checks at start) and in
  ``digits plugin check``. A plain lookup by id (``digits dataset create``)
  compiles none; a broken template then fails at its first render with an
  error naming the plugin and the method.
* :func:`plugin_code` turns an exception raised by plugin code into one
  :class:`~digits_core.errors.PluginCodeError` naming the plugin, the method
  and the cause (the CLI prints it as one ``error:`` line, the web UI as an
  inline error).
* :func:`strip_reserved` removes framework-owned keys from persisted
  userdata before a plugin is re-created from it.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from .. import templating  # called as templating.template_problem: tests watch what gets compiled
from ..deprecated import RESERVED_USERDATA_KEY
from ..errors import DigitsError, PluginCodeError
from ..forms import form_class, is_form_class, user_fields  # noqa: F401  (form_class, is_form_class: re-exported)
from ..interfaces import DataIngestion, View

logger = logging.getLogger("digits_core.plugins")

#: Keyword arguments and attributes the core owns on every data plugin.
DATA_RESERVED = frozenset({"is_inference_db", "userdata"})
#: Keyword arguments and attributes the core owns on every view.
VIEW_RESERVED = frozenset({"dataset", "config"})


def _interface(kind: str):
    return DataIngestion if kind == "data" else View


def reserved_names(kind: str) -> frozenset[str]:
    """Return the names a plugin of ``kind`` (``"data"``/``"view"``) may not use as form fields or userdata keys.

    They are the constructor arguments the core passes itself plus every
    public attribute and method of the interface (a form field becomes an
    attribute of the instance, so ``encode_entry`` as a field would hide the
    method).
    """
    interface = _interface(kind)
    own = DATA_RESERVED if kind == "data" else VIEW_RESERVED
    return own | {name for name in dir(interface) if not name.startswith("_")}


def strip_reserved(kind: str, values: Mapping[str, Any], plugin: str = "") -> dict[str, Any]:
    """Return ``values`` without the keys the framework owns, warning once per key dropped.

    DIGITS 6 plugins stored ``userdata['is_inference_db']``; passing it back
    next to the core's own ``is_inference_db=`` would fail with "multiple
    values for keyword argument".
    """
    reserved = reserved_names(kind)
    for key in sorted(k for k in values if k in reserved):
        if kind == "data":
            RESERVED_USERDATA_KEY.warn(plugin=plugin, key=key)
        else:
            logger.warning('View "%s": ignoring the config value "%s": the framework owns that name', plugin, key)
    return {k: v for k, v in values.items() if k not in reserved}


def needs_instance(plugin_cls: type, method: str) -> bool:
    """Whether a plugin's ``method`` is an instance method (the DIGITS 6 habit), called on a plugin instance."""
    attribute = inspect.getattr_static(plugin_cls, method, None)
    return inspect.isfunction(attribute)  # a plain function in the class body: an instance method


def call_plugin_method(
    plugin_cls: type,
    method: str,
    *args: Any,
    kind: str = "data",
    init: Mapping[str, Any] | None = None,
    instance: Any = None,
) -> Any:
    """Call ``method`` of a plugin whether it is a static, class or instance method.

    For an instance method a plugin is created from ``init`` (framework
    keys stripped) unless ``instance`` is given. Exceptions from plugin code
    become :class:`~digits_core.errors.PluginCodeError`.
    """
    plugin_id = _plugin_id(plugin_cls)
    with plugin_code(plugin_id, method):
        if instance is None and needs_instance(plugin_cls, method):
            values = strip_reserved(kind, dict(init or {}), plugin_id)
            extra = {"is_inference_db": True} if kind == "data" and "inference" in method else {}
            instance = plugin_cls(**extra, **values) if kind == "data" else plugin_cls(None, **values)
        target = instance if instance is not None else plugin_cls
        return getattr(target, method)(*args)


def plugin_form(
    plugin_cls: type, method: str, *, kind: str = "data", init: Mapping[str, Any] | None = None, instance: Any = None
):
    """Return the form class a plugin's ``get_*_form`` method gives (it may return a class or an instance).

    Raises:
        PluginCodeError: The method raised, or returned something that is not a form.
    """
    result = call_plugin_method(plugin_cls, method, kind=kind, init=init, instance=instance)
    with plugin_code(_plugin_id(plugin_cls), method):
        return form_class(result)


def _plugin_id(plugin_cls: Any) -> str:
    try:
        return str(plugin_cls.get_id())
    except Exception:  # noqa: BLE001 - a broken get_id must not hide the real error
        return getattr(plugin_cls, "__qualname__", repr(plugin_cls))


@contextlib.contextmanager
def plugin_code(plugin: str, method: str) -> Iterator[None]:
    """Run plugin code; re-raise any non-:class:`DigitsError` exception as :class:`PluginCodeError`.

    Args:
        plugin: The plugin's id.
        method: What was called (``get_dataset_form``, ``View.__init__``, ...).
    """
    try:
        yield
    except DigitsError:
        raise
    except Exception as exc:  # noqa: BLE001 - every plugin failure gets one clear line
        raise PluginCodeError(plugin, method, exc) from exc


def _form_problems(kind: str, form_cls: Any, method: str) -> tuple[Any, str | None]:
    """Build the form; return ``(form, problem)``."""
    try:
        form = form_cls(meta={"csrf": False})
    except Exception as exc:  # noqa: BLE001
        return None, f"{method}(): the form cannot be constructed: {type(exc).__name__}: {exc}"
    clash = sorted(f.name for f in user_fields(form) if f.name in reserved_names(kind))
    if clash:
        return form, (
            f"{method}(): form field(s) {', '.join(clash)} use a name the framework owns "
            f"(reserved: is_inference_db, userdata and the interface's method names); rename the field(s)"
        )
    return form, None


def _template_problem(plugin_cls: type, method: str, form: Any, kind: str) -> str | None:
    try:
        source, _context = call_plugin_method(plugin_cls, method, form, kind=kind)
    except PluginCodeError as exc:
        return f"{method}() raised {exc.cause}"
    if source is None:
        return None
    if not isinstance(source, str):
        return f"{method}() must return (jinja_source, context), got a {type(source).__name__} as the source"
    problem = templating.template_problem(source)
    return f"{method}(): {problem}" if problem else None


def _method_pairs(kind: str) -> list[tuple[str, str]]:
    if kind == "data":
        return [("get_dataset_form", "get_dataset_template"), ("get_inference_form", "get_inference_template")]
    return [("get_config_form", "get_config_template")]


def _checked_forms(kind: str, plugin_cls: type) -> tuple[list[tuple[str, Any]], str | None]:
    """Build each static form of a plugin; return ``([(template method, form)], problem)``."""
    forms: list[tuple[str, Any]] = []
    for form_method, template_method in _method_pairs(kind):
        if needs_instance(plugin_cls, form_method):
            continue  # needs dataset userdata: checked by `digits plugin check`
        try:
            form_cls = plugin_form(plugin_cls, form_method, kind=kind)
        except PluginCodeError as exc:
            return forms, f"{form_method}() failed: {exc.cause}"
        if form_cls is None:
            continue
        form, problem = _form_problems(kind, form_cls, form_method)
        if problem:
            return forms, problem
        if not needs_instance(plugin_cls, template_method):
            forms.append((template_method, form))
    return forms, None


def check_at_load(kind: str, plugin_cls: type, *, templates: bool = True) -> str | None:
    """The contract check of a data or view plugin's forms and (unless ``templates=False``) templates.

    Returns:
        ``None`` when the plugin passes, else ``"<method>(): <reason>"``.
    """
    forms, problem = _checked_forms(kind, plugin_cls)
    if problem or not templates:
        return problem
    for template_method, form in forms:
        problem = _template_problem(plugin_cls, template_method, form, kind)
        if problem:
            return problem
    return None


def dataset_form(plugin_cls: type):
    """Return the dataset form class of a data plugin (its ``get_dataset_form`` may return a class or an instance).

    Raises:
        PluginCodeError: The plugin's method raised or returned no form.
    """
    form = plugin_form(plugin_cls, "get_dataset_form")
    if form is None:
        raise PluginCodeError(
            _plugin_id(plugin_cls), "get_dataset_form", TypeError("returned None; a data plugin needs a dataset form")
        )
    return form


def inference_form(plugin_cls: type, userdata: Mapping[str, Any] | None = None):
    """Return the inference form class of a data plugin, or ``None``.

    ``get_inference_form`` may be a static method or (as in DIGITS 6) an
    instance method; for the latter the plugin is created as
    ``cls(is_inference_db=True, **userdata)`` with framework keys stripped.
    """
    return plugin_form(plugin_cls, "get_inference_form", init=userdata)


def config_form(view_cls: type):
    """Return the config form class of a view, or ``None`` (class or instance accepted)."""
    return plugin_form(view_cls, "get_config_form", kind="view")


def create_view(view_cls: type, dataset: Any, config: Mapping[str, Any], context: Any = None):
    """Create a view as the core does (``cls(dataset, **config)``), naming the plugin if its ``__init__`` raises.

    Args:
        view_cls: The view class.
        dataset: What the view gets as ``dataset``.
        config: The validated config values.
        context: The :class:`~digits_core.interfaces.view.ViewContext` of the model the results
            come from, set as the view's ``model_context`` (``None``: no model at hand).
    """
    with plugin_code(_plugin_id(view_cls), "View.__init__"):
        view = view_cls(dataset, **strip_reserved("view", dict(config), _plugin_id(view_cls)))
    if context is not None:
        view.model_context = context
    return view


def template_method(plugin_cls: type, method: str, userdata: Mapping[str, Any] | None = None):
    """Return a callable ``f(form)`` for a plugin's ``get_*_template`` method, static or instance (DIGITS 6)."""

    def render(form):
        return call_plugin_method(plugin_cls, method, form, init=userdata)

    render.__qualname__ = f"{_plugin_id(plugin_cls)}.{method}"
    return render
