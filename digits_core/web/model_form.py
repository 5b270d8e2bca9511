"""The New Model form: every option of :class:`digits_core.engine.options.TrainingOptions`.

Field names are the engine's option names (``aug_*`` for augmentation), so
the engine's own validation errors land next to the right field. Values are
checked twice: by WTForms (types) and by ``TrainingOptions.from_kwargs``
(the engine's rules), exactly as ``digits train`` does.
"""

from __future__ import annotations

import json

from wtforms import (BooleanField, Form, IntegerField, SelectField, StringField, TextAreaField,
                     ValidationError)
from wtforms.fields import FloatField
from wtforms.validators import DataRequired, Length, NumberRange, Optional

SOLVER_CHOICES = [("sgd", "SGD"), ("momentum", "SGD with momentum"), ("nesterov", "Nesterov"), ("adam", "Adam"),
                  ("adamw", "AdamW"), ("rmsprop", "RMSprop"), ("adagrad", "AdaGrad"), ("adadelta", "AdaDelta")]
POLICY_CHOICES = [("fixed", "Fixed"), ("step", "Step down"), ("multistep", "Step down (arbitrary steps)"),
                  ("exp", "Exponential decay"), ("inv", "Inverse decay"), ("poly", "Polynomial decay"),
                  ("sigmoid", "Sigmoid decay")]
CUSTOM = "__custom__"

#: Fields of the form that are not engine options.
NON_OPTION_FIELDS = ("model_name", "dataset", "network", "custom_network", "network_params")

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


class OptionalFloat(FloatField):
    """A float field where an empty box means ``None`` (the engine's default)."""


class ModelForm(Form):
    """New model: dataset, network and training options."""

    model_name = StringField("Model name", validators=[DataRequired(message="Give the model a name."), Length(max=200)])
    dataset = SelectField("Dataset", validators=[DataRequired(message="Choose a dataset (build one first).")],
                          description="Only datasets that are Done are listed.")
    network = SelectField("Network", validators=[DataRequired()],
                          description="A built-in network, one a plugin registered, or your own code.")
    custom_network = TextAreaField("Custom network (Python)", validators=[Optional()],
                                   description="Used when the network is 'Custom code'.")
    pretrained = SelectField("Pretrained model (fine-tune)", validators=[Optional()], default="",
                             description="Start from the last snapshot of a previous model job.")
    network_params = StringField("Network parameters (JSON)", default="{}", validators=[Optional()],
                                 description='Keyword arguments for build_model, e.g. {"dropout": 0.5}.')
    task = SelectField("Task", default="", choices=[("", "from the dataset"), ("classification", "classification"),
                                                     ("segmentation", "segmentation"), ("regression", "regression")],
                       validators=[Optional()])

    epochs = IntegerField("Training epochs", default=30, validators=[DataRequired(), NumberRange(min=1, max=100000)])
    batch_size = IntegerField("Batch size", validators=[Optional(), NumberRange(min=1)],
                              description="Empty: the network's default (LeNet 64).")
    snapshot_interval = FloatField("Snapshot interval (epochs)", default=1.0, validators=[NumberRange(min=0)])
    validation_interval = FloatField("Validation interval (epochs)", default=1.0, validators=[NumberRange(min=0)])
    seed = IntegerField("Random seed", validators=[Optional(), NumberRange(min=0)],
                        description="Empty: random (recorded in model.json).")
    shuffle = BooleanField("Shuffle the training set every epoch", default=True)

    solver = SelectField("Solver", default="sgd", choices=SOLVER_CHOICES)
    momentum = FloatField("Momentum", default=0.9, validators=[NumberRange(min=0)])
    learning_rate = FloatField("Base learning rate", default=0.01,
                               validators=[DataRequired(message="Enter a learning rate > 0."), NumberRange(min=0)])
    weight_decay = FloatField("Weight decay", default=0.0, validators=[NumberRange(min=0)])
    lr_policy = SelectField("Policy", default="step", choices=POLICY_CHOICES)
    lr_step_size = OptionalFloat("Step size (% of training)", validators=[Optional()],
                                 description="step: every this %; sigmoid: the midpoint (default 33 / 50).")
    lr_step_values = StringField("Step values (%)", validators=[Optional()],
                                 description='multistep: comma-separated, e.g. "50,85".')
    lr_gamma = OptionalFloat("Gamma", validators=[Optional()], description="Decay factor (defaults per policy).")
    lr_power = OptionalFloat("Power", validators=[Optional()], description="inv and poly (defaults 0.5 / 3).")

    mean_subtraction = SelectField("Subtract mean", default="image",
                                   choices=[("image", "Image"), ("pixel", "Pixel"), ("none", "None")])
    crop_size = IntegerField("Crop size", validators=[Optional(), NumberRange(min=1)],
                             description="Random crop in training, centre crop otherwise.")
    loss = SelectField("Loss", default="", choices=[("", "task default"), ("ce", "cross-entropy"),
                                                    ("dice_ce", "Dice + cross-entropy"), ("dice", "Dice"),
                                                    ("mse", "mean squared error"), ("mae", "mean absolute error")],
                       validators=[Optional()])
    class_weights = StringField("Class weights", validators=[Optional()],
                                description='Empty, "auto" (inverse frequency) or one number per class.')
    aug_flip = SelectField("Flips", default="none", choices=[("none", "none"), ("horizontal", "horizontal"),
                                                             ("vertical", "vertical"), ("both", "both")])
    aug_rot90 = BooleanField("Random 90° rotations", default=False)
    aug_rotation = FloatField("Rotation (± degrees)", default=0.0, validators=[NumberRange(min=0)])
    aug_scale = FloatField("Scale (± fraction)", default=0.0, validators=[NumberRange(min=0)])
    aug_noise = FloatField("Noise (std, fraction)", default=0.0, validators=[NumberRange(min=0)])
    aug_contrast = FloatField("Contrast (± fraction)", default=0.0, validators=[NumberRange(min=0)])
    aug_brightness = FloatField("Brightness (± fraction)", default=0.0, validators=[NumberRange(min=0)])
    aug_hue = FloatField("Hue (± fraction)", default=0.0, validators=[NumberRange(min=0)])
    aug_saturation = FloatField("Saturation (± fraction)", default=0.0, validators=[NumberRange(min=0)])
    gpus = StringField("GPUs", validators=[Optional()], description='Empty: default device; a number or "all".')

    def validate_custom_network(self, field):
        if self.network.data == CUSTOM:
            code = field.data or ""
            if "def build_model" not in code:
                raise ValidationError("Custom code must define build_model(input_shape, num_outputs, **params).")

    def validate_network_params(self, field):
        try:
            value = json.loads(field.data or "{}")
        except ValueError as exc:
            raise ValidationError(f"Not valid JSON: {exc}") from exc
        if not isinstance(value, dict):
            raise ValidationError('Give a JSON object, e.g. {"dropout": 0.5}.')


def training_options(form: ModelForm) -> dict:
    """The engine options from a validated form (empty optional fields left out)."""
    options = {}
    for field in form:
        if field.name in NON_OPTION_FIELDS or field.type in ("SubmitField", "CSRFTokenField"):
            continue
        value = field.data
        if value in (None, "") and field.type != "BooleanField":
            continue
        options[field.name] = value
    options["network_params"] = json.loads(form.network_params.data or "{}")
    return options


def set_choices(form: ModelForm, store) -> None:
    """Fill the dataset, network and pretrained pickers from the jobs folder and the engine."""
    from ..engine.networks import list_networks

    datasets = [j for j in store.list("dataset") if j.status.value == "Done"]
    form.dataset.choices = [(j.id, f"{j.name} ({j.id})") for j in datasets] or [("", "no dataset is Done yet")]
    nets = []
    for spec in list_networks():
        label = spec.name + (f" ({spec.source})" if spec.source != "builtin" else "")
        nets.append((spec.name, label))
    form.network.choices = nets + [(CUSTOM, "Custom code")]
    models = [j for j in store.list("model") if (j.path / "snapshots").is_dir()]
    form.pretrained.choices = [("", "none (train from scratch)")] + [(j.id, f"{j.name} ({j.id})") for j in models]
