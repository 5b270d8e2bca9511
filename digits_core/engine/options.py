"""Training options (DIGITS's "New Model" form), validated in one place.

The Python API (``train(**options)``), the ``digits train`` flags and the web
form all end up in :class:`TrainingOptions`; :meth:`TrainingOptions.from_kwargs`
rejects unknown names and bad values with a :class:`FormValidationError`
naming the field. Defaults and types are the dataclass fields below; help,
ranges and applicability are declared in :mod:`.option_specs` (the one
declaration the CLI, the web form and the docs are generated from). No TensorFlow here.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import FormValidationError
from .lr_policies import resolve_policy
from .option_specs import (
    BY_NAME,
    EARLY_STOPPING_MODES,
    FLIPS,
    LOSSES,  # noqa: F401 - the built-in loss names, importable from here as before
    LR_PREVIEW_OPTIONS,
    MEAN_MODES,
    applicable,
)
from .precision import PRECISIONS
from .preprocessing import parse_scale
from .solvers import SOLVERS
from .tasks import TASKS as _TASK_REGISTRY

TASKS = tuple(_TASK_REGISTRY)  # the built-in tasks; validation reads the live registry
_FORM = "training options"


@dataclass
class Augmentation:
    """On-the-fly augmentation in the tf.data pipeline (training stage only).

    Geometric transforms (flips, rot90, rotation, scale) are applied to the
    image and, for segmentation, to its mask with the same random draw
    (masks use nearest-neighbour sampling, so class ids stay integers).
    Photometric transforms (noise, contrast, brightness, hue, saturation)
    touch the image only.

    Attributes:
        flip: ``"none"``, ``"horizontal"``, ``"vertical"`` or ``"both"`` (random, p=0.5 each).
        rot90: Random multiple of 90 degrees (square inputs only).
        rotation: Maximum absolute rotation angle in degrees (uniform in [-r, r]).
        scale: Maximum relative zoom (uniform factor in [1-s, 1+s]).
        noise: Standard deviation of additive Gaussian noise, as a fraction of the input scale.
        contrast: Maximum relative contrast change (factor in [1-c, 1+c]).
        brightness: Maximum brightness shift, as a fraction of the input scale.
        hue: Maximum hue shift (fraction of the colour circle, 0-0.5; RGB only).
        saturation: Maximum relative saturation change (RGB only).
    """

    flip: str = "none"
    rot90: bool = False
    rotation: float = 0.0
    scale: float = 0.0
    noise: float = 0.0
    contrast: float = 0.0
    brightness: float = 0.0
    hue: float = 0.0
    saturation: float = 0.0

    @property
    def enabled(self) -> bool:
        """True when any transform is on."""
        return (
            self.flip != "none"
            or self.rot90
            or any(
                getattr(self, n) > 0
                for n in ("rotation", "scale", "noise", "contrast", "brightness", "hue", "saturation")
            )
        )

    def validate(self) -> None:
        errors: dict[str, list[str]] = {}
        if self.flip not in FLIPS:
            errors["aug_flip"] = [f"choose one of {', '.join(FLIPS)}"]
        for name in ("rotation", "scale", "noise", "contrast", "brightness", "hue", "saturation"):
            try:
                value = float(getattr(self, name))
            except (TypeError, ValueError):
                errors[f"aug_{name}"] = ["must be a number"]
                continue
            if value < 0 or not math.isfinite(value):
                errors[f"aug_{name}"] = ["must be >= 0"]
            setattr(self, name, value)
        if self.scale >= 1:
            errors["aug_scale"] = ["must be below 1 (0.1 means zoom factor in [0.9, 1.1])"]
        if self.hue > 0.5:
            errors["aug_hue"] = ["must be at most 0.5"]
        if errors:
            raise FormValidationError(errors, _FORM)


@dataclass
class TrainingOptions:
    """Every training hyper-parameter, with DIGITS's defaults.

    Attributes:
        epochs: Training epochs (DIGITS default 30).
        batch_size: Images per step (global, over all replicas); ``None`` takes the network's default.
        solver: One of :data:`SOLVERS`.
        momentum: Momentum for ``momentum``, ``nesterov`` and ``rmsprop``.
        learning_rate: Base learning rate.
        lr_policy: ``fixed``, ``step``, ``multistep``, ``exp``, ``inv``, ``poly`` or ``sigmoid``
            (see :mod:`digits_core.engine.lr_policies` for formulas; ``it`` is progress in %).
        lr_step_size, lr_gamma, lr_power, lr_step_values: Policy parameters (``None``: DIGITS default).
        lr_warmup_epochs: The rate rises linearly from near 0 to the policy's over this many epochs
            (0: no warm-up).
        weight_decay: Decoupled weight decay (L2 for plain SGD), 0 to disable.
        validation_interval: Validate every this many epochs (fractions allowed); 0 disables.
        snapshot_interval: Snapshot every this many epochs (fractions allowed); the last epoch is always saved.
        seed: Random seed; the same seed on the same data gives the same result on CPU.
            ``None`` picks one at random and records it (resume needs it).
        shuffle: Shuffle the training set each epoch.
        mean_subtraction: ``none``, ``image`` (the dataset's mean image) or ``pixel`` (its per-channel mean).
        scale: Input multiplier after mean subtraction: ``"auto"`` (1/255 for uint8 features, else
            1/std of the training data), ``"none"`` (1: uint8 ids that are not pixels train as themselves)
            or a positive number.
        crop_size: Random crop of this size in training, centre crop in validation/inference.
        augmentation: :class:`Augmentation` (or a dict of its fields).
        loss: ``None`` for the task default (``ce``; ``dice_ce`` for segmentation; ``mse`` for
            regression) or one of :data:`LOSSES`.
        class_weights: ``None``, ``"auto"`` (inverse class frequency in the training set) or a list
            of one weight per class.
        task: Override the task inferred from the dataset.
        network_params: Extra keyword arguments for the network's ``build_model``.
        pretrained: Fine-tune: a model job id (its last snapshot) or a Keras ``.keras``/``.weights.h5`` file.
        weights: A backbone network's starting weights: ``none``, ``imagenet`` (a name the network
            declares), ``zoo:NAME`` (the model zoo) or a file (see :mod:`digits_core.engine.weights`);
            ``None``: the network's default.
        freeze_epochs: Pretrained backbone weights stay fixed (BatchNorm in inference mode) for this many
            epochs while the head trains.
        backbone_lr_mult: After the freeze, the backbone learns at this fraction of the learning rate.
        gpus: ``None``/0 for the default device, an int or ``"all"`` for ``MirroredStrategy``.
        preload: ``"auto"`` (preload when the training set fits in ``preload_limit_mb``), ``True`` or ``False``.
        preload_limit_mb: Size limit for ``preload="auto"``.
        log_every: Log train loss/LR this many times per epoch.
        early_stopping_metric: Stop when this validation metric stops improving (``""``: off;
            see :mod:`digits_core.engine.early_stopping`).
        early_stopping_mode: ``min``, ``max`` or ``auto`` (from the metric's name).
        early_stopping_patience: Epochs without improvement before stopping.
        early_stopping_min_delta: Smallest change that counts as an improvement.
        early_stopping_restore_best: The model's result is the best epoch's weights.
        jit: Compile the train step with XLA (``jit_compile``).
        steps_per_execution: Train steps run per call of the compiled step (one replica, no Keras callbacks;
            otherwise 1): less Python dispatch per step for small networks, the same arithmetic.
        mixed_precision: Compute in float16 with float32 variables (``mixed_float16``; GPU only).
        precision: ``float32``, or ``bfloat16`` compute with float32 variables and outputs (``mixed_bfloat16``;
            hardware with native bfloat16 only, see :mod:`.precision`).
        volume_patch, volume_steps_per_epoch, volume_foreground, volume_base_filters, volume_levels,
            volume_adjacent_slices, volume_overlap: The volume networks' settings (``unet3d``, ``unet2.5d``;
            see :mod:`digits_core.engine.volume_train`); other networks ignore them.
    """

    epochs: int = 30
    batch_size: int | None = None
    solver: str = "sgd"
    momentum: float = 0.9
    learning_rate: float = 0.01
    lr_policy: str = "step"
    lr_step_size: float | None = None
    lr_gamma: float | None = None
    lr_power: float | None = None
    lr_step_values: Any = None
    lr_warmup_epochs: float = 0.0
    weight_decay: float = 0.0
    validation_interval: float = 1.0
    snapshot_interval: float = 1.0
    seed: int | None = None
    shuffle: bool = True
    mean_subtraction: str = "image"
    scale: Any = "auto"
    crop_size: int | None = None
    augmentation: Augmentation = field(default_factory=Augmentation)
    loss: str | None = None
    class_weights: Any = None
    task: str | None = None
    network_params: dict = field(default_factory=dict)
    pretrained: str | None = None
    weights: str | None = None
    freeze_epochs: float = 0.0
    backbone_lr_mult: float = 1.0
    gpus: Any = None
    preload: Any = "auto"
    preload_limit_mb: float = 2048.0
    log_every: int = 10
    early_stopping_metric: str = ""
    early_stopping_mode: str = "auto"
    early_stopping_patience: int = 5
    early_stopping_min_delta: float = 0.0
    early_stopping_restore_best: bool = True
    jit: bool = False
    steps_per_execution: int = 1
    mixed_precision: bool = False
    precision: str = "float32"
    volume_patch: str = ""
    volume_steps_per_epoch: int = 25
    volume_foreground: float = 0.5
    volume_base_filters: int = 8
    volume_levels: int = 3
    volume_adjacent_slices: int = 2
    volume_overlap: float = 0.5

    def __post_init__(self) -> None:
        # Switches given as strings ("false", "no") mean what they say even before validate() runs:
        # a bare TrainingOptions(shuffle="false") is not truthy. Anything unparseable is left for validate().
        for spec in BY_NAME.values():
            if spec.kind == "bool" and not spec.name.startswith("aug_") and isinstance(getattr(self, spec.name), str):
                try:
                    setattr(self, spec.name, spec.coerce(getattr(self, spec.name)))
                except ValueError:
                    pass

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> TrainingOptions:
        """Build and validate options; ``aug_<name>`` keys fill the augmentation.

        Raises:
            FormValidationError: Unknown option names or invalid values.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        aug_names = {f.name for f in dataclasses.fields(Augmentation)}
        aug = kwargs.pop("augmentation", None) or {}
        if isinstance(aug, Augmentation):
            aug = dataclasses.asdict(aug)
        aug = dict(aug)
        unknown = []
        values = {}
        for key, value in kwargs.items():
            if key.startswith("aug_") and key[4:] in aug_names:
                if value is not None:
                    aug[key[4:]] = value
            elif key in names:
                if value is not None or key in ("seed", "batch_size", "crop_size", "loss", "task", "pretrained"):
                    values[key] = value
            else:
                unknown.append(key)
        errors = {k: ["unknown training option"] for k in unknown}
        errors.update({f"aug_{k}": ["unknown augmentation"] for k in set(aug) - aug_names})
        options = cls(**values, augmentation=Augmentation(**{k: v for k, v in aug.items() if k in aug_names}))
        try:
            options.validate()
        except FormValidationError as exc:
            errors.update(exc.errors)
        if errors:
            raise FormValidationError(errors, _FORM)
        return options

    @classmethod
    def resolve(cls, network_defaults: dict | None, given: dict) -> TrainingOptions:
        """The options a run uses: the network's recommended defaults, overridden by what the user gave.

        Every front door (API, CLI, web form, JSON API) ends here, so the same
        inputs give the same ``model.json`` options.
        """
        chosen = {k: v for k, v in given.items() if v is not None}
        return cls.from_kwargs(**{**(network_defaults or {}), **chosen})

    def lr_policy_params(self) -> dict:
        """The resolved policy dict (see :func:`~digits_core.engine.lr_policies.resolve_policy`)."""
        return resolve_policy(
            self.lr_policy,
            step_size=self.lr_step_size,
            gamma=self.lr_gamma,
            power=self.lr_power,
            step_values=self.lr_step_values,
        )

    def validate(self) -> None:  # noqa: C901 - split pending (the complexity ratchet in pyproject.toml)
        """Check every value; raises :class:`FormValidationError` listing all bad fields."""
        errors: dict[str, list[str]] = {}
        if isinstance(self.augmentation, dict):
            try:
                self.augmentation = Augmentation(**self.augmentation)
            except TypeError as exc:
                errors["augmentation"] = [str(exc)]
        for spec in BY_NAME.values():  # kinds and bounds as declared in option_specs, for every option
            holder, attr = (self.augmentation, spec.name[4:]) if spec.name.startswith("aug_") else (self, spec.name)
            if spec.kind not in ("bool", "int", "float") or not hasattr(holder, attr):
                continue
            try:
                setattr(holder, attr, spec.coerce(getattr(holder, attr)))
            except ValueError as exc:
                errors[spec.name] = [str(exc)]
        self.solver = str(self.solver).lower()
        if self.solver not in SOLVERS:
            errors["solver"] = [f'unknown solver "{self.solver}"; choose one of {", ".join(SOLVERS)}']
        self.mean_subtraction = str(self.mean_subtraction).lower()
        if self.mean_subtraction not in MEAN_MODES:
            errors["mean_subtraction"] = [f"choose one of {', '.join(MEAN_MODES)}"]
        try:
            self.scale = parse_scale(self.scale)
        except ValueError as exc:
            errors["scale"] = [str(exc)]
        known_losses = tuple(dict.fromkeys(name for task in _TASK_REGISTRY.values() for name in task.losses))
        if self.loss is not None and self.loss not in known_losses:
            errors["loss"] = [f"choose one of {', '.join(known_losses)}"]
        if self.task is not None and self.task not in _TASK_REGISTRY:
            errors["task"] = [f"choose one of {', '.join(_TASK_REGISTRY)}"]
        if isinstance(self.class_weights, str) and self.class_weights != "auto":
            try:
                self.class_weights = [float(x) for x in self.class_weights.split(",")]
            except ValueError:
                errors["class_weights"] = ['use "auto" or a comma-separated list of numbers, one per class']
        if self.gpus is not None and self.gpus != "all":
            text = str(self.gpus).replace(" ", "")
            try:
                if "," in text:  # explicit GPU ids, e.g. "0,2"
                    if not all(part.isdigit() for part in text.split(",")):
                        raise ValueError
                    self.gpus = text
                else:
                    self.gpus = int(text)
                    if self.gpus < 0:
                        raise ValueError
            except (TypeError, ValueError):
                errors["gpus"] = ['use a number of GPUs, "all" or GPU ids such as 0,2']
        self._validate_early_stopping(errors)
        self.precision = str(self.precision).lower()
        if self.precision not in PRECISIONS:
            errors["precision"] = [f"choose one of {', '.join(PRECISIONS)}"]
        elif self.precision != "float32" and self.mixed_precision is True:
            errors["precision"] = ["bfloat16 and mixed_precision (float16) exclude each other: choose one"]
        if self.jit is True and self.seed is not None and "jit" not in errors:
            errors["jit"] = [
                "XLA has no deterministic version of some ops (e.g. max-pool gradients), so a seeded "
                "run cannot be compiled: leave the seed empty or turn jit off"
            ]
        if isinstance(self.preload, str):
            lowered = self.preload.lower()
            if lowered in ("auto",):
                self.preload = "auto"
            elif lowered in ("1", "true", "yes", "on"):
                self.preload = True
            elif lowered in ("0", "false", "no", "off"):
                self.preload = False
            else:
                errors["preload"] = ['use "auto", true or false']
        if not isinstance(self.network_params, dict):
            errors["network_params"] = ["must be a dict of keyword arguments"]
        try:
            self.lr_policy_params()
        except FormValidationError as exc:
            errors.update(exc.errors)
        if isinstance(self.augmentation, Augmentation):
            try:
                self.augmentation.validate()
            except FormValidationError as exc:
                errors.update({k: v for k, v in exc.errors.items() if k not in errors})  # the declared bound first
        if errors:
            raise FormValidationError(errors, _FORM)

    def _validate_early_stopping(self, errors: dict[str, list[str]]) -> None:
        metric = "" if self.early_stopping_metric is None else str(self.early_stopping_metric).strip()
        self.early_stopping_metric = metric
        if metric and not metric.startswith("val_"):
            errors["early_stopping_metric"] = [
                f'"{metric}" is not a validation metric: use a logged val_* name, e.g. val_loss or val_accuracy'
            ]
        self.early_stopping_mode = str(self.early_stopping_mode).lower()
        if self.early_stopping_mode not in EARLY_STOPPING_MODES:
            errors["early_stopping_mode"] = [f"choose one of {', '.join(EARLY_STOPPING_MODES)}"]

    def to_dict(self) -> dict:
        """JSON-serializable dict (stored in ``model.json``), without options that do not apply
        to the solver / LR policy (e.g. no ``momentum`` for Adam)."""
        return applicable(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: dict) -> TrainingOptions:
        """Inverse of :meth:`to_dict`."""
        data = dict(data)
        aug = data.pop("augmentation", {}) or {}
        return cls.from_kwargs(**data, augmentation=aug)


#: What the learning-rate preview says under a base rate that is not a positive number.
PREVIEW_RATE_MESSAGE = "The learning rate must be a number above 0."


def lr_preview_schedule(values: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """The base rate and resolved LR policy the learning-rate preview draws, checked as training checks them.

    Both doors of the preview (``digits lr-preview`` and ``GET /api/lr-preview``) call this.

    Args:
        values: Values of :data:`~digits_core.engine.option_specs.LR_PREVIEW_OPTIONS` (strings from a
            query, numbers from a command line); ``None`` or ``""``: the default.

    Returns:
        ``(learning_rate, policy)``, ``policy`` as :func:`~digits_core.engine.lr_policies.resolve_policy` gives it.

    Raises:
        FormValidationError: A bad value, on its field (``lr_gamma``...), with training's message (a bad base
            rate with the chart's own sentence, :data:`PREVIEW_RATE_MESSAGE`).
    """
    given = {name: values.get(name) for name in LR_PREVIEW_OPTIONS if values.get(name) not in (None, "")}
    try:
        options = TrainingOptions.from_kwargs(**given)
    except FormValidationError as exc:
        errors = {**exc.errors, **({"learning_rate": [PREVIEW_RATE_MESSAGE]} if "learning_rate" in exc.errors else {})}
        raise FormValidationError(errors, "learning-rate preview") from None
    return float(options.learning_rate), options.lr_policy_params()
