"""The training options, declared once: CLI flags, web form, API validation and docs come from here.

Each :class:`~digits_core.option_spec.OptionSpec` (the one declaration type, shared with the dataset
job options) says what the user sees about one option: its
kind, range, help text, form label and group, and which solvers / LR
policies it applies to. The default value and Python type live on the
:class:`~digits_core.engine.options.TrainingOptions` dataclass (read through
:attr:`OptionSpec.default`); :meth:`TrainingOptions.validate` checks the
ranges declared here, and :meth:`OptionSpec.coerce` brings every value to its
declared kind and bounds (``shuffle="false"`` is False, ``aug_scale=0.9995``
is refused), the same for every door. Why one module: it is the one table of
training options, read top to bottom as the reference the CLI, the form and
the manual (docs/training.md) are generated from; split by topic, an option's applicability
rules and its neighbours would live in different files. Generated from this list:

* ``digits train`` flags (:func:`add_cli_arguments`, :func:`options_from_cli`);
* the web "New model" form fields (``digits_core.web.model_form``);
* the JSON API's validation (``TrainingOptions.from_kwargs``, unknown names rejected);
* the options table in docs/training.md (:func:`markdown_table`; a test fails when they differ).

Network defaults (built-in ``NetworkSpec.defaults`` and a custom file's
``DEFAULTS``) are applied by :func:`effective_defaults`, the same for every
front door. No TensorFlow here.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from typing import Any

from ..errors import FormValidationError
from ..option_spec import OptionSpec, add_arguments, holds_several, options_from_args, parse_values
from .lr_policies import PARAMETERS, POLICIES, defaults_text, policies_using
from .precision import FORCE_ENV, PRECISIONS
from .solvers import MOMENTUM_SOLVERS, SOLVERS
from .tasks import TASKS

MEAN_MODES = ("none", "image", "pixel")
FLIPS = ("none", "horizontal", "vertical", "both")
EARLY_STOPPING_MODES = ("auto", "min", "max")
#: Options a search space may not range over: the tuner sets the epochs, and these only change book-keeping.
NOT_SEARCHABLE = (
    "epochs",
    "seed",
    "validation_interval",
    "snapshot_interval",
    "log_every",
    "steps_per_execution",
    "task",
    "preload",
    "preload_limit_mb",
    "early_stopping_metric",
    "early_stopping_mode",
)
#: Every registered task's losses (tasks are declared in :mod:`.tasks`).
LOSSES = tuple(dict.fromkeys(name for task in TASKS.values() for name in task.losses))


def _defaults() -> dict:
    from .options import Augmentation, TrainingOptions  # options imports this module: its dataclass holds the defaults

    values = {
        f.name: (f.default if f.default is not dataclasses.MISSING else f.default_factory())  # type: ignore[misc,operator]
        for f in dataclasses.fields(TrainingOptions)
        if f.name != "augmentation"
    }
    values.update({f"aug_{f.name}": f.default for f in dataclasses.fields(Augmentation)})
    return values


def _spec(name, kind, label, help, group, **kw) -> OptionSpec:
    return OptionSpec(name, kind, label, help, group, search=name not in NOT_SEARCHABLE, defaults=_defaults, **kw)


TRAINING_OPTIONS: tuple[OptionSpec, ...] = (
    _spec(
        "epochs", "int", "Training epochs", "training epochs", "Training", minimum=0, exclusive_min=True, maximum=100000
    ),
    _spec(
        "batch_size",
        "int",
        "Batch size",
        "images per step over all replicas (empty: the network's, e.g. LeNet 64)",
        "Training",
        minimum=0,
        exclusive_min=True,
        sweep=True,
    ),
    _spec(
        "validation_interval",
        "float",
        "Validation interval (epochs)",
        "validate every N epochs, fractions allowed (0 disables)",
        "Training",
        minimum=0,
    ),
    _spec(
        "snapshot_interval",
        "float",
        "Snapshot interval (epochs)",
        "snapshot every N epochs, fractions allowed (the last epoch is always saved)",
        "Training",
        minimum=0,
    ),
    _spec(
        "seed",
        "int",
        "Random seed",
        "same seed + same data = same weights on CPU (empty: random, recorded)",
        "Training",
        minimum=0,
    ),
    _spec(
        "shuffle", "bool", "Shuffle the training set every epoch", "shuffle the training set every epoch", "Training"
    ),
    _spec("solver", "choice", "Solver", "optimizer (Keras 3)", "Solver", choices=SOLVERS),
    _spec(
        "momentum",
        "float",
        "Momentum",
        "momentum of the momentum and nesterov solvers",
        "Solver",
        minimum=0,
        solvers=MOMENTUM_SOLVERS,
    ),
    _spec(
        "learning_rate",
        "float",
        "Base learning rate",
        "base learning rate",
        "Solver",
        minimum=0,
        exclusive_min=True,
        sweep=True,
        aliases=("--lr",),
    ),
    _spec("weight_decay", "float", "Weight decay", "decoupled weight decay (L2 for plain SGD)", "Solver", minimum=0),
    _spec(
        "lr_policy",
        "choice",
        "Policy",
        "learning-rate policy (see `digits lr-preview`)",
        "Learning rate schedule",
        choices=POLICIES,
    ),
    # The policy parameters: which policies take each one, and their defaults, come from lr_policies.DEFAULTS.
    _spec(
        "lr_step_size",
        "float",
        "Step size (% of training)",
        f"step: every this % of training; sigmoid: the midpoint (empty: {defaults_text('step_size', named=False)})",
        "Learning rate schedule",
        minimum=0,
        exclusive_min=True,
        policies=policies_using("step_size"),
    ),
    _spec(
        "lr_step_values",
        "text",
        "Step values (%)",
        f'multistep: comma-separated positions in % (empty: "{defaults_text("step_values", named=False)}")',
        "Learning rate schedule",
        policies=policies_using("step_values"),
    ),
    _spec(
        "lr_gamma",
        "float",
        "Gamma",
        f"policy decay factor (empty: {defaults_text('gamma')})",
        "Learning rate schedule",
        policies=policies_using("gamma"),
    ),
    _spec(
        "lr_power",
        "float",
        "Power",
        f"inv / poly power (empty: {defaults_text('power', named=False)})",
        "Learning rate schedule",
        policies=policies_using("power"),
    ),
    _spec(
        "lr_warmup_epochs",
        "float",
        "Warm-up epochs",
        "the rate rises linearly from near 0 to the policy's over this many epochs (0: none)",
        "Learning rate schedule",
        minimum=0,
    ),
    _spec(
        "mean_subtraction",
        "choice",
        "Subtract mean",
        "subtract the dataset's mean image or per-channel mean",
        "Data",
        choices=MEAN_MODES,
    ),
    _spec(
        "scale",
        "text",
        "Input scale",
        'multiplier after mean subtraction: "auto" (1/255 for uint8, '
        'else 1/std of the training data), "none" (values as stored, e.g. uint8 character ids) or a number',
        "Data",
    ),
    _spec(
        "crop_size",
        "int",
        "Crop size",
        "random N×N crop in training, centre crop in validation/inference",
        "Data",
        minimum=0,
        exclusive_min=True,
    ),
    _spec(
        "loss",
        "choice",
        "Loss",
        "loss (empty: the task's: " + ", ".join(f"{t.name} {t.default_loss}" for t in TASKS.values()) + ")",
        "Data",
        choices=LOSSES,
    ),
    _spec(
        "class_weights",
        "text",
        "Class weights",
        'per-class loss weights: "auto" (inverse frequency) or w1,w2,...',
        "Data",
    ),
    _spec(
        "preload",
        "choice",
        "Preload",
        "preload the dataset into memory (auto: when it fits the limit)",
        "Data",
        choices=("auto", "true", "false"),
    ),
    _spec("preload_limit_mb", "float", "Preload limit (MB)", "size limit of preload=auto", "Data", minimum=0),
    _spec(
        "log_every", "int", "Log points per epoch", "log train loss / LR this many times per epoch", "Data", minimum=1
    ),
    _spec(
        "early_stopping_metric",
        "text",
        "Monitor (validation metric)",
        "early stopping: stop when this logged validation metric (e.g. val_loss, val_accuracy) stops improving "
        "(empty: off)",
        "Early stopping",
    ),
    _spec(
        "early_stopping_mode",
        "choice",
        "Better when",
        "early stopping: min, max, or auto (min for losses and errors, max otherwise)",
        "Early stopping",
        choices=EARLY_STOPPING_MODES,
    ),
    _spec(
        "early_stopping_patience",
        "int",
        "Patience (epochs)",
        "early stopping: epochs without improvement before stopping",
        "Early stopping",
        minimum=1,
        maximum=100000,
    ),
    _spec(
        "early_stopping_min_delta",
        "float",
        "Minimum improvement",
        "early stopping: smallest change that counts as an improvement",
        "Early stopping",
        minimum=0,
    ),
    _spec(
        "early_stopping_restore_best",
        "bool",
        "Restore the best weights",
        "early stopping: the model's result is the best epoch's weights, not the last",
        "Early stopping",
    ),
    _spec("aug_flip", "choice", "Flips", "random flips (masks follow)", "Augmentation", choices=FLIPS),
    _spec("aug_rot90", "bool", "Random 90° rotations", "random 90-degree rotations (square inputs)", "Augmentation"),
    _spec("aug_rotation", "float", "Rotation (± degrees)", "max rotation in degrees", "Augmentation", minimum=0),
    _spec(
        "aug_scale",
        "float",
        "Scale (± fraction)",
        "max zoom, e.g. 0.1 for [0.9, 1.1]",
        "Augmentation",
        minimum=0,
        maximum=0.999,
    ),
    _spec("aug_noise", "float", "Noise (std, fraction)", "Gaussian noise std (input scale)", "Augmentation", minimum=0),
    _spec("aug_contrast", "float", "Contrast (± fraction)", "max relative contrast change", "Augmentation", minimum=0),
    _spec(
        "aug_brightness",
        "float",
        "Brightness (± fraction)",
        "max brightness shift (input scale)",
        "Augmentation",
        minimum=0,
    ),
    _spec("aug_hue", "float", "Hue (± fraction)", "max hue shift (RGB only)", "Augmentation", minimum=0, maximum=0.5),
    _spec(
        "aug_saturation",
        "float",
        "Saturation (± fraction)",
        "max relative saturation change (RGB only)",
        "Augmentation",
        minimum=0,
    ),
    _spec(
        "task",
        "choice",
        "Task",
        "override the task inferred from the dataset's labels",
        "Network",
        choices=tuple(TASKS),
    ),
    _spec(
        "network_params",
        "json",
        "Network parameters (JSON)",
        "keyword arguments of build_model (CLI: --network-param KEY=VALUE, repeatable)",
        "Network",
        cli=False,
        web="custom",
    ),
    _spec(
        "pretrained",
        "text",
        "Pretrained model (fine-tune)",
        "fine-tune: a model job (its last snapshot; a volume model: its final weights) or a .keras / Keras 2 .h5 "
        "file; layers match by name",
        "Network",
        web="custom",
    ),
    _spec(
        "weights",
        "text",
        "Backbone weights",
        "a backbone network's starting weights: none, imagenet, zoo:NAME or a weights file "
        "(empty: the network's default; see docs/backbones.md)",
        "Network",
        max_length=4096,
    ),
    _spec(
        "freeze_epochs",
        "float",
        "Frozen backbone (epochs)",
        "pretrained backbones: only the head trains for this many epochs (BatchNorm in inference mode)",
        "Network",
        minimum=0,
    ),
    _spec(
        "backbone_lr_mult",
        "float",
        "Backbone learning-rate multiplier",
        "pretrained backbones: after the freeze the backbone learns at this fraction of the rate",
        "Network",
        minimum=0,
        maximum=100,
    ),
    _spec(
        "gpus",
        "text",
        "GPUs",
        'number of local GPUs for MirroredStrategy, "all", or GPU ids such as 0,2 '
        "(empty: default device; the web server gives each job its own GPUs)",
        "Hardware",
    ),
    _spec(
        "jit",
        "bool",
        "XLA compilation (jit)",
        "compile the train step with XLA (jit_compile; not with a seed: XLA ops are not deterministic)",
        "Hardware",
    ),
    _spec(
        "steps_per_execution",
        "int",
        "Steps per execution",
        "train steps per call of the compiled step (one device, no Keras callbacks): less Python dispatch for "
        "small networks; logs, validation and snapshots stay at their steps",
        "Hardware",
        minimum=1,
        maximum=1000,
    ),
    _spec(
        "mixed_precision",
        "bool",
        "Mixed precision (GPU)",
        "float16 compute with float32 weights (mixed_float16); GPU only, refused on a CPU",
        "Hardware",
    ),
    _spec(
        "precision",
        "choice",
        "Compute precision",
        "bfloat16: bfloat16 compute with float32 weights and outputs (mixed_bfloat16); only where the hardware has "
        f"native bfloat16 (avx512_bf16 or amx_bf16 CPUs, GPUs 8.0+), else refused unless {FORCE_ENV}=1",
        "Hardware",
        choices=PRECISIONS,
    ),
    # The volume networks' settings (unet3d, unet2.5d: digits_core.engine.volume_train); 2-D networks ignore them.
    _spec(
        "volume_patch",
        "text",
        "Patch (D,H,W voxels)",
        "volume networks: training patch D,H,W, each divisible "
        "by 2^(levels-1) (empty: ¾ of the median case; unet2.5d takes D=1)",
        "Volumes (unet3d, unet2.5d)",
    ),
    _spec(
        "volume_steps_per_epoch",
        "int",
        "Steps per epoch",
        "volume networks: training steps (batches of patches) per epoch",
        "Volumes (unet3d, unet2.5d)",
        minimum=1,
        maximum=100000,
    ),
    _spec(
        "volume_foreground",
        "float",
        "Foreground oversampling",
        "volume networks: share of the patches centred on a labelled voxel",
        "Volumes (unet3d, unet2.5d)",
        minimum=0,
        maximum=1,
    ),
    _spec(
        "volume_base_filters",
        "int",
        "Base filters",
        "volume networks: filters of the top level (doubled per level; wider trains better on a GPU)",
        "Volumes (unet3d, unet2.5d)",
        minimum=1,
        maximum=512,
    ),
    _spec(
        "volume_levels",
        "int",
        "Levels",
        "volume networks: U-Net levels (pooling steps + 1)",
        "Volumes (unet3d, unet2.5d)",
        minimum=2,
        maximum=6,
    ),
    _spec(
        "volume_adjacent_slices",
        "int",
        "Adjacent slices (2.5-D)",
        "unet2.5d: neighbouring slices on each side fed as channels",
        "Volumes (unet3d, unet2.5d)",
        minimum=0,
        maximum=16,
    ),
    _spec(
        "volume_overlap",
        "float",
        "Sliding-window overlap",
        "volume networks: tile overlap of the sliding-window validation and inference (Gaussian blending)",
        "Volumes (unet3d, unet2.5d)",
        minimum=0,
        maximum=0.9,
    ),
)

BY_NAME: dict[str, OptionSpec] = {spec.name: spec for spec in TRAINING_OPTIONS}
GROUPS: tuple[str, ...] = tuple(dict.fromkeys(spec.group for spec in TRAINING_OPTIONS))
#: What the learning-rate preview takes (``digits lr-preview`` flags, ``GET /api/lr-preview`` query, the New
#: Model chart): the base rate, the policy and every policy parameter, validated as training validates them.
LR_PREVIEW_OPTIONS: tuple[str, ...] = ("learning_rate", "lr_policy") + tuple(f"lr_{name}" for name in PARAMETERS)


#: How a swept option appears in the job names of a sweep; also the order sweeps vary options in (outermost first).
SHORT_NAMES = {"learning_rate": "lr", "batch_size": "batch"}


def sweep_option_names() -> tuple[str, ...]:
    """The options that accept several values, in the order they vary (outermost first)."""
    rank = {name: i for i, name in enumerate(SHORT_NAMES)}  # learning rate, then batch size, then the rest
    return tuple(sorted((spec.name for spec in TRAINING_OPTIONS if spec.sweep), key=lambda n: rank.get(n, len(rank))))


def is_sweep(options: Mapping[str, Any]) -> bool:
    """True when a sweepable option holds several values (a list, or a string with a comma)."""
    return any(holds_several(options.get(name)) for name in sweep_option_names())


def refuse_sweep(options: Mapping[str, Any]) -> None:
    """Raise when ``options`` hold a sweep (for the calls that train exactly one job).

    Raises:
        FormValidationError: Naming the first option with several values.
    """
    several = [name for name in sweep_option_names() if holds_several(options.get(name))]
    if several:
        raise FormValidationError(
            {
                several[0]: [
                    "several values make a sweep (one job per combination): use digits_core.sweeps.train_sweep(), "
                    "`digits train` or the web form"
                ]
            },
            "training options",
        )


def effective_defaults(network_defaults: dict | None = None) -> dict:
    """Every option's value when the user sets nothing: engine defaults overlaid with the network's."""
    values = _defaults()
    values.update({k: v for k, v in (network_defaults or {}).items() if k in values})
    return values


def applicable(options: dict) -> dict:
    """``options`` without those that do not apply to their solver / LR policy (e.g. momentum for Adam)."""
    return {k: v for k, v in options.items() if k not in BY_NAME or BY_NAME[k].applies(options)}


# -- the CLI ---------------------------------------------------------------------------------------


#: Appended to the help of options that accept several values.
SWEEP_HELP = "; comma-separated values sweep: one job per combination"


def _sweep_values(spec: OptionSpec):
    """An argparse type: one number, or a list of them for ``0.1,0.01`` (checked by the sweep expansion)."""

    def parse(text: str):
        try:
            values = parse_values(spec, text)
        except FormValidationError as exc:
            raise argparse.ArgumentTypeError("; ".join(exc.errors[spec.name])) from None
        return values[0] if len(values) == 1 else values

    parse.__name__ = f"{spec.kind} list"
    return parse


def add_cli_arguments(parser, names: tuple[str, ...] | None = None, *, sweep: bool = True) -> None:
    """Add one flag per option (``--lr`` is kept as an alias of ``--learning-rate``).

    Args:
        parser: The ``argparse`` (sub)parser.
        names: Only these options (default: every option with ``cli``), e.g. :data:`LR_PREVIEW_OPTIONS`.
        sweep: Options that sweep accept several comma-separated values (``digits train``); False: one value.
    """
    specs = TRAINING_OPTIONS if names is None else tuple(BY_NAME[name] for name in names)
    plain = {"int": int, "float": float}
    add_arguments(
        parser,
        specs,
        value_type=lambda s: _sweep_values(s) if s.sweep and sweep else plain.get(s.kind, str),
        extra_help=lambda s: SWEEP_HELP if s.sweep and sweep else "",
    )


def options_from_cli(args, names: tuple[str, ...] | None = None) -> dict:
    """The options a command line set (flags not given are left out); ``names`` as for :func:`add_cli_arguments`."""
    return options_from_args(args, TRAINING_OPTIONS if names is None else tuple(BY_NAME[name] for name in names))


# -- docs ------------------------------------------------------------------------------------------


def markdown_table() -> str:
    """The manual's training options table (docs/training.md) (regenerate: ``python -m digits_core.engine.option_specs``)."""
    rows = [
        "| option (API / form) | flag | default | range / choices | applies to | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for spec in TRAINING_OPTIONS:
        default = spec.default
        shown = (
            "" if default in (None, "", {}) else f"`{str(default).lower() if isinstance(default, bool) else default}`"
        )
        if spec.choices:
            rng = ", ".join(spec.choices)
        elif spec.minimum is not None or spec.maximum is not None:
            low = "" if spec.minimum is None else f"{'>' if spec.exclusive_min else '≥'} {spec.minimum:g}"
            high = "" if spec.maximum is None else f"≤ {spec.maximum:g}"
            rng = ", ".join(x for x in (low, high) if x)
        else:
            rng = spec.kind
        applies = ""
        if spec.solvers:
            applies = "solver " + "/".join(spec.solvers)
        elif spec.policies:
            applies = "policy " + "/".join(spec.policies)
        flag = f"`{spec.flag}`" if spec.cli else "`--network-param`"
        meaning = (spec.help + (SWEEP_HELP if spec.sweep else "")).replace("|", "/")
        rows.append(f"| `{spec.name}` | {flag} | {shown} | {rng} | {applies} | {meaning} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # pragma: no cover - docs helper
    print(markdown_table(), end="")
