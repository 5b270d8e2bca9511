"""Everything a training run needs before its first step, built in one place.

:func:`prepare_run` turns a job, a dataset reader, a network and options
into a :class:`RunState`: seeded random streams, the input sources,
preprocessing, the model (built, fine-tuned or restored from a snapshot),
the optimizer (state restored on resume), the loss, the step schedule and
the initial ``model.json``.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FormValidationError, TrainingError
from ..jobs import Job
from ..jobs.model import update_model_record, write_model_record
from ..jobs.record import ModelRecord, SnapshotEntry
from ..phase_marks import mark
from . import jobio
from .augmentation import check_augmentation
from .batchnorm import fit_batchnorm_momentum
from .distribute import cluster_from_env
from .finetune import make_schedule
from .losses import auto_class_weights
from .networks import NetworkSpec
from .networks.custom import call_builder
from .options import TrainingOptions
from .pipeline import Layout, StageSource, should_preload
from .precision import float32_outputs, policy_name, policy_scope
from .preprocessing import Preprocessing, resolve_scale
from .snapshots import fine_tune, restore_optimizer_state
from .solvers import optimizer_for
from .tasks import Task
from .weights import resolve_weights

_FORM = "training options"


@dataclass(frozen=True)
class RunPlan:
    """What a training run was asked to do, fixed before it starts (the live objects are in :class:`RunState`).

    Attributes:
        job: The model job.
        reader: The dataset reader.
        spec: The network.
        opts: The validated training options.
        strat: The distribution strategy and this worker's place in it.
        folder: The job folder.
        resume_from: The snapshot entry resumed from, or ``None`` for a new run.
    """

    job: Job
    reader: Any
    spec: NetworkSpec
    opts: TrainingOptions
    strat: Any
    folder: Path
    resume_from: SnapshotEntry | None = None


@dataclass
class RunState:
    """A training run, ready to loop (see :func:`prepare_run`): its frozen :class:`RunPlan` and the live objects.

    The plan's fields read through (``state.job``, ``state.opts``...) and cannot be reassigned.

    Attributes:
        plan: What the run was asked to do.
        task: The task (bound to the input size by :func:`prepare_run` where it depends on it).
        seed: The run's random seed (recorded in ``model.json``).
        train_src, val_src: Input sources (``val_src`` is ``None`` without validation).
        prep: Input preprocessing (saved with the job, shared with inference).
        layout: Batch layout over replicas and workers.
        num_outputs: Classes or regression outputs.
        class_weights: Per-class loss weights or ``None``.
        model, optimizer, loss_fn: Built under the strategy's scope.
        standard_output: The model's output has the task's standard shape.
        custom_loss, custom_metrics: From a custom network's ``build_model``.
        steps_per_epoch, total_steps, start_step: The step schedule (``start_step`` > 0 on resume).
        val_every, snap_every, log_every: Intervals in steps (0: never).
        fine_tune_report: What ``pretrained`` loaded.
    """

    plan: RunPlan
    task: Task
    seed: int = 0
    train_src: Any = None
    val_src: Any = None
    prep: Any = None
    layout: Any = None
    num_outputs: int = 0
    class_weights: list | None = None
    model: Any = None
    optimizer: Any = None
    loss_fn: Any = None
    standard_output: bool = True
    custom_loss: Any = None
    custom_metrics: Any = None
    steps_per_epoch: int = 1
    total_steps: int = 0
    start_step: int = 0
    val_every: int = 0
    snap_every: int = 0
    log_every: int = 1
    fine_tune_report: dict | None = None
    extra: dict = field(default_factory=dict)

    @property
    def job(self) -> Job:
        return self.plan.job

    @property
    def reader(self) -> Any:
        return self.plan.reader

    @property
    def spec(self) -> NetworkSpec:
        return self.plan.spec

    @property
    def opts(self) -> TrainingOptions:
        return self.plan.opts

    @property
    def strat(self) -> Any:
        return self.plan.strat

    @property
    def folder(self) -> Path:
        return self.plan.folder

    @property
    def resume_from(self) -> SnapshotEntry | None:
        return self.plan.resume_from


def prepare_run(state: RunState) -> RunState:
    """Fill ``state`` (see the module docstring); raises :class:`TrainingError` / :class:`FormValidationError`."""
    import keras
    import tensorflow as tf

    opts = state.opts
    state.seed = int(opts.seed if opts.seed is not None else _stored_seed(state))
    keras.utils.set_random_seed(state.seed)
    _set_op_determinism(tf, opts.seed is not None)
    _open_sources(state)
    _make_preprocessing(state)
    mark("dataset open")
    if state.task.bind is not None:  # pieces that depend on the input size (detection)
        state.task = state.task.bind(state.task, tuple(state.prep.input_shape))
    state.num_outputs = state.task.num_outputs(state.reader, state.train_src)
    state.class_weights = _class_weights(state)
    _schedule(state)
    # the model is built under the run's policy (mixed_float16 / mixed_bfloat16), restored for the next job
    with policy_scope(policy_name(opts.precision, opts.mixed_precision)), state.strat.strategy.scope():
        _build_model(state)
        optimizer = optimizer_for(opts, state.total_steps)
        if opts.mixed_precision:
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        optimizer.build(state.model.trainable_variables)
        state.optimizer = optimizer
        if state.resume_from:
            state.start_step = restore_optimizer_state(state.folder, optimizer, state.resume_from)
        schedule = make_schedule(
            state.model, opts, state.start_step // max(1, state.steps_per_epoch), state.strat.replicas
        )
        if schedule is not None:
            state.extra["backbone_schedule"] = schedule
    state.loss_fn = state.task.loss(opts.loss, state.num_outputs, state.class_weights, state.custom_loss)
    if not state.resume_from:
        write_initial_info(state)
    elif state.strat.is_chief:
        update_model_record(
            state.folder,
            options=opts.to_dict(),
            total_steps=state.total_steps,
            status="Running",
            resumed_from=state.resume_from["file"],
        )
    mark("model build")
    return state


def _set_op_determinism(tf, enabled: bool) -> None:
    """Deterministic ops for a seeded run only: the switch is process-wide, and XLA (``jit``) has no
    deterministic version of some ops, so an earlier seeded run must not leave it on."""
    if enabled:
        tf.config.experimental.enable_op_determinism()
        return
    try:
        from tensorflow.python.framework import config as tf_config  # no public "disable" in TF 2.x
    except ImportError:
        return
    if getattr(tf_config, "is_op_determinism_enabled", lambda: False)():
        tf_config.disable_op_determinism()


def _stored_seed(state: RunState) -> int:
    if state.resume_from:
        return int(jobio.read_model_info(state.folder)["seed"])
    cluster = cluster_from_env()
    if cluster is not None:  # every worker must agree on the seed
        return abs(hash(str(sorted(cluster["cluster"].items())))) % (2**31)
    return int.from_bytes(os.urandom(4), "little") % (2**31)


def _open_sources(state: RunState) -> None:
    reader, opts = state.reader, state.opts
    if "train" not in reader.stages:
        raise TrainingError(f'Dataset "{reader.id}" has no training images.')
    fix = state.task.fix_labels

    def source(stage: str) -> StageSource:
        return StageSource(
            reader, stage, should_preload(reader, stage, opts.preload, opts.preload_limit_mb), fix_labels=fix
        )

    state.train_src = source("train")
    state.val_src = source("val") if "val" in reader.stages and opts.validation_interval > 0 else None


def _make_preprocessing(state: RunState) -> None:
    reader, opts = state.reader, state.opts
    feature_shape = tuple(reader.feature_shape())
    if opts.crop_size and opts.crop_size > min(feature_shape[:2]):
        raise FormValidationError(
            {"crop_size": [f"{opts.crop_size} is larger than the images ({feature_shape[0]}x{feature_shape[1]})"]},
            _FORM,
        )
    mean = reader.mean() if opts.mean_subtraction != "none" else None
    if opts.mean_subtraction != "none" and mean is None:
        raise TrainingError(f'Dataset "{reader.id}" has no mean image; use mean_subtraction="none".')
    if state.resume_from:
        state.prep = Preprocessing.load(state.folder)
    else:
        mean_arr = (
            0.0
            if mean is None
            else (mean if opts.mean_subtraction == "image" else mean.reshape(-1, mean.shape[-1]).mean(axis=0))
        )
        sample = state.train_src.sample(seed=state.seed) if opts.scale == "auto" else None
        scale = resolve_scale(opts.scale, reader.feature_dtype(), sample, mean_arr)
        state.prep = Preprocessing(opts.mean_subtraction, mean, scale, opts.crop_size, feature_shape)
    check_augmentation(opts.augmentation, state.prep.input_shape[:2], feature_shape[2])
    if state.task.label_kind == "boxes" and opts.crop_size:
        raise FormValidationError(
            {
                "crop_size": [
                    "object detection trains on whole images; resize the dataset "
                    "instead (aug_scale gives random crops that move the boxes)"
                ]
            },
            _FORM,
        )
    if state.task.label_kind == "image":  # targets would have to move with the inputs: not supported yet
        aug = opts.augmentation
        moved = {
            "crop_size": opts.crop_size,
            "aug_flip": aug.flip != "none",
            "aug_rot90": aug.rot90,
            "aug_rotation": aug.rotation > 0,
            "aug_scale": aug.scale > 0,
        }
        bad = {
            name: ["image-to-image training does not crop or move the target images; leave it unset"]
            for name, used in moved.items()
            if used
        }
        if bad:
            raise FormValidationError(bad, _FORM)


def _class_weights(state: RunState) -> list | None:
    opts, src = state.opts, state.train_src
    if not state.task.uses_class_weights or opts.class_weights is None:
        return None
    if opts.class_weights == "auto":
        labels = src.labels if src.preload else src.read_labels(np.arange(min(src.n, 4096)))
        return auto_class_weights(labels, state.num_outputs)
    if len(opts.class_weights) != state.num_outputs:
        raise FormValidationError(
            {"class_weights": [f"give {state.num_outputs} weights (one per class), not {len(opts.class_weights)}"]},
            _FORM,
        )
    return list(opts.class_weights)


def _schedule(state: RunState) -> None:
    opts, strat = state.opts, state.strat
    batch = opts.batch_size or state.spec.batch_size
    state.layout = Layout(
        batch, num_pipelines=strat.num_workers, pipeline_id=strat.worker_index, replicas=strat.replicas
    )
    if batch < strat.replicas:
        raise FormValidationError(
            {"batch_size": [f"must be at least the number of replicas ({strat.replicas})"]}, _FORM
        )
    spe = state.steps_per_epoch = state.layout.steps_per_epoch(state.train_src.n)
    state.total_steps = spe * opts.epochs

    def interval(epochs: float) -> int:
        return max(1, int(round(epochs * spe)))

    state.val_every = interval(opts.validation_interval) if state.val_src else 0
    state.snap_every = interval(opts.snapshot_interval) if opts.snapshot_interval > 0 else 0
    state.log_every = max(1, spe // opts.log_every)


def _build_model(state: RunState) -> None:
    import keras

    spec, opts = state.spec, state.opts

    params = dict(opts.network_params)
    if spec.source == "plugin" and len(spec.tasks) > 1:  # one builder, several heads: it needs the task
        params.setdefault("task", state.task.name)
    if spec.weights and not state.resume_from:
        resolved = resolve_weights(opts.weights, spec.name, spec.weights)
        if resolved is not None:
            params.update(weights_file=resolved.path, weights_channels=resolved.channels)
            state.extra["weights"] = resolved.record()

    def build():
        return call_builder(
            spec.build,
            state.prep.input_shape,
            state.num_outputs,
            params,
            origin=spec.name,
            path=spec.path,
        )

    if state.resume_from:
        state.model = keras.models.load_model(
            state.folder / jobio.SNAPSHOT_DIR / state.resume_from["file"], compile=False, safe_mode=False
        )
        if spec.source == "file":
            # re-run the builder only to recover a custom loss (weights come from the snapshot)
            _, state.custom_loss, state.custom_metrics = build()
    else:
        state.model, state.custom_loss, state.custom_metrics = build()
        if opts.precision == "bfloat16":  # softmax and loss in float32, as Keras's mixed-precision guide asks
            float32_outputs(state.model)
        if spec.source != "file":  # statistics that follow training within an epoch, even on small sets (plugins too)
            fit_batchnorm_momentum(state.model, state.steps_per_epoch)
        if opts.pretrained:
            state.fine_tune_report = fine_tune(state.model, str(opts.pretrained), state.folder.parent)
    _check_model(state)


def _check_model(state: RunState) -> None:
    model, task = state.model, state.task
    where = state.spec.path or state.spec.name
    in_shape = tuple(model.inputs[0].shape[1:]) if model.inputs else None
    if in_shape and tuple(in_shape) != tuple(state.prep.input_shape):  # noqa: SIM102 - kept as two readable steps
        if any(d is not None and d != e for d, e in zip(in_shape, state.prep.input_shape)) or len(in_shape) != 3:
            raise TrainingError(
                f"{where}: the model's input shape {in_shape} does not match the "
                f"dataset's (cropped) images {tuple(state.prep.input_shape)}."
            )
    out_shape = tuple(model.outputs[0].shape[1:]) if model.outputs else ()
    expected = tuple(task.output_shape(tuple(state.prep.input_shape), state.num_outputs))
    state.standard_output = out_shape == expected
    if not state.standard_output and state.custom_loss is None:
        raise TrainingError(
            f"{where}: the model's output shape {out_shape} does not fit {task.name} with "
            f"{state.num_outputs} outputs (expected {expected}); return a matching model, or "
            "(model, loss, metrics) with your own loss."
        )


def write_initial_info(state: RunState) -> None:
    """Write ``model.json`` at the start of a new run (chief only); copy a custom network file."""
    if not state.strat.is_chief:
        return
    opts, reader, prep = state.opts, state.reader, state.prep
    info: ModelRecord = {
        "job_id": state.job.id,
        "network": state.spec.name,
        "network_source": state.spec.source,
        "dataset_id": reader.id,
        "dataset_path": str(getattr(reader, "path", "")) or None,
        "dataset_plugin": getattr(reader, "plugin_id", None),
        "task": state.task.name,
        "options": opts.to_dict(),
        "seed": state.seed,
        "batch_size": state.layout.global_batch,
        "steps_per_epoch": state.steps_per_epoch,
        "total_steps": state.total_steps,
        "input_shape": list(prep.input_shape),
        "feature_shape": list(prep.feature_shape),
        "feature_dtype": str(reader.feature_dtype()),
        "num_outputs": state.num_outputs,
        "class_labels": reader.class_labels,
        "color_palette": reader.color_palette,
        "mean_subtraction": prep.mean_subtraction,
        "crop_size": prep.crop_size,
        "preprocessing": prep.save(state.folder),
        "loss": opts.loss or (state.task.default_loss if state.custom_loss is None else "custom"),
        "class_weights": state.class_weights,
        "lr_policy": opts.lr_policy_params(),
        "parameters": int(state.model.count_params()),
        "distributed": state.strat.describe(),
        "train_count": state.train_src.n,
        "val_count": state.val_src.n if state.val_src else 0,
        "input_pipeline": "preload" if state.train_src.preload else "stream",
        "fine_tune": state.fine_tune_report,
        # a backbone's starting weights (name, sha256, source); ModelRecord gains the key with jobs/record.py's next edit
        "weights": state.extra.get("weights"),
        "snapshots": [],
        "best_epoch": None,
        "best_metric": None,
        "last_epoch": 0,
        "status": "Running",
    }
    if state.spec.source == "file" and state.spec.path:
        shutil.copyfile(state.spec.path, state.folder / jobio.NETWORK_COPY)
    write_model_record(state.folder, info)
