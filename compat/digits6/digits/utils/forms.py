"""``digits.utils.forms``: the WTForms fields and validators DIGITS 6 plugin forms use.

Every field takes DIGITS 6's extra keywords ``tooltip=`` (a help text shown
as a "?" icon: ``{{ form.field.tooltip }}`` in a template) and
``explanation_file=`` (a longer help template, ``{{ form.field.explanation }}``;
``explanation=`` gives that help as text instead).
A tooltip also becomes the field's ``description`` when it has none, so
DIGITS Core shows it as the option's help in ``digits dataset create
PLUGIN --help`` and under the field on the web page.

:class:`Form` is what ``from flask.ext.wtf import Form`` gives a DIGITS 6
plugin: a plain WTForms form (it needs no Flask request; the core binds,
validates and protects it with CSRF at the page level).
"""

from __future__ import annotations

import os

import markupsafe
import wtforms
from wtforms import validators

__all__ = [
    "Form",
    "Tooltip",
    "Explanation",
    "IntegerField",
    "FloatField",
    "SelectField",
    "SelectMultipleField",
    "TextField",
    "StringField",
    "FileField",
    "TextAreaField",
    "BooleanField",
    "MultiIntegerField",
    "MultiFloatField",
    "validate_required_iff",
    "validate_required_if_set",
    "validate_greater_than",
    "validate_folder_path",
    "validate_file_path",
    "MultiNumberRange",
    "MultiOptional",
]


class Form(wtforms.Form):
    """A DIGITS 6 plugin form (``flask.ext.wtf.Form``), usable outside a Flask request."""

    def validate_on_submit(self, extra_validators=None) -> bool:
        """Validate the form (DIGITS 6 called this inside a POST request)."""
        return self.validate(extra_validators=extra_validators)

    def hidden_tag(self, *fields) -> markupsafe.Markup:
        """Render hidden fields; the CSRF token is the page's business in DIGITS Core."""
        hidden = [f for f in (fields or self) if getattr(f, "type", "") == "HiddenField"]
        return markupsafe.Markup("").join(f() for f in hidden)


class Tooltip:
    """A field's help (DIGITS 6's "?" tooltip icon), shown as visible text: ``{{ field.tooltip }}`` in a template."""

    def __init__(self, field_id: str, for_name: str, text: str):
        self.field_id = field_id
        self.for_name = for_name
        self.text = text

    def __call__(self, text: str | None = None, **_kwargs) -> markupsafe.Markup:
        text = self.text if text is None else text
        if not text:
            return markupsafe.Markup("")
        # DIGITS 6 drew a Bootstrap glyph whose title showed on hover; with no glyph font or tooltip
        # script here, the help is the span's visible text (small and muted), the title kept.
        return markupsafe.Markup(
            '<span name="{0}_explanation" class="explanation-tooltip muted small" '
            'data-container="body" title="{1}">{1}</span>'
        ).format(self.for_name, text)

    def __html__(self) -> str:
        return str(self())

    __str__ = __html__

    def __repr__(self) -> str:
        return f"Tooltip({self.field_id!r}, {self.for_name!r}, {self.text!r})"


class Explanation:
    """A field's longer help, rendered as a hidden block plus a "?" link (``{{ field.explanation }}``).

    The help is ``text`` (``explanation=``), or the template file
    ``filename`` (DIGITS 6's ``explanation_file=``). DIGITS 6 looked the
    file up among its own templates; here it is looked up in the DIGITS
    Core plugin template environment, and renders as nothing when there is
    no such file (as DIGITS 6 did for empty help).
    """

    def __init__(self, field_id: str, for_name: str, filename: str, text: str = ""):
        self.field_id = field_id
        self.for_name = for_name
        self.file = filename
        self.text = text

    def _body(self, name: str) -> markupsafe.Markup | str:
        if not name:
            return self.text or ""
        import jinja2

        from digits_core.templating import plugin_environment

        try:
            return markupsafe.Markup(plugin_environment().get_template(name).render())
        except jinja2.TemplateNotFound:
            return ""

    def __call__(self, file: str | None = None, **_kwargs) -> markupsafe.Markup:
        body = self._body(file or self.file)
        if not str(body).strip():
            return markupsafe.Markup("")
        return markupsafe.Markup(
            '<div id="{0}_explanation" class="explanation" hidden>{1}</div>'
            '<a href="#{0}_explanation" class="explanation-link" title="More help">?</a>'
        ).format(self.for_name, body)

    def __html__(self) -> str:
        return str(self())

    __str__ = __html__

    def __repr__(self) -> str:
        return f"Explanation({self.field_id!r}, {self.for_name!r}, {self.file!r})"


class _HelpMixin:
    """Adds DIGITS 6's ``tooltip=`` / ``explanation_file=`` (and ``explanation=`` text) keywords to a WTForms field."""

    def __init__(self, label="", validators=None, tooltip="", explanation_file="", explanation="", **kwargs):
        if tooltip and not kwargs.get("description"):
            kwargs["description"] = tooltip
        super().__init__(label, validators, **kwargs)
        self.tooltip = Tooltip(self.id, self.short_name, tooltip)
        self.explanation = Explanation(self.id, self.short_name, explanation_file, explanation)


class IntegerField(_HelpMixin, wtforms.IntegerField):
    """``wtforms.IntegerField`` with ``tooltip=`` / ``explanation_file=``."""


class FloatField(_HelpMixin, wtforms.FloatField):
    """``wtforms.FloatField`` with ``tooltip=`` / ``explanation_file=``."""


class SelectField(_HelpMixin, wtforms.SelectField):
    """``wtforms.SelectField`` with ``tooltip=`` / ``explanation_file=``."""


class SelectMultipleField(_HelpMixin, wtforms.SelectMultipleField):
    """``wtforms.SelectMultipleField`` with ``tooltip=`` / ``explanation_file=``."""


class StringField(_HelpMixin, wtforms.StringField):
    """``wtforms.StringField`` with ``tooltip=`` / ``explanation_file=``."""


#: WTForms 2 renamed TextField to StringField; DIGITS 6 plugins use both.
TextField = StringField


class FileField(_HelpMixin, wtforms.FileField):
    """``wtforms.FileField`` with ``tooltip=`` / ``explanation_file=``."""


class TextAreaField(_HelpMixin, wtforms.TextAreaField):
    """``wtforms.TextAreaField`` with ``tooltip=`` / ``explanation_file=``."""


class BooleanField(_HelpMixin, wtforms.BooleanField):
    """``wtforms.BooleanField`` with ``tooltip=`` / ``explanation_file=``."""


class _MultiNumberField(_HelpMixin, wtforms.Field):
    """A text input holding one or more comma-separated numbers; ``data`` is a list."""

    widget = wtforms.widgets.TextInput()
    _convert = float
    _kind = "float"

    def __init__(self, label="", validators=None, tooltip="", explanation_file="", **kwargs):
        super().__init__(
            label,
            validators,
            tooltip + " (accepts comma separated list)" if tooltip else "",
            explanation_file,
            **kwargs,
        )
        self.small_text = "multiples allowed"

    def process_data(self, value):
        if value is None:
            self.data = [None]
        else:
            self.data = [self._convert(v) for v in (value if isinstance(value, (list, tuple)) else [value])]

    def process_formdata(self, valuelist):
        if not valuelist:
            return
        text = str(valuelist[0]).replace("[", "").replace("]", "")
        try:
            self.data = [self._convert(float(part)) for part in text.split(",") if part.strip()]
        except ValueError:
            self.data = [None]
            raise ValueError(self.gettext(f"Not a valid {self._kind} value")) from None

    def _value(self):
        return ",".join(str(v) for v in (self.data or []) if v is not None)

    def data_array(self) -> list:
        """The values as a list (DIGITS 6 API)."""
        return list(self.data) if isinstance(self.data, (list, tuple)) else [self.data]


class MultiIntegerField(_MultiNumberField):
    """One or more comma-separated integers (``data`` is a list of ints)."""

    _convert = int
    _kind = "integer"


class MultiFloatField(_MultiNumberField):
    """One or more comma-separated floats (``data`` is a list of floats)."""


def _is_empty(data) -> bool:
    if data is None:
        return True
    if isinstance(data, str):
        return not data.strip()
    filename = getattr(data, "filename", None)  # an uploaded file (werkzeug FileStorage)
    return filename is not None and not str(filename).strip()


def validate_required_iff(**conditions):
    """Validator: the field is required when every ``other_field=value`` condition holds.

    When a condition does not hold, the field is optional: its other errors
    are cleared and validation stops.
    """

    def _validator(form, field):
        if all(getattr(form, name).data == value for name, value in conditions.items()):
            if _is_empty(field.data):
                raise validators.ValidationError("This field is required.")
        else:
            field.errors[:] = []
            raise validators.StopValidation()

    return _validator


def validate_required_if_set(other_field, **_kwargs):
    """Validator: the field is required when the field named ``other_field`` has a value."""

    def _validator(form, field):
        if getattr(form, other_field).data:
            if _is_empty(field.data):
                raise validators.ValidationError(f"This field is required if {other_field} is set.")
        else:
            field.errors[:] = []
            raise validators.StopValidation()

    return _validator


def validate_greater_than(fieldname):
    """Validator: the field's value must not be less than the field named ``fieldname``."""

    def _validator(form, field):
        try:
            other = form[fieldname]
        except KeyError:
            raise validators.ValidationError(f"Invalid field name '{fieldname}'.") from None
        if field.data not in ("", None) and other.data is not None and field.data < other.data:
            raise validators.ValidationError(f"Field must be greater than {fieldname}.")

    return _validator


def validate_folder_path(form, field):
    """Validator: a non-empty value must be an existing folder (empty passes)."""
    if field.data and not os.path.isdir(field.data):
        raise validators.ValidationError("Folder does not exist or is not reachable")


def validate_file_path(form, field):
    """Validator: a non-empty value must be an existing file or folder (empty passes)."""
    if field.data and not os.path.exists(field.data):
        raise validators.ValidationError("File does not exist or is not reachable")


class MultiNumberRange:
    """Like ``wtforms.validators.NumberRange``, applied to every value of a multi-number field."""

    def __init__(self, min=None, max=None, min_inclusive=True, max_inclusive=True, message=None):  # noqa: A002
        self.min, self.max = min, max
        self.min_inclusive, self.max_inclusive = min_inclusive, max_inclusive
        self.message = message

    def _problem(self, value):
        if value is None:
            return "No data."
        if self.min is not None and (value < self.min if self.min_inclusive else value <= self.min):
            return (
                "Number %(data)s must be at least %(min)s."
                if self.min_inclusive
                else "Number %(data)s must be greater than %(min)s."
            )
        if self.max is not None and (value > self.max if self.max_inclusive else value >= self.max):
            return (
                "Number %(data)s must be at most %(max)s."
                if self.max_inclusive
                else "Number %(data)s must be less than %(max)s."
            )
        return None

    def __call__(self, form, field):
        values = field.data if isinstance(field.data, (list, tuple)) else [field.data]
        for value in values:
            problem = self._problem(value)
            if problem:
                message = self.message or field.gettext(problem)
                raise validators.ValidationError(message % {"data": value, "min": self.min, "max": self.max})


class MultiOptional:
    """Like ``wtforms.validators.Optional`` for multi-number fields: empty input stops validation."""

    field_flags = {"optional": True}

    def __init__(self, strip_whitespace=True):
        self.strip = strip_whitespace

    def __call__(self, form, field):
        raw = field.raw_data
        first = raw[0] if raw else None
        if not raw or (isinstance(first, str) and not (first.strip() if self.strip else first)):
            field.errors[:] = []
            raise validators.StopValidation()
