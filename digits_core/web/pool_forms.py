"""The web forms of active learning (issue 46): *New pool* and the pool page's *Run a round* / *Score only*.

The forms only read the page's fields into the body the JSON API takes (``POST /api/pools``,
``POST /api/pools/<id>/runs``); :mod:`digits_core.web.labeling_api` hands that body to the same functions
as the API, so a value is checked once, by :func:`digits_core.labeling.jobs.prepare_run` (a run) or the pool
request check (a new pool), and a refusal comes back on the field it names. The choices of the selects are
not checked by WTForms for the same reason: a value the page does not offer is refused by that gate.
"""

from __future__ import annotations

from typing import Any

from wtforms import BooleanField, FloatField, Form, IntegerField, SelectField, StringField, TextAreaField
from wtforms.validators import Optional

from ..jobs import Job
from ..labeling.jobs import model_problem
from ..labeling.pool import Pool
from ..labeling.strategies import STRATEGIES
from ..option_spec import select_choices

#: What each strategy does, as the page's select says it.
STRATEGY_HELP = (
    "random: the baseline; entropy: predictive entropy; variance: MC-dropout over N passes (the dropout on only "
    "while scoring); tta: disagreement over flips and rotations."
)


class PoolRunForm(Form):
    """A scoring or a round of a pool (the buttons post ``action`` = ``round`` or ``score``)."""

    action = StringField("Action", default="round")
    model = SelectField(
        "Model",
        validate_choice=False,
        description="A trained segmentation model that fits the pool (its last snapshot scores the candidates).",
    )
    strategy = SelectField(
        "Strategy",
        choices=select_choices(STRATEGIES),
        default="variance",
        validate_choice=False,
        description=STRATEGY_HELP,
    )
    count = IntegerField(
        "Count", default=10, validators=[Optional()], description="Candidates proposed for review (the top N)."
    )
    passes = IntegerField(
        "Passes", default=8, validators=[Optional()], description="Forward passes of variance and tta."
    )
    top_fraction = FloatField(
        "Top fraction",
        default=1.0,
        validators=[Optional()],
        description="Score each candidate by the mean of its most uncertain share of pixels (e.g. 0.05: the top "
        "5 %); 1: the mean over all pixels. Finds a model confidently wrong on most of an image.",
    )
    epochs = IntegerField(
        "Epochs", default=5, validators=[Optional()], description="Epochs of the retraining from the last snapshot."
    )
    retrain = BooleanField("Retrain on the accepted labels after proposing", default=True)


class NewPoolForm(Form):
    """A pool of a folder of images under the data roots, or of a PACS (a DICOMweb URL or a named server)."""

    name = StringField("Name", validators=[Optional()], description="Empty: the folder's name.")
    folder = StringField(
        "Folder", validators=[Optional()], description="A folder of unlabelled images under the server's data roots."
    )
    dicomweb_server = StringField(
        "DICOMweb server", validators=[Optional()], description="Or a PACS: a server name the operator configured ..."
    )
    dicomweb = StringField("DICOMweb URL", validators=[Optional()], description="... or its DICOMweb URL.")
    studies = TextAreaField("Studies", validators=[Optional()], description="Study Instance UIDs, one a line.")
    series = TextAreaField("Series", validators=[Optional()], description="Series Instance UIDs, one a line.")
    username = StringField("PACS user", validators=[Optional()])
    volumes = BooleanField(
        "Volumes: one candidate per 3-D volume (a PACS image series, or a folder's D×H×W .npy file), not per image"
    )
    classes = StringField(
        "Classes", validators=[Optional()], description="Comma-separated, background first (e.g. background, lv)."
    )
    modality = StringField("Modality", validators=[Optional()], description="e.g. MR; checked against the model.")


def compatible_models(pool: Pool, models: list[Job]) -> list[tuple[str, str]]:
    """The ``(id, label)`` choices of the models a run of ``pool`` accepts (those without a problem)."""
    return [(job.id, f"{job.name} ({job.id})") for job in models if model_problem(pool, job.id) is None]


def run_body(form: PoolRunForm) -> dict[str, Any]:
    """The ``POST /api/pools/<id>/runs`` body of a filled-in run form (empty fields left out)."""
    body: dict[str, Any] = {"action": form.action.data or "round", "model": form.model.data or None}
    body["strategy"] = form.strategy.data
    for key in ("count", "passes", "top_fraction", "epochs"):
        if form[key].data is not None:
            body[key] = form[key].data
    body["retrain"] = bool(form.retrain.data)
    return body


def _lines(text: str | None) -> list[str] | None:
    items = [line.strip() for line in (text or "").replace(",", "\n").splitlines() if line.strip()]
    return items or None


def pool_body(form: NewPoolForm) -> dict[str, Any]:
    """The ``POST /api/pools`` body of a filled-in New pool form (empty fields left out)."""
    body: dict[str, Any] = {}
    for key in ("name", "folder", "dicomweb_server", "dicomweb", "username", "modality"):
        value = (form[key].data or "").strip()
        if value:
            body[key] = value
    for key in ("studies", "series"):
        if _lines(form[key].data):
            body[key] = _lines(form[key].data)
    if _lines(form.classes.data):
        body["classes"] = _lines(form.classes.data)
    if form.volumes.data:  # left out unticked
        body["volumes"] = True
    return body


def place_errors(form: Form, errors: dict[str, list[str]]) -> None:
    """Put a refusal's messages on the fields they name; the others (``body``, unknown keys) on the form."""
    for name, messages in errors.items():
        field = form._fields.get(name)
        if field is not None and name != "action":
            field.errors = [*field.errors, *messages]
        else:
            form.form_errors.append(f"{name}: {'; '.join(messages)}")


__all__ = ["NewPoolForm", "PoolRunForm", "compatible_models", "place_errors", "pool_body", "run_body"]
