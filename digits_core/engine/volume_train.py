"""Training on a volume dataset (``"layout": "DHWC"``): ``unet3d`` on patches, or ``unet2.5d`` on slice stacks.

:func:`~digits_core.engine.trainer.train` hands a volume dataset here. One
run of a model job:

* patches of ``patch`` voxels (default: ¾ of the median case shape, rounded
  down to what the U-Net's pooling divides) sampled by
  :class:`~digits_core.volumes.patches.PatchSampler` with foreground
  oversampling and 3-D augmentation; Adam, Dice + cross-entropy loss;
* every ``validation_interval`` epochs (default 5, and after the last one),
  sliding-window inference over every whole validation case (Gaussian
  blending, :mod:`~digits_core.volumes.sliding`) scored per case
  (:mod:`~digits_core.volumes.metrics`): ``val_dice`` (per-case mean Dice),
  ``val_dice_class<c>`` and ``val_hd95`` (mm) go to ``metrics.jsonl``;
* the model is saved as ``model.keras``; ``model.json`` says ``"kind": "volume"``
  and keeps what inference needs (patch, classes, spacing, normalisation,
  per-case validation scores).

``epochs``, ``batch_size``, ``learning_rate``, ``validation_interval`` and
``seed`` apply, and ``pretrained``: a volume model job (or its ``.keras`` file) whose weights the new network
starts from, instead of random ones (a volume run keeps no snapshots: the model's final weights; the network,
``volume_base_filters`` and ``volume_levels`` must build the same layers, or the run is refused naming both);
their defaults are the volume networks' own
(:data:`~digits_core.engine.volume_nets.VOLUME_DEFAULTS`, shown by the New
Model form too), so every door runs the same defaults (:func:`volume_config`
resolves them without training). The volume settings are declared training
options (CLI flags, the New Model form's "Volumes" fields, API keywords; :data:`VOLUME_PARAMS`):
``volume_patch`` ("D,H,W"), ``volume_steps_per_epoch``, ``volume_foreground``,
``volume_base_filters``, ``volume_levels``, ``volume_adjacent_slices`` (for
``unet2.5d``) and ``volume_overlap``, with their defaults declared once, in the
option specs (``digits train --help`` shows them). :class:`VolumeConfig` has
no defaults of its own. The older network parameters
(``--network-param patch=16,32,32``) still work and win over the options.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FormValidationError, TrainingError
from ..jobs import Job, JobStatus
from ..submit.records import create_model_record
from . import jobio
from .hparams import final_values, hparam_values, volume_record, write_run_hparams
from .jobio import read_model_info
from .networks import VOLUME_KIND, check_network_kind
from .volume_nets import VOLUME_DEFAULTS, VOLUME_NETWORKS

#: The volume settings: each is the declared training option ``volume_<name>`` (or ``--network-param NAME=...``).
VOLUME_PARAMS = ("patch", "steps_per_epoch", "foreground", "base_filters", "levels", "adjacent_slices", "overlap")


@dataclass
class VolumeConfig:
    """The settings of one volume training run (saved in ``model.json``), resolved by :func:`volume_config`.

    No field has a default here: they come from the option specs (``engine.option_specs``) under the volume
    networks' :data:`~digits_core.engine.volume_nets.VOLUME_DEFAULTS`, the one table every door shows.
    """

    network: str
    patch: list
    epochs: int
    batch_size: int
    steps_per_epoch: int
    learning_rate: float
    val_every: int
    foreground: float
    base_filters: int
    levels: int
    adjacent_slices: int
    overlap: float
    seed: int


def volume_dataset_folder(dataset: Any, jobs_dir=None) -> Path | None:
    """The published folder of a volume dataset (``dataset.json`` layout DHWC), or ``None`` for any other dataset."""
    from ..datasets.reader import _find_dataset_folder  # the datasets package imports engine helpers: no cycle at load

    if hasattr(dataset, "path") and hasattr(dataset, "info"):
        folder = Path(dataset.path)
    else:
        try:
            folder = _find_dataset_folder(str(dataset), jobs_dir)[1]
        except Exception:  # noqa: BLE001 - not found here: the 2-D path reports it
            return None
    try:
        info = json.loads((folder / "dataset.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return folder if info.get("layout") == "DHWC" else None


def _auto_patch(info: dict, levels: int, flat: bool) -> list[int]:
    shapes = [s for st in info["stages"].values() for s in st.get("shapes", [])]
    median = np.median(np.asarray(shapes, dtype=np.float64)[:, :3], axis=0)
    unit = 2 ** (levels - 1)
    patch = [max(unit, int(m * 0.75) // unit * unit) for m in median]
    return [1] + patch[1:] if flat else patch


def _config(network: str, info: dict, options: dict) -> VolumeConfig:
    from .options import TrainingOptions  # the option specs load only when a volume run is planned

    # the volume networks' defaults under what was given (None: not set); unknown names and bad values are
    # refused as for 2-D
    opts = TrainingOptions.resolve(VOLUME_DEFAULTS, options)
    if opts.precision != "float32":
        raise FormValidationError(
            {"precision": [f"the volume networks train in float32 only, not {opts.precision}"]}, "training options"
        )
    params = dict(opts.network_params or {})
    unknown = sorted(set(params) - set(VOLUME_PARAMS))
    if unknown:
        raise FormValidationError(
            {
                "network_params": [
                    f"unknown volume network parameter(s): {', '.join(unknown)}; known: {', '.join(VOLUME_PARAMS)}"
                ]
            },
            "training options",
        )
    # the declared options (--volume-patch, the form's Volumes fields); the older --network-param KEY=VALUE wins
    values = {key: params.get(key, getattr(opts, f"volume_{key}")) for key in VOLUME_PARAMS}
    levels = int(values["levels"])
    field = "network_params" if "patch" in params else "volume_patch"
    patch = values["patch"]
    try:
        if patch in (None, ""):
            patch = _auto_patch(info, levels, network == "unet2.5d")
        elif isinstance(patch, str):
            patch = [int(v) for v in patch.replace("x", ",").split(",")]
        patch = [int(v) for v in patch]
    except (TypeError, ValueError):
        raise FormValidationError(
            {field: [f"patch must be D,H,W voxels such as 16,32,32, not {patch!r}"]}, "training options"
        ) from None
    unit = 2 ** (levels - 1)
    checked = patch[1:] if network == "unet2.5d" else patch
    if len(patch) != 3 or any(p < unit or p % unit for p in checked):
        raise FormValidationError(
            {field: [f"patch must be D,H,W voxels divisible by {unit}, not {patch}"]}, "training options"
        )
    return VolumeConfig(
        network=network,
        patch=patch,
        epochs=int(opts.epochs),
        batch_size=int(opts.batch_size or VOLUME_DEFAULTS["batch_size"]),
        steps_per_epoch=int(values["steps_per_epoch"]),
        learning_rate=float(opts.learning_rate),
        val_every=max(1, int(opts.validation_interval)),
        foreground=float(values["foreground"]),
        base_filters=int(values["base_filters"]),
        levels=levels,
        adjacent_slices=int(values["adjacent_slices"]),
        overlap=float(values["overlap"]),
        seed=int(opts.seed if opts.seed is not None else 0),
    )


def _volume_folder(dataset: Any, jobs_dir) -> Path:
    folder = volume_dataset_folder(dataset, jobs_dir)
    if folder is None:
        raise TrainingError(f'{dataset} is not a volume dataset (its dataset.json has no "layout": "DHWC")')
    return folder


def _volume_network(network: Any, folder: Path) -> str:
    network = network or VOLUME_NETWORKS[0]
    if not isinstance(network, str):
        raise FormValidationError(
            {
                "network": [
                    f'dataset "{folder.parent.name}" is a volume (3-D) dataset: use {" or ".join(VOLUME_NETWORKS)}'
                ]
            },
            "training options",
        )
    check_network_kind(network, VOLUME_KIND, folder.parent.name)  # the rule every door shares
    return network.lower()


def _plan(dataset: Any, network: Any, jobs_dir, options: dict) -> tuple[Path, dict, VolumeConfig]:
    folder = _volume_folder(dataset, jobs_dir)
    network = _volume_network(network, folder)
    info = json.loads((folder / "dataset.json").read_text(encoding="utf-8"))
    return folder, info, _config(network, info, options)


def volume_config(dataset: Any, network: Any = None, *, jobs_dir=None, **options: Any) -> VolumeConfig:
    """The settings a volume run of these options would use, resolved as :func:`train_volume` resolves them.

    Nothing is trained or written: every front door (``digits train``, the New Model form, the JSON API,
    :func:`digits_core.train`) ends in this resolution, so the same options give the same run.

    Raises:
        FormValidationError: Bad options.
        TrainingError: Not a volume dataset or not a volume network.
    """
    return _plan(dataset, network, jobs_dir, options)[2]


def train_volume(
    dataset: Any,
    network: Any = None,
    name: str | None = None,
    *,
    jobs_dir=None,
    progress: Callable[[dict], None] | None = None,
    on_job: Callable[[Job], None] | None = None,
    group: str | None = None,
    tracking: str | None = None,
    **options: Any,
) -> Job:
    """Train ``unet3d`` (default) or ``unet2.5d`` on a volume dataset in a new model job (see the module docstring).

    ``tracking`` is an MLflow tracking URI: the run is logged there as a 2-D run is
    (:class:`~digits_core.engine.mlflow_log.RunTracker`: parameters, per-epoch metrics, final metrics, the
    model's files and its SavedModel export).

    Raises:
        FormValidationError: Bad options (no job is created).
        TrainingError: Not a volume network, or training failed (the job ends in Error).
    """
    folder, info, config = _plan(dataset, network, jobs_dir, options)
    start = start_weights(options.get("pretrained"), jobs_dir)
    network = config.network
    fields: dict[str, Any] = dict(
        dataset_id=info["id"],
        network=network,
        task="volume-segmentation",
        form_data={k: v for k, v in options.items() if isinstance(v, (int, float, str, dict))},
    )
    if group:
        fields["group"] = group
    job = create_model_record(name or f"{network}-{info['id']}", jobs_dir=jobs_dir, hold=True, **fields)
    if on_job is not None:
        on_job(job)
    return _run(job, folder, info, config, progress, tracking, start)


def train_volume_into(
    job: Job, dataset: Any, network: Any = None, *, progress=None, tracking: str | None = None, **options: Any
) -> Job:
    """:func:`train_volume` into a model job created beforehand (the web UI's queued jobs)."""
    folder, info, config = _plan(dataset, network, job.path.parent, options)
    start = start_weights(options.get("pretrained"), job.path.parent)
    job.update(dataset_id=info["id"], network=config.network, task="volume-segmentation")
    return _run(job, folder, info, config, progress, tracking, start)


def _tracker(job: Job, info: dict, config: VolumeConfig, uri: str | None) -> Any:
    """The run's MLflow tracker (``None`` untracked): the parameters are its HParams values (:func:`volume_record`)."""
    if not uri:
        return None
    from .mlflow_log import RunTracker  # the tracking module (mlflow itself loads only in it) when a run is tracked

    options = {**dict(job.data.get("form_data") or {}), **{f"volume_{k}": v for k, v in asdict(config).items()}}
    return RunTracker(uri, job, hparam_values(options, network=config.network, dataset=info["id"]))


def start_weights(pretrained: Any, jobs_dir=None) -> Path | None:
    """The ``.keras`` file a volume run's ``pretrained`` option names (a volume model job, or the file); ``None``.

    Raises:
        FormValidationError: On field ``pretrained``: not a volume model job nor a ``.keras`` file.
    """
    if pretrained in (None, ""):
        return None
    from ..paths import check_server_path  # the one path gate for a file named in a request

    text = str(pretrained)
    if text.endswith(".keras"):
        path = check_server_path(text, "pretrained", form_name="training options")
        if path.is_file():
            return path
        raise FormValidationError({"pretrained": [f"{text} is not a file"]}, "training options")
    try:
        model = jobio.model_folder(text, jobs_dir)
        info = dict(read_model_info(model))
    except Exception:  # noqa: BLE001 - not a job, or not trained yet: named below
        info, model = {}, Path(text)
    if info.get("kind") != "volume" or not (model / str(info.get("model_file") or "model.keras")).is_file():
        raise FormValidationError(
            {"pretrained": [f"{text} is not a trained volume model (unet3d / unet2.5d) nor a .keras file"]},
            "training options",
        )
    return model / str(info.get("model_file") or "model.keras")


def _run(
    job: Job,
    folder: Path,
    info: dict,
    config: VolumeConfig,
    progress,
    tracking: str | None = None,
    start: Path | None = None,
) -> Job:
    job.set_status(JobStatus.RUNNING)
    from .volume_loop import VolumeRun  # the run's loop (Keras inside) only once the job exists

    tracker = _tracker(job, info, config, tracking)
    run = VolumeRun(job.path, folder, info, config, progress, tracker, start=start)
    try:
        status = run.run()
    except Exception as exc:  # noqa: BLE001 - any failure ends the job in Error
        error = (
            exc
            if isinstance(exc, TrainingError)
            else TrainingError(f"Volume training failed: {type(exc).__name__}: {exc}")
        )
        job.finish(JobStatus.ERROR, error=str(error))
        if tracker is not None:
            tracker.finish(JobStatus.ERROR.value, {})
        raise error from exc
    record = volume_record(job.path, dict(read_model_info(job.path)), dict(job.data.get("form_data") or {}))
    write_run_hparams(job.path, record, job.id)
    job.finish(status, error="Aborted: the abort file was written" if status is JobStatus.ABORTED else None)
    if tracker is not None:  # once the job's final status is known: the export reads a finished job
        tracker.finish(status.value, final_values(record["final_metrics"]))
    return job
