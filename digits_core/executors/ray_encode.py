"""A dataset job's encoding fanned out to a Ray cluster: each chunk of entries is one Ray task.

Under the Ray executor (the dataset job's own Ray task) and with
``digits dataset create --ray-address``, a dataset job runs as always: it
itemizes the entries in its own process, cuts each stage into chunks and
commits the records to LMDB in order (:mod:`digits_core.datasets.stage`). Only
the pool that encodes the chunks changes: :class:`RayPool` instead of the local
worker processes. Each chunk becomes a Ray task (1 CPU) that

* loads the data plugin by id on its node (a clear error names the plugin and
  node when it is not installed there: plugins must be installed on every node);
* takes the job's plugin instance, as it was after itemizing, shipped once
  through Ray's object store (as the local ``forkserver`` pool pickles it) and
  kept by the Ray worker for the job's next chunks;
* runs the same :func:`~digits_core.datasets.encoder.encode_chunk` as a local
  worker and returns the packed records with its node id.

Chunks are dealt to the nodes in turn, each node as often as it has CPUs
(:func:`node_cycle`; soft node affinity: a chunk whose node is gone runs
elsewhere). Ray's own ``SPREAD`` strategy does not do that for short tasks: a
worker that finishes its task takes the next queued one, and one node's first
worker can encode every chunk before another node's worker has started.

The job's process takes the results in submission order, so the records, the
mean image, the errors report and the ``max_errors`` rule are those of a local
build. At most :attr:`RayPool.window` chunks are in flight (bounded memory);
an error or an abort (``KeyboardInterrupt``) cancels them. Where the chunks
ran is returned by :meth:`RayPool.placement` (kept in ``job.json``,
``placement.encoding``).
"""

from __future__ import annotations

import pickle
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..datasets.encoder import ChunkResult, encode_chunk, set_worker_plugin
from ..errors import DatasetError, DigitsError

#: CPUs one encoding task asks Ray for.
TASK_CPUS = 1
#: Most chunks in flight, whatever the cluster's size (each about ``stage.CHUNK_BYTES`` of records).
MAX_WINDOW = 32

#: This Ray worker's plugin instance: ``(object ref id, plugin)`` of the last job it encoded for.
_worker_plugin: tuple[str, Any] = ("", None)


def _encode_task(
    plugin_id: str, plugin_box: list, roots: tuple | None, start: int, entries: list, mean_every: int
) -> bytes:
    """The body of one encoding task, on the node Ray chose: ``(node id, ChunkResult)``, pickled.

    ``roots``: the job's data roots (:func:`~digits_core.paths.confined_to`), as in the job's process.
    """
    global _worker_plugin
    import ray

    from ..paths import confined_to

    node = ray.get_runtime_context().get_node_id()
    ref = plugin_box[0]  # boxed: Ray resolves a bare ref before this runs, i.e. before the check below
    if _worker_plugin[0] != ref.hex():
        from ..plugins.registry import registry

        try:
            registry.get_data_ingestion(plugin_id)
        except DigitsError as exc:
            raise DatasetError(
                f'Data plugin "{plugin_id}" cannot be loaded on Ray node {node} '
                f"({ray.util.get_node_ip_address()}): {exc} Install the same plugins on every "
                "node of the cluster."
            ) from None
        _worker_plugin = (ref.hex(), ray.get(ref))
    set_worker_plugin(_worker_plugin[1])
    try:
        with confined_to(roots):
            result = encode_chunk(start, entries, mean_every)
    finally:
        set_worker_plugin(None)
    # Pickled here, unpickled by the job: Ray's zero-copy numpy arrays would arrive read-only, and the job adds
    # mean sums and histograms into the first ones it gets, as it does with a local worker's results.
    return pickle.dumps((node, result), protocol=pickle.HIGHEST_PROTOCOL)


class RayPool:
    """Encodes chunks as Ray tasks and yields the results in order (the interface of the local pools).

    Args:
        ray: The ``ray`` module, connected to the cluster (see
            :func:`~digits_core.executors.ray_executor.connect`).
        plugin: The job's data plugin instance (after itemizing).
        plugin_id: Its id: each task loads it on its node.
        window: Chunks in flight at once (default: twice the cluster's CPUs, so every CPU stays busy while
            results wait to be written; 2 to :data:`MAX_WINDOW`).
    """

    def __init__(self, ray: Any, plugin, plugin_id: str, *, window: int | None = None):
        self._ray = ray
        self.plugin_id = plugin_id
        #: The cluster's CPUs (the "workers" a dataset built this way records).
        self.cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.window = window or max(2, min(MAX_WINDOW, 2 * self.cpus))
        try:
            self._plugin_ref = ray.put(plugin)
        except Exception as exc:  # noqa: BLE001 - pickling runs the plugin's own code
            raise DatasetError(
                f'Plugin "{plugin_id}": its instance cannot be sent to the Ray cluster '
                f"({type(exc).__name__}: {exc}); a plugin encoded on Ray must be picklable, "
                "as for local worker processes under TensorFlow."
            ) from exc
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        remote = ray.remote(_encode_task)
        options = {"num_cpus": TASK_CPUS, "max_retries": 0, "name": f"digits-encode-{plugin_id}"}
        nodes = node_cycle(ray)
        tasks = {
            node: remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=True), **options)
            for node in set(nodes)
        }
        self._tasks = [tasks[node] for node in nodes] or [remote.options(**options)]
        self._in_flight: deque = deque()
        self.nodes: Counter = Counter()

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.cancel()
        self._in_flight.clear()
        self._plugin_ref = None

    def cancel(self) -> None:
        """Stop every chunk still in flight (on errors and aborts)."""
        for _start, _count, ref in self._in_flight:
            try:
                self._ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - a task that just finished cannot be cancelled; nothing to do
                pass

    def release(self, result: ChunkResult) -> None:
        """Nothing to give back: the records came back as bytes."""

    def placement(self) -> dict:
        """Where the chunks ran: ``{"executor": "ray", "tasks": N, "nodes": {node id: chunks}}``."""
        return {"executor": "ray", "tasks": sum(self.nodes.values()), "nodes": dict(self.nodes)}

    def imap(self, chunks: Iterable[tuple], mean_every: int, describe: Callable[[int], str]) -> Iterator:
        """Yield ``(start, ChunkResult)`` for each ``(start, entries)`` chunk, in order.

        ``chunks`` is pulled lazily (one chunk after each result), as by the local pool.

        Raises:
            DatasetError: A task failed (its node or worker died, or the plugin is missing on its node).
        """
        from ..paths import current_roots

        ray = self._ray
        chunks = iter(chunks)
        box, roots = [self._plugin_ref], current_roots()
        turn = iter(range(1 << 62))

        def submit() -> None:
            chunk = next(chunks, None)
            if chunk is not None:
                start, entries = chunk
                task = self._tasks[next(turn) % len(self._tasks)]
                self._in_flight.append(
                    (start, len(entries), task.remote(self.plugin_id, box, roots, start, entries, mean_every))
                )

        for _ in range(self.window):
            submit()
        while self._in_flight:
            start, count, ref = self._in_flight[0]
            try:
                node, result = pickle.loads(ray.get(ref))
            except ray.exceptions.RayTaskError as exc:
                cause = getattr(exc, "cause", None)
                if isinstance(cause, DigitsError):
                    raise cause from None
                raise DatasetError(self._failure(exc, start, count, describe)) from exc
            except ray.exceptions.RayError as exc:
                raise DatasetError(self._failure(exc, start, count, describe)) from exc
            self._in_flight.popleft()
            self.nodes[node] += 1
            yield start, result
            submit()

    def _failure(self, exc: BaseException, start: int, count: int, describe: Callable[[int], str]) -> str:
        first = (str(exc).strip().splitlines() or [""])[0]
        return (
            f"A Ray task encoding entries {describe(start)} to {describe(start + count - 1)} with plugin "
            f'"{self.plugin_id}" failed ({type(exc).__name__}: {first}): its node or worker process died. '
            "Remove or fix those entries if one crashes the plugin, or check the cluster."
        )


def node_cycle(ray: Any) -> list[str]:
    """The node ids consecutive chunks go to: every alive node with CPUs, as often as it has CPUs, interleaved.

    Two nodes of 2 and 1 CPUs give ``[a, b, a]``.
    """
    cpus = {
        n["NodeID"]: int(float(n.get("Resources", {}).get("CPU", 0)) // TASK_CPUS)
        for n in ray.nodes()
        if n.get("Alive")
    }
    left = {node: count for node, count in sorted(cpus.items()) if count > 0}
    cycle: list[str] = []
    while left:
        for node in list(left):
            cycle.append(node)
            left[node] -= 1
            if not left[node]:
                del left[node]
    return cycle


def ray_for_dataset_job(address: str | None) -> Any:
    """The ``ray`` module to encode a dataset job's chunks with, or ``None`` to encode locally.

    Args:
        address: A Ray cluster (``HOST:PORT``) this process connects to as a
            driver, or ``"current"``: the cluster this process is already part
            of (the Ray executor's job task). ``None``: local encoding.

    Raises:
        ConfigurationError: Ray is missing or no cluster answers at ``address``.
    """
    if address is None:
        return None
    from .ray_executor import connect, import_ray

    if address == CURRENT_CLUSTER:
        ray = import_ray()
        if ray.is_initialized():
            return ray
        from ..errors import ConfigurationError

        raise ConfigurationError(
            "Encoding on the current Ray cluster needs a process that runs on one "
            "(the Ray executor's job task); give a cluster address instead."
        )
    return connect(address)


#: ``ray_address`` of a dataset job that runs inside a Ray task: encode on that task's cluster.
CURRENT_CLUSTER = "current"

__all__ = ["CURRENT_CLUSTER", "MAX_WINDOW", "RayPool", "TASK_CPUS", "node_cycle", "ray_for_dataset_job"]
