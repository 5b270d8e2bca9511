"""The New Model form's *Search* panel: a hyper-parameter search started from the page.

The panel's fields are a mixin of :class:`~digits_core.web.model_form.ModelForm`.
With search lines filled in, *Create* does not queue one job: it builds the
body ``POST /api/sweeps`` takes and calls the same function
(:func:`digits_core.submit.sweeps.start_sweep`, i.e. :func:`digits_core.sweeps.tune.tune`),
then the page lands on the sweep's comparison page. A refusal of the core
(a bad space, setting or option) comes back on the panel's field that holds it.
"""

from __future__ import annotations

from wtforms import Form, IntegerField, SelectField, StringField, TextAreaField
from wtforms.validators import NumberRange, Optional

from ..option_spec import select_choices
from ..sweeps.space import MAX_TRIALS
from ..sweeps.tune import MAX_CONCURRENT, MAX_EPOCHS, SCHEDULERS

#: The panel's fields and the ``POST /api/sweeps`` key each one fills.
PANEL_KEYS = {
    "search_scheduler": "scheduler",
    "search_trials": "trials",
    "search_max_epochs": "max_epochs",
    "search_metric": "metric",
    "search_max_concurrent": "max_concurrent",
}


class SearchPanel(Form):
    """The Search panel's fields (empty search lines: no search, the form queues jobs as before)."""

    search = TextAreaField(
        "Search spaces",
        validators=[Optional()],
        description="One OPTION=SPACE per line, e.g. learning_rate=loguniform(1e-4,1e-1), "
        "batch_size=choice(32,64,128), solver=choice(sgd,adam), or a grid list "
        "learning_rate=0.1,0.01. Leave empty to train one model.",
    )
    search_scheduler = SelectField(
        "Scheduler",
        choices=select_choices(SCHEDULERS),
        default="asha",
        description="grid: every combination; random: N points; asha: N points, hopeless ones stopped early.",
    )
    search_trials = IntegerField(
        "Trials",
        default=16,
        validators=[Optional(), NumberRange(min=1, max=MAX_TRIALS)],
        description="Points drawn (random, asha); a grid runs every combination.",
    )
    search_max_epochs = IntegerField(
        "Max epochs",
        default=10,
        validators=[Optional(), NumberRange(min=1, max=MAX_EPOCHS)],
        description="Epochs of a trial that is not stopped.",
    )
    search_metric = StringField(
        "Metric",
        default="val_accuracy",
        validators=[Optional()],
        description="The logged validation metric trials are ranked by (val_accuracy, val_loss ...).",
    )
    search_max_concurrent = IntegerField(
        "Max concurrent",
        validators=[Optional(), NumberRange(min=1, max=MAX_CONCURRENT)],
        description=f"Trials at the same time, at most {MAX_CONCURRENT} (empty: as many as Ray has CPUs).",
    )


def search_lines(form: SearchPanel) -> list[str]:
    """The panel's non-empty search lines (``[]``: no search)."""
    return [line.strip() for line in (form.search.data or "").splitlines() if line.strip()]


def sweep_body(form, options: dict) -> dict:
    """The ``POST /api/sweeps`` body of a filled-in New Model form."""
    body = {
        "dataset": form.dataset.data,
        "network": form.network.data,
        "name": form.model_name.data,
        "search": search_lines(form),
        "options": options,
    }
    if form.group.data:
        body["group"] = form.group.data
    for field, key in PANEL_KEYS.items():
        if form[field].data not in (None, ""):
            body[key] = form[field].data
    return body


def place_errors(form, errors: dict[str, list[str]], spaces: list[str]) -> None:
    """Put the core's refusal on the fields: a space's on the search lines, a setting's on its panel field."""
    searched = {line.split("=", 1)[0].strip() for line in spaces}
    by_key = {key: field for field, key in PANEL_KEYS.items()}
    for name, messages in errors.items():
        if name in searched or name == "search":
            target, messages = form.search, [f"{name}: {m}" if name != "search" else m for m in messages]
        else:
            target = form._fields.get(by_key.get(name, name))
        if target is not None:
            target.errors = list(target.errors) + list(messages)
        else:
            form.form_errors.append(f"{name}: {'; '.join(messages)}")
