"""The fields our pages add around a plugin's form (job name, group, workers)."""

from __future__ import annotations

import os

from wtforms import Form, IntegerField, StringField, ValidationError
from wtforms.validators import DataRequired, Length, NumberRange, Optional

from ..errors import FormValidationError
from ..groups import MAX_GROUP_LENGTH, normalize_group


def valid_group(form, field) -> None:
    """WTForms validator: a job group name :func:`~digits_core.groups.normalize_group` accepts."""
    try:
        field.data = normalize_group(field.data or None, field.name)
    except FormValidationError as exc:
        raise ValidationError("; ".join(exc.errors[field.name])) from None


#: Description of the group fields of both New pages.
GROUP_HELP = "Jobs with the same group are shown together, collapsible, on the home page (optional)."


class DatasetJobForm(Form):
    """Job name and worker count of a new dataset (prefixed ``job_`` to avoid clashing with plugin fields)."""

    job_name = StringField("Dataset name", validators=[DataRequired(message="Give the dataset a name."), Length(max=200)],
                           description="Shown in the jobs tables.")
    job_group = StringField("Group", validators=[Optional(), Length(max=MAX_GROUP_LENGTH), valid_group],
                            description=GROUP_HELP)
    job_workers = IntegerField("Worker processes", default=min(4, os.cpu_count() or 1),
                               validators=[Optional(), NumberRange(min=1, max=64)],
                               description="Processes that encode entries in parallel.")
    job_max_errors = StringField("Entries allowed to fail", validators=[Optional(), Length(max=20)],
                                 description='A count ("10"), a fraction ("0.05") or a percentage ("5%"); default 5%.')
