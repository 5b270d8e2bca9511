"""The New Model form, generated from the one declaration of the training options.

Every training option field comes from
:data:`digits_core.engine.option_specs.TRAINING_OPTIONS` (label, help, kind,
range, choices, group, which solvers / LR policies it applies to); only the
dataset, network, custom code, network parameters, pretrained model and the
model name are written here. Option fields have no default of their own:
the page shows the chosen network's effective defaults
(:func:`~digits_core.engine.option_specs.effective_defaults`), and
:func:`training_options` keeps only what differs from them and applies to
the chosen solver / policy, so the engine fills the rest exactly as it does
for ``digits train`` and the JSON API. Values are then checked by
``TrainingOptions.from_kwargs`` (the engine's rules). Options declared
``sweep=True`` (learning rate, batch size) are text fields taking several
comma-separated values: one job per combination (:mod:`digits_core.sweeps`).
"""

from __future__ import annotations

import json
from typing import Any

from wtforms import SelectField, StringField, TextAreaField, ValidationError
from wtforms.validators import DataRequired, Length, Optional

from ..engine.networks import custom_code_problem, list_networks
from ..engine.option_specs import (
    BY_NAME,
    GROUPS,
    LR_PREVIEW_OPTIONS,
    SWEEP_HELP,
    TRAINING_OPTIONS,
    applicable,
    effective_defaults,
)
from ..errors import FormValidationError
from ..groups import MAX_GROUP_LENGTH
from ..jobs.checks import MAX_JOB_NAME_LENGTH
from ..option_spec import OptionSpec, wtforms_field
from ..sweeps.grid import parse_values
from .common_fields import GROUP_HELP, valid_group
from .search_panel import PANEL_KEYS, SearchPanel

CUSTOM = "__custom__"

#: Fields of the form that are not engine options.
NON_OPTION_FIELDS = (
    "model_name",
    "group",
    "dataset",
    "network",
    "custom_network",
    "network_params",
    "search",
    *PANEL_KEYS,
)

CUSTOM_NETWORK_EXAMPLE = '''import keras
from keras import layers

def build_model(input_shape, num_outputs, **params):
    """input_shape: (H, W, C) after cropping; num_outputs: number of classes."""
    inputs = keras.Input(shape=input_shape)
    x = layers.Conv2D(16, 3, activation="relu")(inputs)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(num_outputs, activation="softmax")(x)
    return keras.Model(inputs, outputs)
'''

_BOOL_CHOICES = [("true", "yes"), ("false", "no")]
_TRUE, _FALSE = ("true", "1", "yes", "on", "y"), ("false", "0", "no", "off", "n")


def _is_bool(form: Any, field: Any) -> None:
    if field.data not in (None, "") and str(field.data).lower() not in _TRUE + _FALSE:
        raise ValidationError("Choose yes or no.")


def _sweep_validator(spec: OptionSpec) -> Any:
    def check(form: Any, field: Any) -> None:
        if field.data not in (None, ""):
            try:
                parse_values(spec.name, field.data)
            except FormValidationError as exc:
                raise ValidationError("; ".join(exc.errors[spec.name])) from None

    return check


def _field(spec: OptionSpec) -> Any:
    """A WTForms field for one declared option (empty = not set): the specs' generator, sweeps as text."""
    if spec.sweep:  # text: several comma-separated values make a sweep
        return StringField(
            spec.label, validators=[Optional(), _sweep_validator(spec)], description=spec.help + SWEEP_HELP
        )
    if spec.kind == "bool":
        return wtforms_field(spec, choices=_BOOL_CHOICES, validators=[_is_bool])
    return wtforms_field(spec)


class ModelForm(SearchPanel):
    """New model: dataset, network, (generated) training options and the Search panel."""

    model_name = StringField(
        "Model name",
        validators=[DataRequired(message="Give the model a name."), Length(max=MAX_JOB_NAME_LENGTH)],
        description="Of a sweep: the start of every job's name, and the group when none is given.",
    )
    group = StringField(
        "Group", validators=[Optional(), Length(max=MAX_GROUP_LENGTH), valid_group], description=GROUP_HELP
    )
    dataset = SelectField(
        "Dataset",
        validators=[DataRequired(message="Choose a dataset (build one first).")],
        description="Only datasets that are Done are listed.",
    )
    network = SelectField(
        "Network",
        validators=[DataRequired()],
        description="A built-in network, one a plugin registered, or your own code.",
    )
    custom_network = TextAreaField(
        "Custom network (Python)", validators=[Optional()], description="Used when the network is 'Custom code'."
    )
    pretrained = SelectField(
        BY_NAME["pretrained"].label,
        validators=[Optional()],
        default="",
        description="Start from the last snapshot of a previous model job.",
    )
    network_params = StringField(
        BY_NAME["network_params"].label,
        default="{}",
        validators=[Optional()],
        description='Keyword arguments for build_model, e.g. {"dropout": 0.5}.',
    )

    def validate_custom_network(self, field: Any) -> None:
        if self.network.data == CUSTOM:
            problem = custom_code_problem(field.data or "")
            if problem:
                raise ValidationError(problem)

    def validate_network_params(self, field: Any) -> None:
        try:
            value = json.loads(field.data or "{}")
        except ValueError as exc:
            raise ValidationError(f"Not valid JSON: {exc}") from exc
        if not isinstance(value, dict):
            raise ValidationError('Give a JSON object, e.g. {"dropout": 0.5}.')


for _spec in TRAINING_OPTIONS:
    if _spec.web == "auto":
        setattr(ModelForm, _spec.name, _field(_spec))
del _spec

#: Generated option fields by form section, in declaration order (the template lays them out).
FIELD_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (group, tuple(s.name for s in TRAINING_OPTIONS if s.group == group and s.web == "auto")) for group in GROUPS
)


def _value(spec: OptionSpec, data: Any) -> Any:
    if spec.kind == "bool":
        return None if data in (None, "") else str(data).lower() in _TRUE
    if spec.sweep and data not in (None, ""):
        values = parse_values(spec.name, data)
        return values[0] if len(values) == 1 else values
    return None if data in (None, "") else data


def option_value(spec: OptionSpec, data: Any) -> Any:
    """A submitted field's value as the engine option (``None``: not set)."""
    return _value(spec, data)


def _form_value(spec: OptionSpec, value: Any) -> Any:
    if spec.kind == "bool":
        return "true" if value else "false"
    return value


def network_defaults(network: str | None) -> dict:
    """The recommended options of a network (``{}`` for custom code or an unknown name)."""
    if not network or network == CUSTOM:
        return {}
    from ..engine.volume_nets import VOLUME_DEFAULTS, VOLUME_NETWORKS  # names and a dict: no Keras loaded

    if network in VOLUME_NETWORKS:  # what a volume run resolves its options over (engine.volume_train)
        return dict(VOLUME_DEFAULTS)
    for spec in list_networks():
        if spec.name == network:
            return dict(spec.defaults)
    return {}


def training_options(form: ModelForm) -> dict:
    """The engine options the user set: values that differ from the network's defaults and apply."""
    network = form.network.data
    defaults = effective_defaults(network_defaults(network))
    given = {}
    for spec in TRAINING_OPTIONS:
        if spec.web != "auto":
            continue
        value = _value(spec, form[spec.name].data)
        if value is not None and value != defaults.get(spec.name):
            given[spec.name] = value
    resolved = {**defaults, **given}
    options = {k: v for k, v in given.items() if k in applicable(resolved)}
    if form.pretrained.data:
        options["pretrained"] = form.pretrained.data
    params = json.loads(form.network_params.data or "{}")
    if params:
        options["network_params"] = params
    return options


def show_defaults(form: ModelForm, network: str | None = None, *, only_empty: bool = False) -> None:
    """Fill the option fields with a network's effective defaults (what the engine would use).

    Args:
        form: The New Model form.
        network: Whose defaults (default: the form's network).
        only_empty: Fill only the fields that hold no value: a re-rendered POST keeps what was
            typed, and the fields the page left out (they equalled the defaults) show them again.
    """
    defaults = effective_defaults(network_defaults(network or form.network.data))
    for spec in TRAINING_OPTIONS:
        if spec.web == "auto":
            if only_empty and (form[spec.name].data not in (None, "") or form[spec.name].raw_data):
                continue
            value = defaults.get(spec.name)
            form[spec.name].data = None if value is None else _form_value(spec, value)


def form_script_data(form: ModelForm) -> dict:
    """What the page's script needs: each network's defaults (as the fields show them) and where each option applies."""
    networks = [value for value, _ in form.network.choices or []]
    defaults = {}
    for net in networks:
        values = effective_defaults(network_defaults(net))
        # As the fields render them ("0.0", not 0): the page compares them with the fields' values.
        defaults[net] = {
            s.name: (None if values[s.name] is None else str(_form_value(s, values[s.name])))
            for s in TRAINING_OPTIONS
            if s.web == "auto"
        }
    applies = {
        s.name: {
            "solvers": list(s.solvers) if s.solvers else None,
            "policies": list(s.policies) if s.policies else None,
        }
        for s in TRAINING_OPTIONS
        if s.web == "auto" and (s.solvers or s.policies)
    }
    return {"defaults": defaults, "applies": applies, "lr_preview": list(LR_PREVIEW_OPTIONS)}


def set_choices(form: ModelForm, store: Any) -> None:
    """Fill the dataset, network and pretrained pickers from the jobs folder and the engine."""
    datasets = [j for j in store.list("dataset") if j.status.value == "Done"]
    form.dataset.choices = [(j.id, f"{j.name} ({j.id})") for j in datasets] or [("", "no dataset is Done yet")]
    nets = []
    for spec in list_networks():
        label = spec.name + (f" ({spec.source})" if spec.source != "builtin" else "")
        nets.append((spec.name, label))
    from ..engine.volume_nets import VOLUME_NETWORKS  # names only; the engine package stays unloaded until used

    nets += [(name, f"{name} (3-D volume datasets)") for name in VOLUME_NETWORKS]
    form.network.choices = nets + [(CUSTOM, "Custom code")]
    models = [j for j in store.list("model") if (j.path / "snapshots").is_dir()]
    form.pretrained.choices = [("", "none (train from scratch)")] + [(j.id, f"{j.name} ({j.id})") for j in models]
