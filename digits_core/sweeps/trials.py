"""The Ray Tune side of :mod:`digits_core.sweeps.tune`: the trial function, its reporter and the pruning scheduler.

Every trial runs :func:`digits_core.engine.train` in a Ray worker with a
Keras callback (:func:`_reporter`) that reports the validation metric to
Tune at the end of each epoch. Tune's scheduler never kills a trial's
process (which would leave a half-finished job): :class:`PruningASHA`
keeps ASHA's decisions but, where ASHA says stop, it writes the trial
job's ``prune`` file (rung and reason) and lets the trial go on; the
reporter sees the file as soon as its report returns and stops the run
cooperatively, so the job ends ``Stopped early`` with its last snapshot and
its metrics, like any job its own process ends.

Ray starts once per process (:func:`_start_ray`, :func:`_release_ray`):
sweeps started at the same moment share it, each registered with Tune under
its own name, and Ray stops after the last of them. Without a cluster address
it is always a cluster of this process's own (``address="local"``), never one
a stale ``ray_current_cluster`` record or ``$RAY_ADDRESS`` points at.

Ray and TensorFlow are imported here only, when a sweep runs.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..engine.jobio import PRUNE_FILE
from ..engine.option_specs import SHORT_NAMES
from ..executors.ray_executor import LOCAL_CLUSTER_ENV, RAY_NAMESPACE, connect, import_ray
from ..jobs import write_json_atomic
from ..submit.records import job_owner

logger = logging.getLogger(__name__)


def _trial_name(plan: dict, index: int, values: dict) -> str:
    shown = " ".join(
        f"{SHORT_NAMES.get(k, k)}={v:g}" if isinstance(v, float) else f"{SHORT_NAMES.get(k, k)}={v}"
        for k, v in values.items()
    )
    return f"{plan['name']} #{index + 1} {shown}".strip()


def _reporter(metric: str, folder_of: dict) -> Any:
    """The Keras callback reporting ``metric`` to Tune every epoch and stopping a pruned trial."""
    import keras
    from ray import tune

    from ..errors import TrainingError

    class TuneReporter(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            logs = dict(logs or {})
            if metric not in logs:
                known = ", ".join(sorted(k for k in logs if k.startswith("val_")))
                raise TrainingError(
                    f'The sweep\'s metric "{metric}" is not logged by this run; its validation '
                    f"metrics are {known or 'none'}"
                )
            report = {k: float(v) for k, v in logs.items() if isinstance(v, (int, float))}
            report.update(epoch=epoch + 1, job_id=folder_of["id"], job_path=folder_of["path"])
            tune.report(report)
            if (Path(folder_of["path"]) / PRUNE_FILE).is_file():
                self.model.stop_training = True  # the scheduler cut it at this rung: Stopped early

    return TuneReporter()


def run_trial(config: dict, plan: dict) -> None:
    """One trial (a Ray Tune function trainable): train trial ``config["trial"]`` of ``plan`` as a model job."""
    from ..engine.trainer import train
    from ..errors import DigitsError

    index = int(config["trial"])
    folder = Path(plan["folder"])
    if (folder / "abort").exists():
        return  # the sweep was aborted before this trial started
    values = dict(plan["trials"][index])
    network = values.pop("network", plan["network"])
    job_info: dict = {}

    def started(job) -> None:
        import ray

        context = ray.get_runtime_context()
        placement = {
            "executor": "ray-tune",
            "node_id": context.get_node_id(),
            "node_address": ray.util.get_node_ip_address(),
            "sweep": plan["id"],
            "trial": index,
        }
        job.update(placement=placement)
        job_info.update(id=job.id, path=str(job.path))
        write_json_atomic(
            folder / f"trial-{index}.json",
            {"index": index, "job_id": job.id, "values": plan["trials"][index], "node_id": placement["node_id"]},
        )

    reporter = _reporter(plan["settings"]["metric"], job_info)
    owner = job_owner.set(plan.get("owned_by"))  # the sweep's owner owns its trials (this is a Ray worker)
    try:
        earlier = _resumable_job(folder, index, plan["jobs_dir"])
        if earlier is not None:  # a resumed sweep: the trial's aborted job continues from its last snapshot
            from ..engine.trainer import resume_training

            job_info.update(id=earlier.id, path=str(earlier.path))
            (earlier.path / PRUNE_FILE).unlink(missing_ok=True)
            resume_training(earlier, jobs_dir=plan["jobs_dir"], callbacks=[reporter])
            return
        train(
            plan["dataset"],
            network,
            _trial_name(plan, index, plan["trials"][index]),
            jobs_dir=plan["jobs_dir"],
            group=plan["group"],
            sweep=dict(plan["trials"][index]),
            on_job=started,
            callbacks=[reporter],
            **{**plan["options"], **values},
        )
    except DigitsError as exc:  # the job ended in Error: the sweep goes on with the other trials
        logger.warning("trial %s failed: %s", index, exc)
    finally:
        job_owner.reset(owner)  # a reused worker process runs other sweeps' trials


def _resumable_job(folder: Path, index: int, jobs_dir: str) -> Any:
    """The trial's earlier job when it was Aborted (or failed) after a snapshot, else ``None``."""
    import json

    from ..engine.jobio import read_model_info
    from ..errors import DigitsError
    from ..jobs import JobStatus, JobStore

    try:
        job = JobStore(jobs_dir).get(json.loads((folder / f"trial-{index}.json").read_text(encoding="utf-8"))["job_id"])
        has_snapshot = bool(read_model_info(job.path).get("snapshots"))
    except (OSError, ValueError, KeyError, DigitsError):
        return None
    return job if has_snapshot and job.status in (JobStatus.ABORTED, JobStatus.ERROR) else None


def pruning_asha(settings: dict) -> Any:
    """Ray Tune's ``ASHAScheduler`` whose stop decisions prune through the trial's ``prune`` file."""
    from ray.tune.schedulers import ASHAScheduler, TrialScheduler

    class PruningASHA(ASHAScheduler):
        def on_trial_result(self, tune_controller, trial, result):
            epoch = result.get(self._time_attr)
            if epoch is None or self._metric not in result or epoch >= self._max_t:
                return TrialScheduler.CONTINUE  # the last epoch ends the trial itself (Done)
            bracket = self._trial_info[trial.trial_id]
            rung, cutoff = _rung_and_cutoff(bracket, trial.trial_id, epoch)
            action = super().on_trial_result(tune_controller, trial, result)
            if action == TrialScheduler.STOP and result.get("job_path"):
                value = result[self._metric]
                reason = (
                    f"{self._metric} {value:.4g} at epoch {epoch:g} is below the best 1/{self._reduction_factor:g} "
                    f"of the trials that reached this rung (cutoff {self._metric_op * cutoff:.4g})"
                )
                write_json_atomic(
                    Path(result["job_path"]) / PRUNE_FILE,
                    {
                        "rung": rung,
                        "reason": reason,
                        "metric": self._metric,
                        "value": value,
                        "cutoff": float(self._metric_op * cutoff),
                    },
                )
            return TrialScheduler.CONTINUE

    return PruningASHA(
        time_attr="epoch",
        max_t=settings["max_epochs"],
        grace_period=settings["grace_period"],
        reduction_factor=settings["reduction_factor"],
    )


def _rung_and_cutoff(bracket: Any, trial_id: str, epoch: float) -> tuple[int | None, float]:
    """The rung (epoch milestone) this result is judged at and the cutoff before it is recorded."""
    for milestone, recorded in bracket._rungs:  # noqa: SLF001 - ASHA keeps its rungs there (descending)
        if epoch >= milestone and trial_id not in recorded:
            cutoff = bracket.cutoff(recorded)
            return int(milestone), float("nan") if cutoff is None else float(cutoff)
    return None, float("nan")


#: Guards Ray's start and stop in this process: sweeps run side by side in threads of one driver.
_RAY_LOCK = threading.Lock()
#: Sweeps of this process using Ray now, and whether this process started the Ray it uses.
_ray_users = {"count": 0, "owned": False}


def _start_ray(address: str | None) -> bool:
    """Join the cluster at ``address``, or start Ray on this machine; once per process, however many sweeps.

    Every call is one more user of this process's Ray (:func:`_release_ray` ends it): two sweeps started at
    the same moment share one ``ray.init``, and the first to finish does not shut Ray down under the other.
    Without ``address`` Ray starts its own cluster (``address="local"``): a cluster record left in Ray's
    temp folder by an earlier ``ray start`` (``ray_current_cluster``, still there after that cluster died)
    or ``$RAY_ADDRESS`` is never joined unless asked for.

    Returns:
        True when this call started Ray.

    Raises:
        ConfigurationError: No Ray cluster answers at ``address`` (named, within seconds).
    """
    with _RAY_LOCK:
        started = _on_ray_thread(lambda: _join_or_start(address))
        _ray_users["count"] += 1
        _ray_users["owned"] = _ray_users["owned"] or started
        return started


def _join_or_start(address: str | None) -> bool:
    if address:
        connect(address)
        return False
    ray = _local_ray()
    if ray.is_initialized():
        return False
    ray.init(
        address="local",
        namespace=RAY_NAMESPACE,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
        logging_level=logging.WARNING,
        configure_logging=False,
    )
    return True


#: The one thread that starts Ray when a sweep runs outside the main thread (see :func:`_on_ray_thread`).
_ray_thread: list[ThreadPoolExecutor] = []


def _on_ray_thread(call: Callable[[], bool]) -> bool:
    """Run ``call`` (which may start Ray) on a thread that lives as long as this process.

    Ray starts its GCS server with ``PR_SET_PDEATHSIG``: the kernel kills it when the *thread* that
    started it ends, not the process. A sweep's thread ends with its sweep; had it started Ray, the
    GCS of every sweep still running beside it died with it, and 60 s later Ray ended the whole
    process (the server, or the test run) with status 1. The main thread lasts as long as the
    process, so it starts Ray itself (and keeps Ray's SIGTERM handling, as a script expects).
    """
    if threading.current_thread() is threading.main_thread():
        return call()
    if not _ray_thread:
        _ray_thread.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="digits-ray-owner"))
    return _ray_thread[0].submit(call).result()


def _release_ray() -> None:
    """One user of this process's Ray is done; the last one shuts down a Ray this process started."""
    with _RAY_LOCK:
        _ray_users["count"] = max(0, _ray_users["count"] - 1)
        if _ray_users["count"] == 0 and _ray_users["owned"]:
            _ray_users["owned"] = False
            import_ray().shutdown()


def _local_ray() -> Any:
    """The ``ray`` module, with the environment of a one-machine cluster set before its first import."""
    os.environ.setdefault(LOCAL_CLUSTER_ENV, "0")  # a one-machine cluster: every Ray server on 127.0.0.1
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # no progress tables on the console: digits tune prints its own
    # A new local cluster would otherwise turn on Ray's token auth and write ~/.ray/auth_token, which every later
    # `ray start` on this machine then picks up; this one is reachable on 127.0.0.1 only (RAY_AUTH_MODE=token opts in).
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    return import_ray()


def run_sweep(plan: dict) -> None:
    """Run every trial of ``plan`` (from :func:`digits_core.sweeps.tune.plan_sweep`) on Ray Tune; blocks until done."""
    _start_ray(plan.get("ray_address"))
    try:
        _fit(plan)
    finally:
        _release_ray()


def _fit(plan: dict) -> None:
    from ray import tune
    from ray.tune.schedulers import FIFOScheduler

    settings = plan["settings"]
    scheduler = pruning_asha(settings) if settings["scheduler"] == "asha" else FIFOScheduler()
    trainable_name = f"digits-sweep-{plan['id']}"
    # Tune's registries are process globals, not thread-safe: sweeps side by side register one at a time, and each
    # under its own name (under the function's name, the second sweep's plan would replace the first's).
    with _RAY_LOCK:
        trainable = tune.with_resources(tune.with_parameters(run_trial, plan=plan), {"cpu": 1})
        tune.register_trainable(trainable_name, trainable)
    tuner = tune.Tuner(
        trainable_name,
        param_space={"trial": tune.grid_search(list(plan.get("run_trials") or range(len(plan["trials"]))))},
        tune_config=tune.TuneConfig(
            metric=settings["metric"],
            mode=settings["mode"],
            scheduler=scheduler,
            max_concurrent_trials=settings["max_concurrent"],
            num_samples=1,
        ),
        run_config=tune.RunConfig(
            name=plan.get("tune_name", "tune"), storage_path=str(Path(plan["folder"]).resolve()), verbose=0
        ),
    )
    tuner.fit()
