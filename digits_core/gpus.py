"""GPUs shared between training jobs, as DIGITS shared them: each job gets its own devices.

The scheduler asks a :class:`GpuAllocator` for a training job's devices before it starts the
job's worker, and starts the worker with ``CUDA_VISIBLE_DEVICES`` set to exactly those devices
(and TensorFlow's memory growth on), so two jobs never share a GPU and neither reserves all GPU
memory. A job that cannot get its devices yet keeps waiting in the queue.

What a job may ask for (the training option ``gpus``):

* nothing (``None``): one GPU when the machine has any (DIGITS's default), else the CPU;
* a count ``N``: any ``N`` free GPUs (the lowest ids first);
* ``"all"``: every GPU of the machine;
* explicit ids ``"0,2"``: exactly those GPUs.

Inside the worker the assigned devices are renumbered from 0 by CUDA, so the engine trains on all of
them and only them (``DIGITS_ASSIGNED_GPUS``, read by :mod:`digits_core.engine.distribute`), never on
the machine's ids.

Importing this module is light (no TensorFlow; ``nvidia-smi`` runs only in :func:`detect_gpus`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Mapping
from typing import Any

from .errors import DigitsError

#: Environment variable through which the scheduler tells a worker which machine GPUs it holds.
ASSIGNED_ENV = "DIGITS_ASSIGNED_GPUS"


class GpuRequestError(DigitsError):
    """A job asks for GPUs this machine does not have (the message says which exist)."""


def detect_gpus(env: Mapping[str, str] | None = None) -> list[str]:
    """The GPU ids jobs may use: ``CUDA_VISIBLE_DEVICES`` when set, else what ``nvidia-smi -L`` lists.

    Returns:
        Device ids as strings (e.g. ``["0", "1"]``); empty on a machine without GPUs.
    """
    env = os.environ if env is None else env
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(l for l in out.splitlines() if l.startswith("GPU "))]


def parse_request(value: Any) -> int | str | list[str] | None:
    """Normalise a ``gpus`` option: ``None``, a count, ``"all"`` or a list of explicit ids.

    Raises:
        GpuRequestError: The value is none of these.
    """
    if value in (None, ""):
        return None
    if isinstance(value, bool):
        raise GpuRequestError(f"gpus: {value!r} is not a count, 'all' or a list of GPU ids")
    if isinstance(value, int):
        if value < 0:
            raise GpuRequestError(f"gpus: {value} is negative")
        return value
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value]
    text = str(value).strip().lower()
    if text == "all":
        return "all"
    if text.isdigit():
        return int(text)
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if not ids or not all(part.isdigit() for part in ids):
        raise GpuRequestError(f"gpus: {value!r} is not a count (2), 'all' or GPU ids (0,2)")
    return ids


class GpuAllocator:
    """Hands each training job its own GPUs and takes them back when it ends (thread-safe).

    Args:
        devices: The machine's GPU ids (see :func:`detect_gpus`).
    """

    def __init__(self, devices: list[str]):
        self.devices = [str(d) for d in devices]
        self._held: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def free(self) -> list[str]:
        """The GPU ids no job holds."""
        with self._lock:
            taken = {d for ids in self._held.values() for d in ids}
            return [d for d in self.devices if d not in taken]

    def holdings(self) -> dict[str, list[str]]:
        """Job id -> the GPU ids it holds."""
        with self._lock:
            return {job: list(ids) for job, ids in self._held.items()}

    def wanted(self, request: Any) -> int | list[str]:
        """How many GPUs (or which ones) a request needs on this machine.

        Raises:
            GpuRequestError: More GPUs, or other ids, than the machine has.
        """
        request = parse_request(request)
        have = ", ".join(self.devices) or "none"
        if request is None:
            return 1 if self.devices else 0
        if request == "all":
            return len(self.devices)
        if isinstance(request, int):
            if request > len(self.devices):
                raise GpuRequestError(f"gpus: {request} requested, this machine has {len(self.devices)} (ids: {have})")
            return request
        unknown = [d for d in request if d not in self.devices]
        if unknown:
            raise GpuRequestError(f"gpus: GPU {', '.join(unknown)} does not exist here (ids: {have})")
        return list(dict.fromkeys(request))

    def try_allocate(self, job_id: str, request: Any) -> list[str] | None:
        """Give ``job_id`` its GPUs if they are free now.

        Returns:
            The GPU ids now held by the job (empty: it runs on the CPU), or ``None`` when it must wait.

        Raises:
            GpuRequestError: The request can never be met on this machine.
        """
        wanted = self.wanted(request)
        with self._lock:
            if job_id in self._held:
                return list(self._held[job_id])
            taken = {d for ids in self._held.values() for d in ids}
            free = [d for d in self.devices if d not in taken]
            if isinstance(wanted, list):
                if any(d in taken for d in wanted):
                    return None
                chosen = wanted
            else:
                if wanted > len(free):
                    return None
                chosen = free[:wanted]
            self._held[job_id] = list(chosen)
            return list(chosen)

    def release(self, job_id: str) -> None:
        """Take back the GPUs of a job that ended (no-op for a job that held none)."""
        with self._lock:
            self._held.pop(job_id, None)


def worker_env(gpu_ids: list[str], machine_has_gpus: bool) -> dict[str, str]:
    """Environment variables for a training worker that holds ``gpu_ids``.

    Always turns on TensorFlow's memory growth. On a GPU machine it also restricts the worker to its
    devices (``CUDA_VISIBLE_DEVICES``; an empty value hides every GPU from a CPU job).
    """
    env = {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    if machine_has_gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpu_ids)
        env[ASSIGNED_ENV] = ",".join(gpu_ids)
    return env


__all__ = ["GpuAllocator", "GpuRequestError", "detect_gpus", "parse_request", "worker_env", "ASSIGNED_ENV"]
