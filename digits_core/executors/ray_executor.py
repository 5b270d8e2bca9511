"""The Ray executor: each job runs as a Ray task on a Ray cluster.

``digits serve --executor ray --ray-address HOST:PORT`` (or
``$DIGITS_RAY_ADDRESS``) connects the server to a running Ray cluster as a
driver and queues every job there, as one task with the job's resource
request:

* a dataset job asks for 1 CPU (it itemizes and commits records to LMDB); its chunks of
  entries are encoded by Ray tasks of 1 CPU each, spread over the nodes
  (:mod:`~digits_core.executors.ray_encode`);
* a training job asks for 1 CPU and its ``gpus`` option as a GPU count
  (``"all"``: the largest node's GPUs; explicit ids ``0,2`` count as 2, since
  Ray, not DIGITS, picks the devices on the node).

Ray holds a task until some node has those resources free, so the web UI
queues across machines. The task runs in a fresh Ray worker process
(``max_calls=1``: nothing a job imports, TensorFlow included, outlives it)
through the same worker code as the local executor
(:func:`digits_core.executors.worker.run_job`): it takes the job's OS lock,
writes ``worker.log``, live metrics and snapshots into the job folder, and
records where it ran (``placement``: Ray node id, address, GPU ids).

Every node must therefore see the jobs folder and the datasets at the same
paths (a shared filesystem such as NFS; dataset *sources* may also be S3
URLs, which every node reads itself) and have the same Python environment
(``pip install "digits-core[ray]"`` plus the plugins).

Abort: a training job is asked to stop at its next step (its abort file;
snapshots kept) and its task is cancelled after the grace period; a dataset
job's task is cancelled at once (``KeyboardInterrupt`` in the task, then a
forced stop). A job whose node or worker process dies ends in Error, with a
message naming the Ray failure; a model job can then be resumed from its
last snapshot, on any node.

Ray is imported only here, only when this executor is chosen.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from typing import Any

from ..errors import ConfigurationError
from ..gpus import GpuRequestError, detect_gpus, parse_request, worker_env
from ..jobs import Job
from .queue import JobQueue
from .worker import WORKER_LOG

logger = logging.getLogger(__name__)

#: The Ray namespace DIGITS's drivers and tasks use.
RAY_NAMESPACE = "digits"
#: Ray's switch for a one-machine cluster ("0"): node address 127.0.0.1, every Ray server bound to it.
LOCAL_CLUSTER_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}


def import_ray() -> Any:
    """Import Ray, or explain how to install it.

    Raises:
        ConfigurationError: Ray is not installed.
    """
    try:
        import ray
    except ImportError as exc:
        raise ConfigurationError(
            'The Ray executor needs Ray: pip install "digits-core[ray]" (on every node of the '
            "cluster, with the same plugins)."
        ) from exc
    return ray


def connect(address: str) -> Any:
    """Connect this process to the Ray cluster at ``address`` as a driver (once); return the ``ray`` module.

    Raises:
        ConfigurationError: Ray is missing or no cluster answers at ``address``.
    """
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    try:
        problem = _gcs_problem(host, int(port))
    except (OSError, ValueError) as exc:
        problem = str(exc)
    if problem:
        raise ConfigurationError(
            f"No Ray cluster answers at {address} ({problem}). Start one with `ray start --head` "
            "(see docs/scaling-out.md) or correct --ray-address (HOST:PORT)."
        )
    if host in LOOPBACK_HOSTS and "ray" not in sys.modules:
        # A loopback address is a one-machine cluster: without this, Ray swaps 127.0.0.1 for the machine's
        # network address (and would not find a cluster that listens on loopback only).
        os.environ.setdefault(LOCAL_CLUSTER_ENV, "0")
    ray = import_ray()
    if not ray.is_initialized():
        try:
            ray.init(
                address=address,
                namespace=RAY_NAMESPACE,
                log_to_driver=False,
                logging_level=logging.WARNING,
                configure_logging=False,
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigurationError(
                f"No Ray cluster answers at {address}: {exc}. Start one with `ray start "
                "--head` (see docs/scaling-out.md) or correct --ray-address."
            ) from exc
    return ray


#: What an HTTP/2 client sends first; a gRPC server (Ray's GCS is one) answers with its SETTINGS frame.
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#: Seconds the cluster's GCS has to answer the probe.
GCS_PROBE_TIMEOUT_S = 10.0


def _gcs_problem(host: str, port: int) -> str | None:
    """Why no Ray GCS answers at ``host:port`` (``None``: a gRPC server answered there).

    ``ray.init`` retries a silent or foreign listener for good ("Failed to connect to GCS"): this
    probe fails within :data:`GCS_PROBE_TIMEOUT_S` instead.
    """
    with socket.create_connection((host, port), timeout=GCS_PROBE_TIMEOUT_S) as sock:
        if os.environ.get("RAY_USE_TLS", "").lower() in ("1", "true"):
            return None  # a TLS cluster answers a handshake, not a plain preface: the connection is all we check
        sock.sendall(_HTTP2_PREFACE)
        header = b""
        while len(header) < 9:  # the first frame's header: length (3), type (1), flags (1), stream (4)
            try:
                chunk = sock.recv(9 - len(header))
            except TimeoutError:
                return f"nothing answered within {GCS_PROBE_TIMEOUT_S:g} s"
            if not chunk:
                return "the connection was closed without an answer"
            header += chunk
    return None if header[3] == 4 else "something listens there, but not a Ray cluster's GCS (gRPC)"


def _run_job_task(job_path: str, secrets: dict[str, str]) -> int:
    """The body of a job's Ray task, on the node Ray chose: run the job here, logging to ``worker.log``."""
    import ray

    from .worker import run_job

    with open(os.path.join(job_path, WORKER_LOG), "ab", buffering=0) as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    context = ray.get_runtime_context()
    gpu_ids = [str(g) for g in context.get_accelerator_ids().get("GPU", [])]
    os.environ.update({"PYTHONUNBUFFERED": "1", **secrets, **worker_env(gpu_ids, bool(gpu_ids or detect_gpus()))})
    placement = {
        "executor": "ray",
        "node_id": context.get_node_id(),
        "node_address": ray.util.get_node_ip_address(),
        "gpus": gpu_ids,
    }
    return run_job(job_path, placement=placement, encode_on_ray=True)


class RayWorker:
    """A job's Ray task (a :class:`~digits_core.executors.queue.WorkerHandle`)."""

    def __init__(self, ray: Any, ref: Any, job_id: str):
        self._ray = ray
        self.ref = ref
        self.job_id = job_id
        self.returncode: int | None = None
        self._failure = ""

    def poll(self) -> int | None:
        if self.returncode is None:
            ready, _ = self._ray.wait([self.ref], timeout=0)
            if ready:
                self._collect()
        return self.returncode

    def _collect(self) -> None:
        ray = self._ray
        try:
            self.returncode = int(ray.get(self.ref))
        except ray.exceptions.TaskCancelledError:
            self.returncode = 1
            self._failure = "The job's Ray task was cancelled."
        except ray.exceptions.RayError as exc:
            self.returncode = 1
            first = (str(exc).strip().splitlines() or [""])[0]
            self._failure = (
                f"The Ray task running this job failed ({type(exc).__name__}: {first}); its node or "
                f"worker process died. See {WORKER_LOG} in the job folder; a model job can be resumed "
                "from its last snapshot."
            )

    def stop(self, timeout: float) -> None:
        """Cancel the task (``KeyboardInterrupt`` in it: the job ends Aborted); force it after ``timeout`` s."""
        ray = self._ray
        if self.poll() is not None:
            return
        ray.cancel(self.ref, force=False)
        ready, _ = ray.wait([self.ref], timeout=timeout)
        if not ready:
            ray.cancel(self.ref, force=True)
            ray.wait([self.ref], timeout=5.0)
        self._collect()

    def failure(self) -> str:
        return self._failure or (
            f"The job's Ray task ended (exit status {self.returncode}) without finishing the "
            f"job; see {WORKER_LOG} in the job folder."
        )


class RayScheduler(JobQueue):
    """The Ray executor: jobs queue in the jobs folder and run as Ray tasks (see the module docstring).

    Args:
        jobs_dir: The jobs folder, at the same path on every node.
        address: The Ray cluster (``HOST:PORT`` of the head's GCS, as ``ray start --head`` prints).
        max_dataset_jobs: Dataset jobs handed to Ray at once (Ray queues them further by resources).
        max_training_jobs: Training jobs handed to Ray at once (``None``: the cluster's CPUs).
        poll_interval: Seconds between two looks at the queue and tasks.
    """

    executor = "ray"

    def __init__(
        self,
        jobs_dir=None,
        *,
        address: str,
        max_dataset_jobs: int = 2,
        max_training_jobs: int | None = None,
        poll_interval: float = 0.5,
    ):
        self.ray = connect(address)
        self.address = address
        super().__init__(
            jobs_dir,
            max_dataset_jobs=max_dataset_jobs,
            max_training_jobs=max_training_jobs or int(self._largest("CPU", total=True)) or 1,
            poll_interval=poll_interval,
            gpu_devices=[],
        )
        self._task = self.ray.remote(max_calls=1, max_retries=0)(_run_job_task)

    def _largest(self, resource: str, *, total: bool = False) -> float:
        """The most of ``resource`` one alive node offers (or, with ``total``, the whole cluster)."""
        values = [float(n.get("Resources", {}).get(resource, 0)) for n in self.ray.nodes() if n.get("Alive")]
        return (sum(values) if total else max(values)) if values else 0.0

    def _gpu_count(self, job: Job) -> int:
        request = parse_request(dict(job.data.get("train_options") or {}).get("gpus"))
        if request is None:
            return 0
        largest = int(self._largest("GPU"))
        count = largest if request == "all" else len(request) if isinstance(request, list) else int(request)
        if count > largest:
            raise GpuRequestError(
                f"gpus: {count} GPU(s) requested, but no node of the Ray cluster at "
                f"{self.address} has more than {largest}."
            )
        return count

    def _allocate_gpus(self, job: Job) -> list[str] | None:
        self._gpu_count(job)  # an impossible request ends the job in Error now, not as a task Ray never places
        return []  # Ray picks the devices on the node; the task records them in "placement"

    def _start_worker(self, job: Job, gpu_ids: list[str]) -> RayWorker:
        from ..form_secrets import child_env  # the job's PasswordField values, never written to disk

        if job.kind == "model":  # noqa: SIM108 - kept as two readable steps
            resources = {"num_cpus": 1, "num_gpus": self._gpu_count(job)}
        else:  # itemizing and LMDB commits; the chunks are encoded by Ray tasks of their own (ray_encode)
            resources = {"num_cpus": 1}
        ref = self._task.options(name=f"digits-{job.kind}-{job.id}", **resources).remote(
            str(job.path), dict(child_env(job.id))
        )
        logger.info("Job %s queued on Ray (%s) as task %s", job.id, resources, ref.task_id().hex())
        return RayWorker(self.ray, ref, job.id)

    def status(self) -> dict:
        """The queue (as :meth:`JobQueue.status`) plus the executor and the cluster's resources."""
        info = super().status()
        info["executor"] = {
            "name": "ray",
            "address": self.address,
            "resources": {k: v for k, v in self.ray.cluster_resources().items() if k in ("CPU", "GPU", "memory")},
            "nodes": sum(1 for n in self.ray.nodes() if n.get("Alive")),
        }
        return info


__all__ = ["RAY_NAMESPACE", "RayScheduler", "RayWorker", "connect", "import_ray"]
