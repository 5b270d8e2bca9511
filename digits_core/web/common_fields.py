"""The fields our pages add around a plugin's form (job name, workers)."""

from __future__ import annotations

import os

from wtforms import Form, IntegerField, StringField
from wtforms.validators import DataRequired, Length, NumberRange, Optional


class DatasetJobForm(Form):
    """Job name and worker count of a new dataset (prefixed ``job_`` to avoid clashing with plugin fields)."""

    job_name = StringField("Dataset name", validators=[DataRequired(message="Give the dataset a name."), Length(max=200)],
                           description="Shown in the jobs tables.")
    job_workers = IntegerField("Worker processes", default=min(4, os.cpu_count() or 1),
                               validators=[Optional(), NumberRange(min=1, max=64)],
                               description="Processes that encode entries in parallel.")
    job_max_errors = StringField("Entries allowed to fail", validators=[Optional(), Length(max=20)],
                                 description='A count ("10"), a fraction ("0.05") or a percentage ("5%"); default 5%.')
