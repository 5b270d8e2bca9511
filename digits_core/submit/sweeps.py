"""Sweeps: check a search request (``POST /api/sweeps``, the New Model form's Search panel) and start it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..errors import FormValidationError
from ..sweeps.space import parse_spaces
from .options import check_request_options, server_setting_errors

if TYPE_CHECKING:
    from ..jobs import JobStore
    from ..sweeps.tune import TuneHandle

#: ``POST /api/sweeps`` keys besides the training ``options`` (the arguments of :func:`digits_core.sweeps.tune.tune`).
SWEEP_KEYS = (
    "dataset",
    "network",
    "name",
    "group",
    "search",
    "scheduler",
    "trials",
    "max_epochs",
    "metric",
    "mode",
    "grace_period",
    "reduction_factor",
    "max_concurrent",
    "search_seed",
)


def start_sweep(body: dict, *, store: JobStore, jobs_dir: str | os.PathLike) -> TuneHandle:
    """Check a sweep request (the ``POST /api/sweeps`` body) and start it; the New Model form's Search panel too.

    Args:
        body: The request: :data:`SWEEP_KEYS` and ``options`` (training options, through the gate of
            :func:`digits_core.submit.options.check_request_options`).
        store: The job store a ``pretrained`` model is looked up in.
        jobs_dir: The jobs folder of the sweep and its trials (the server's, never the request's).

    Returns:
        The sweep's :class:`~digits_core.sweeps.tune.TuneHandle` (the caller keeps it).

    Raises:
        FormValidationError: An unknown key, a bad space, setting or option (nothing is created).
    """
    from ..sweeps.tune import tune  # Ray Tune loads only when a sweep starts

    refused = server_setting_errors(body)
    if refused:
        raise FormValidationError(refused, "new sweep")
    unknown = sorted(set(body) - set(SWEEP_KEYS) - {"options"})
    if unknown:
        raise FormValidationError({key: ["unknown key of a sweep request"] for key in unknown}, "new sweep")
    options = body.get("options") or {}
    if not isinstance(options, dict):
        raise FormValidationError({"options": ["must be a JSON object of training options"]}, "new sweep")
    misplaced = sorted(set(options) & set(SWEEP_KEYS))
    if misplaced:
        raise FormValidationError(
            {key: ["a setting of the sweep, not a training option: give it beside options"] for key in misplaced},
            "new sweep",
        )
    if not body.get("dataset"):
        raise FormValidationError({"dataset": ["give the dataset job id"]}, "new sweep")
    _refuse_network_files(body)
    options = dict(options)
    network = body.get("network") if isinstance(body.get("network"), str) else None
    check_request_options(options, store, "new sweep", network)  # as /api/models
    kwargs = {key: body[key] for key in SWEEP_KEYS if key in body and key not in ("dataset", "network", "name")}
    handle = tune(
        str(body["dataset"]),
        body.get("network") or None,
        body.get("name") or None,
        jobs_dir=jobs_dir,
        **options,
        **kwargs,
    )
    return handle


def _refuse_network_files(body: dict) -> None:
    """A network named by a server-side file is not for web requests (the web form pastes code instead)."""

    names = [body.get("network")]
    search = body.get("search")
    if search:
        space = parse_spaces(search).get("network")
        names += list(space.values) if space else []
    if any(isinstance(n, str) and (n.endswith(".py") or "/" in n or "\\" in n) for n in names):
        raise FormValidationError(
            {"network": ["name a built-in or plugin network; a file on the server is not accepted over the web"]},
            "new sweep",
        )
