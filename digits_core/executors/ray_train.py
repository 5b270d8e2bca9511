"""Multi-worker training on a Ray cluster through Ray Train (``digits train --workers N``).

Ray Train's :class:`~ray.train.tensorflow.TensorflowTrainer` starts ``N``
worker processes on the cluster (one CPU each, or one GPU each with
``use_gpu``) and writes each one's ``TF_CONFIG``; every worker then runs the
engine's ordinary :func:`digits_core.engine.train`, which sees ``TF_CONFIG``
and trains with ``MultiWorkerMirroredStrategy`` exactly as the hand-written
multi-machine setup does (docs/scaling-out.md): each worker reads its
shard of every epoch, the batch size is global, only the chief (worker 0)
writes the model job (metrics live, snapshots, ``model.json``), and
``digits model abort ID`` on the chief's job stops every worker after the
same step (status Aborted; ``digits train --resume ID`` continues it on one
machine).

Every node must see the dataset and the jobs folder at the same paths (a
shared filesystem) and have the same Python environment
(``pip install "digits-core[ray]"``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..config import resolve_jobs_dir
from ..errors import ConfigurationError, TrainingError
from ..jobs import Job, JobStore
from .ray_executor import connect

#: File in the run's shared folder where the chief worker names the model job it wrote.
CHIEF_JOB_FILE = "chief-job-id"


def _train_worker(config: dict) -> None:
    """One Ray Train worker: the engine's ``train`` with the ``TF_CONFIG`` Ray Train wrote."""
    import ray.train

    # Ray Train asks for legacy tf.keras (Keras 2); the engine is Keras 3.
    os.environ.pop("TF_USE_LEGACY_KERAS", None)
    os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
    from ..engine import train
    from ..tf_quiet import quiet_tensorflow_startup

    quiet_tensorflow_startup()
    job = train(
        config["dataset"], config["network"], name=config["name"], jobs_dir=config["jobs_dir"], **config["options"]
    )
    if (job.path / "model.json").is_file():  # the chief: tell the driver which job it wrote
        Path(config["storage"], CHIEF_JOB_FILE).write_text(job.id, encoding="utf-8")
    ray.train.report({"status": job.status.value})


def train_on_ray(
    dataset: str,
    network: Any = None,
    *,
    workers: int,
    address: str,
    name: str | None = None,
    jobs_dir: Any = None,
    use_gpu: bool = False,
    **options: Any,
) -> Job:
    """Train one model with ``workers`` Ray Train workers on the cluster at ``address``; return the chief's job.

    Args:
        dataset: The dataset job id (its folder must be at the same path on every node).
        network: As for :func:`digits_core.engine.train` (a name, or a ``.py`` file every node can read).
        workers: Worker processes (``MultiWorkerMirroredStrategy`` replicas), at least 2.
        address: The Ray cluster (``HOST:PORT``).
        name: The model job's name.
        jobs_dir: The jobs folder (same path on every node).
        use_gpu: One GPU per worker instead of one CPU.
        **options: Training options, as for :func:`digits_core.engine.train` (``batch_size`` is global).

    Raises:
        JobNotFoundError: No dataset job ``dataset``.
        ConfigurationError: Ray is missing, no cluster answers, or ``workers`` < 2.
        TrainingError: The run failed on the cluster (the message has Ray's reason).
    """
    if int(workers) < 2:
        raise ConfigurationError(f"--workers {workers}: Ray Train needs at least 2 workers (1 trains locally).")
    if not isinstance(network, (str, type(None))):
        raise ConfigurationError("On Ray, --network must be a name or a .py file every node can read.")
    root = resolve_jobs_dir(jobs_dir)
    dataset = JobStore(root).get(dataset, kind="dataset").id  # a bad id fails here, not on every worker
    ray = connect(address)
    from ray.train import RunConfig, ScalingConfig
    from ray.train.tensorflow import TensorflowTrainer

    storage = Path(tempfile.mkdtemp(prefix=".ray-train-", dir=root))  # Ray Train's run folder, on the shared fs
    config = {
        "dataset": dataset,
        "network": network,
        "name": name,
        "jobs_dir": str(root),
        "options": options,
        "storage": str(storage),
    }
    trainer = TensorflowTrainer(
        _train_worker,
        train_loop_config=config,
        scaling_config=ScalingConfig(
            num_workers=int(workers), use_gpu=use_gpu, resources_per_worker={"GPU": 1} if use_gpu else {"CPU": 1}
        ),
        run_config=RunConfig(name="digits-train", storage_path=str(storage)),
    )
    try:
        trainer.fit()
        chief = storage / CHIEF_JOB_FILE
        job_id = chief.read_text(encoding="utf-8").strip() if chief.is_file() else ""
    except ray.exceptions.RayError as exc:
        raise TrainingError(f"Ray Train on {address} failed: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - Ray Train wraps worker errors in its own classes
        raise TrainingError(f"Ray Train on {address} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        shutil.rmtree(storage, ignore_errors=True)
    if not job_id:
        raise TrainingError(f"Ray Train on {address} ended without a model job from its chief worker.")
    return Job.load(root / job_id)


__all__ = ["train_on_ray"]
