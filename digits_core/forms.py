"""One way to fill and validate a plugin's WTForms form, whatever the front door.

The web UI passes the browser's form data, the command line passes the
strings of ``--field value`` options, and the Python API passes a dict of
Python values. All three go through :func:`bind_form` and
:func:`validate_form`, so a value that fails on the web page fails the same
way on the command line.

:func:`add_form_arguments` turns a form class into ``argparse`` options:
``--field-name`` per field, help from the field's label and description,
defaults and choices from the form.

Every function taking a ``form_class`` also takes a form **instance** (what
DIGITS 6 plugins return from ``get_dataset_form()``): its class is used.
"""

from __future__ import annotations

import argparse
import functools
import inspect
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import FormValidationError
from .option_spec import select_choices  # noqa: F401  (the plugin API's select_choices lives with the field generator)

#: Field types that carry no user data.
_IGNORED_FIELD_TYPES = {"SubmitField", "CSRFTokenField", "HiddenField", "FormField", "FieldList"}
#: Strings WTForms' BooleanField reads as False.
_FALSE_STRINGS = ("false", "", "0", "no", "off", "n")


def is_form_class(obj: Any) -> bool:
    """Return whether ``obj`` is a WTForms form class (``wtforms.Form`` or ``BaseForm`` subclass)."""
    from wtforms.form import BaseForm

    return inspect.isclass(obj) and issubclass(obj, BaseForm)


def form_class(form: Any):
    """Return the form class of what a ``get_*_form`` method returned (class, instance or ``None``).

    Raises:
        TypeError: ``form`` is neither a WTForms form class nor an instance of one.
    """
    from wtforms.form import BaseForm

    if form is None:
        return form
    if is_form_class(form):
        return modernize_choices(form)
    if isinstance(form, BaseForm):
        return modernize_choices(type(form))
    raise TypeError(f"expected a WTForms Form class or instance, got {type(form).__name__}")


_as_form_class = form_class  # the functions below take a parameter named form_class


class _FormData(dict):
    """The minimal multi-dict WTForms reads formdata from."""

    def getlist(self, key: str) -> list:
        value = self.get(key)
        if value is None:
            return []
        return list(value) if isinstance(value, (list, tuple)) else [value]


def _to_form_string(field_type: str, value: Any) -> Any:
    if field_type == "BooleanField":
        if isinstance(value, str):
            return "" if value.strip().lower() in _FALSE_STRINGS else "y"
        return "y" if value else ""
    if field_type in ("FileField", "MultipleFileField"):
        return value
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return "" if value is None else str(value)


def modernize_choices(form_cls: Any) -> Any:
    """Turn the ``(value, label)`` tuple choices a form class declares into ``SelectChoice`` s, in place.

    DIGITS 6 style forms (``SelectField(choices=[("a", "A")])``) then bind
    without WTForms 3.3's deprecation warning, and keep working on WTForms
    3.4, which drops tuples. The plugin's own code still reads its choices as
    the tuples it wrote (``choices[0][0]``, ``value, label = choice``,
    ``dict(choices)``): each becomes a ``SelectChoice`` that also behaves as
    that tuple. Every helper here that takes a form class calls it (through
    :func:`form_class`); it is idempotent and returns the class.
    """
    from wtforms.fields import SelectFieldBase  # forms.py does not import WTForms at module level
    from wtforms.fields.core import UnboundField  # likewise

    choice_class = _tuple_choice_class()
    if choice_class is None:  # WTForms < 3.3: tuples are the only kind, and not deprecated
        return form_cls
    for name in dir(form_cls):
        unbound = getattr(form_cls, name, None)
        if not (isinstance(unbound, UnboundField) and issubclass(unbound.field_class, SelectFieldBase)):
            continue
        choices = unbound.kwargs.get("choices")
        if isinstance(choices, (list, tuple)) and any(isinstance(c, tuple) for c in choices):
            unbound.kwargs["choices"] = [
                choice_class(*c[:2], **({"render_kw": c[2]} if len(c) > 2 else {}))
                if isinstance(c, tuple) and len(c) in (2, 3)
                else c
                for c in choices
            ]
    return form_cls


@functools.lru_cache(maxsize=1)
def _tuple_choice_class() -> Any:
    """``SelectChoice`` that also reads as the ``(value, label[, render_kw])`` tuple it came from (or ``None``)."""
    try:
        from wtforms import SelectChoice  # WTForms >= 3.3
    except ImportError:
        return None

    class TupleChoice(SelectChoice):
        def _as_tuple(self) -> tuple:
            return (self.value, self.label, self.render_kw) if self.render_kw else (self.value, self.label)

        def __iter__(self) -> Any:
            return iter(self._as_tuple())

        def __getitem__(self, index: Any) -> Any:
            return self._as_tuple()[index]

        def __len__(self) -> int:
            return len(self._as_tuple())

        def __eq__(self, other: object) -> bool:
            return self._as_tuple() == other if isinstance(other, tuple) else super().__eq__(other)

        __hash__ = None  # type: ignore[assignment]  # mutable, as SelectChoice

    return TupleChoice


def user_fields(form) -> list:
    """Return the fields of a bound form that carry user data (no submit/CSRF)."""
    return [f for f in form if f.type not in _IGNORED_FIELD_TYPES]


def bind_form(form_class, values: Mapping[str, Any] | None = None, *, formdata=None, meta: dict | None = None):
    """Create a bound form from Python values or from raw form data.

    Fields missing from ``values`` keep the form's defaults (a BooleanField
    keeps its default too, unlike a browser's unchecked box).

    Args:
        form_class: An unbound WTForms ``Form`` class.
        values: Field name to value (strings as typed on a command line, or
            Python values). Unknown names are rejected by :func:`validate_form`.
        formdata: Raw multi-dict form data (e.g. Flask's ``request.form``);
            used as is, with browser semantics.
        meta: WTForms meta options (e.g. ``{"csrf": False}``).

    Returns:
        The bound form instance.
    """
    form_class = _as_form_class(form_class)
    kwargs = {"meta": meta} if meta else {}
    if formdata is not None:
        return form_class(formdata=formdata, **kwargs)
    values = dict(values or {})
    probe = form_class(**kwargs)
    data = _FormData()
    for field in user_fields(probe):
        if field.name in values:
            data[field.name] = _to_form_string(field.type, values[field.name])
        elif field.type == "BooleanField":
            data[field.name] = _to_form_string(field.type, field.data)
        elif field.type in ("FileField", "MultipleFileField"):
            continue
        elif field.data is not None:
            raw = field._value() if hasattr(field, "_value") else field.data
            data[field.name] = _to_form_string(field.type, raw)
    form = form_class(formdata=data, **kwargs)
    form._digits_unknown = sorted(set(values) - {f.name for f in user_fields(probe)})
    return form


def validate_form(form, form_name: str = "form") -> dict[str, Any]:
    """Validate a bound form and return its cleaned data.

    Args:
        form: A form from :func:`bind_form`.
        form_name: Names the form in error messages.

    Returns:
        Field name to validated value, for user fields only.

    Raises:
        FormValidationError: Some field is invalid or unknown; the error
            maps each field name to its messages.
    """
    errors: dict[str, list[str]] = {}
    for name in getattr(form, "_digits_unknown", []):
        known = ", ".join(f.name for f in user_fields(form))
        errors[name] = [f"unknown field (known fields: {known})"]
    if not form.validate():
        for name, messages in form.errors.items():
            errors.setdefault(name, []).extend(str(m) for m in (messages if isinstance(messages, list) else [messages]))
    if errors:
        raise FormValidationError(errors, form_name)
    return {field.name: field.data for field in user_fields(form)}


def validate_values(form_class, values: Mapping[str, Any] | None, form_name: str = "form") -> dict[str, Any]:
    """Bind ``values`` to ``form_class`` and validate: the API's one-call path.

    Raises:
        FormValidationError: As :func:`validate_form`.
    """
    return validate_form(bind_form(form_class, values, meta={"csrf": False}), form_name)


def option_name(field_name: str) -> str:
    """Return the command-line option for a form field (``resize_mode`` → ``--resize-mode``)."""
    return "--" + field_name.replace("_", "-")


def _choice_value(choice: Any) -> str:
    """The submitted value of a choice: a ``SelectChoice``, a ``(value, label)`` tuple or a plain value."""
    if hasattr(choice, "value"):
        return str(choice.value)
    if isinstance(choice, (tuple, list)):
        return str(choice[0])
    return str(choice)


def _help_text(field) -> str:
    label = field.label.text if field.label else field.name
    parts = [label.rstrip(".")]
    if field.description:
        parts.append(str(field.description).rstrip("."))
    text = ". ".join(parts)
    if field.type == "BooleanField":
        return text + (" (default: on)" if field.data else " (default: off)")
    if field.data not in (None, "", []) and field.type not in ("FileField", "MultipleFileField"):
        text += f" (default: {field.data})"
    return text.replace("%", "%%")


def add_form_arguments(
    parser: argparse.ArgumentParser, form_class, *, title: str | None = None, only: Iterable[str] | None = None
) -> list[str]:
    """Add one ``--option`` per user field of ``form_class`` to ``parser``.

    Parsed values are strings (or booleans for BooleanFields) meant for
    :func:`bind_form`; options left out are absent from the namespace
    (``argparse.SUPPRESS``), so the form's own defaults apply.

    Args:
        parser: The parser (or sub-parser) to extend.
        form_class: The unbound form class.
        title: Heading of the option group in ``--help``.
        only: Add just these fields (default: every user field).

    Returns:
        The field names added, for :func:`form_values_from_namespace`.
    """
    form_class = _as_form_class(form_class)
    group = parser.add_argument_group(title) if title else parser
    names = []
    wanted = None if only is None else set(only)
    for field in user_fields(form_class(meta={"csrf": False})):
        if wanted is not None and field.name not in wanted:
            continue
        kwargs: dict[str, Any] = {"dest": field.name, "default": argparse.SUPPRESS, "help": _help_text(field)}
        if field.type == "BooleanField":
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            choices = getattr(field, "choices", None)
            if choices and field.type in ("SelectField", "RadioField", "SelectMultipleField"):
                kwargs["choices"] = [_choice_value(c) for c in choices]
            if field.type in ("SelectMultipleField", "MultipleFileField"):
                kwargs["nargs"] = "+"
            kwargs["metavar"] = field.name.upper()
            if any(kwargs.get("choices", ())):  # choices that depend on the installation may be only ""
                kwargs["metavar"] = "{" + ",".join(kwargs["choices"]) + "}"
        group.add_argument(option_name(field.name), **kwargs)
        names.append(field.name)
    return names


def form_values_from_namespace(namespace: argparse.Namespace, names: Iterable[str]) -> dict[str, Any]:
    """Return the form values given on the command line (only those given)."""
    return {name: getattr(namespace, name) for name in names if hasattr(namespace, name)}
