"""The fields our pages add around a plugin's form (job name, group, workers, error budget)."""

from __future__ import annotations

from typing import Any

from wtforms import Form, ValidationError

from ..datasets.options import web_form_fields
from ..errors import FormValidationError
from ..groups import normalize_group


def valid_group(form: Any, field: Any) -> None:
    """WTForms validator: a job group name :func:`~digits_core.groups.normalize_group` accepts."""
    try:
        field.data = normalize_group(field.data or None, field.name)
    except FormValidationError as exc:
        raise ValidationError("; ".join(exc.errors[field.name])) from None


#: Description of the group fields of both New pages.
GROUP_HELP = "Jobs with the same group are shown together, collapsible, on the home page (optional)."


#: The job options of a new dataset, one ``job_<name>`` field per option declared in
#: :data:`digits_core.datasets.options.DATASET_OPTIONS` (prefixed: plugin forms own the plain names).
DatasetJobForm = type("DatasetJobForm", (Form,), {"__module__": __name__, **web_form_fields()})
