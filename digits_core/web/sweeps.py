"""Queue the training jobs of a New Model request: one job, or one per sweep combination, in one group.

The web form and ``POST /api/models`` both call :func:`create_model_jobs`;
it expands the options with :func:`digits_core.sweep.expand_sweep` (the
expansion the CLI and other executors use) and queues each point through
:func:`digits_core.web.models_views.create_model_job`, so every job of a
sweep is validated, saved and scheduled exactly as a single job is.

:func:`check_request_options` is the one check of the training options a web
request carries, whatever its door: the New Model form and ``POST /api/models``
(through :func:`~digits_core.web.models_views.create_model_job`), the Search
panel and ``POST /api/sweeps`` (through
:func:`~digits_core.web.tune_views.start_sweep`). Server settings
(:data:`SERVER_SETTINGS`) are refused there by name: a request never picks the
server's Ray cluster, jobs folder or data roots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import DigitsError, FormValidationError
from ..groups import normalize_group
from ..jobs import Job
from ..outbound import OutboundURLError, check_url
from ..paths import check_form_paths
from ..sweep import expand_sweep, sweep_group

if TYPE_CHECKING:
    from ..jobs import JobStore

#: Settings that belong to whoever runs ``digits serve``, never to a request: the key and the flag that sets it.
SERVER_SETTINGS = {
    "ray_address": "digits serve --ray-address or $DIGITS_RAY_ADDRESS",
    "jobs_dir": "digits serve --jobs-dir or $DIGITS_JOBS_DIR",
    "data_root": "digits serve --data-root",
    "data_roots": "digits serve --data-root",
    "executor": "digits serve --executor",
    "allow_url": "digits serve --allow-url",
    "auth_token": "digits serve --auth-token",
}


#: Keys of the request itself: never accepted among its training options (where they would replace the checked ones).
REQUEST_KEYS = ("dataset", "network", "custom_network", "name", "group")


def server_setting_errors(keys) -> dict[str, list[str]]:
    """A refusal for each of ``keys`` that is a server setting (:data:`SERVER_SETTINGS`), by key."""
    return {
        key: [f"a setting of the server ({SERVER_SETTINGS[key]}), not an option a request can set"]
        for key in keys
        if key in SERVER_SETTINGS
    }


def check_request_options(options: dict, store: JobStore, form: str = "new model", network: str | None = None) -> None:
    """Check the training options of a web request: the one gate of every web door.

    Server settings are refused by name, and so are the request's own keys
    (:data:`REQUEST_KEYS`: a ``network`` among the options would replace the
    checked network with a file on the server); ``pretrained`` must name a model job of
    this server (a file on the server is not accepted over the web: the same
    answer whether or not such a file exists) and becomes that job's full id in
    ``options``; a value anywhere in an option (a JSON object's too) that names
    a server path must lie under the data roots (:func:`digits_core.paths.check_form_paths`)
    and a URL must be one the operator allows (:func:`digits_core.outbound.check_url`);
    then the engine's own validation (kinds, bounds, unknown names; every point of a sweep).

    Args:
        options: Training options as the request gave them (changed in place: ``pretrained``).
        store: The server's job store.
        form: The form named in the error.
        network: The request's network, when it names one: ``weights`` is resolved for it now, as the
            job would (a file under the data roots, a zoo entry or a name the network declares), so a
            bad one is refused before any job exists.

    Raises:
        FormValidationError: Naming every bad option; nothing has been created.
    """
    from .models_views import check_options  # models_views imports this module

    errors = server_setting_errors(options)
    errors.update(
        {
            key: [f"the request's own {key}, not a training option: give it beside options"]
            for key in REQUEST_KEYS
            if key in options
        }
    )
    pretrained = options.get("pretrained")
    if pretrained not in (None, ""):
        try:
            if not isinstance(pretrained, str):
                raise DigitsError("give the id of a model job of this server")
            options["pretrained"] = store.get(pretrained, kind="model").id
        except DigitsError as exc:
            errors["pretrained"] = [
                f"{exc} (fine-tuning over the web starts from a model job of this server, not from a file)"
            ]
    errors.update({key: value for key, value in _outside_errors(options, form).items() if key not in errors})
    if "weights" not in errors:
        errors.update(_weights_errors(options.get("weights"), network))
    try:
        check_options({key: value for key, value in options.items() if key not in errors})
    except FormValidationError as exc:
        errors.update({key: value for key, value in exc.errors.items() if key not in errors})
    if errors:
        raise FormValidationError(errors, form)


def _weights_errors(value: Any, network: str | None) -> dict[str, list[str]]:
    """``weights`` resolved as the job resolves it; a name the network declares is left to the job (it may download)."""
    if value in (None, "") or not network:
        return {}
    from ..engine.networks import resolve_network  # the network registry: only when weights are given
    from ..engine.weights import resolve_weights  # with it

    try:
        spec = resolve_network(network)
    except DigitsError:
        return {}  # an unknown network is refused on its own field
    if str(value).strip().lower() in {name.lower() for name in spec.weights}:
        return {}
    try:
        resolve_weights(str(value), spec.name, spec.weights)
    except FormValidationError as exc:
        return {"weights": exc.errors.get("weights") or [str(exc)]}
    except DigitsError as exc:
        return {"weights": [str(exc)]}
    return {}


def _strings(value: Any) -> list[str]:
    """Every string in an option's value, inside lists and JSON objects too (``network_params``)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, (list, tuple)):
        return [text for item in value for text in _strings(item)]
    return []


def _outside_errors(options: dict, form: str) -> dict[str, list[str]]:
    """Option values that name a server path outside the data roots, or a URL the operator did not allow."""
    texts = {key: _strings(value) for key, value in options.items()}
    errors: dict[str, list[str]] = {}
    try:
        check_form_paths(texts, form)
    except FormValidationError as exc:
        errors.update(exc.errors)
    for key, items in texts.items():
        for text in items:
            if key not in errors and "://" in text:
                try:
                    check_url(text.strip(), key)
                except OutboundURLError as exc:
                    errors[key] = [str(exc)]
    return errors


def create_model_jobs(
    name: str,
    dataset: str,
    network: str | None,
    options: dict,
    custom_code: str | None = None,
    group: str | None = None,
) -> list[Job]:
    """Validate and queue one training job, or every job of a sweep.

    All points are checked before the first job is created, so a bad value
    queues nothing. The jobs of a sweep are named ``"NAME lr=… batch=…"``
    and all join ``group`` (default: ``name``); ``job.json`` key ``sweep``
    holds each job's swept values.

    Args:
        name: The model's name (of a sweep: the start of every job name).
        dataset, network, custom_code: As for :func:`~digits_core.web.models_views.create_model_job`.
        options: Training options; ``learning_rate`` / ``batch_size`` may hold several values
            (lists or comma-separated text).
        group: The job group (optional for a single job).

    Returns:
        The queued jobs, in sweep order.

    Raises:
        FormValidationError: A bad name, group, option, dataset or network (nothing is queued).
    """
    from .models_views import check_options, create_model_job

    if not (name or "").strip():
        raise FormValidationError({"model_name": ["Give the model a name."]}, "new model")
    group_name = normalize_group(group)
    points = expand_sweep(options, name.strip())
    if len(points) == 1:
        return [create_model_job(name, dataset, network, dict(points[0].options), custom_code, group=group_name)]
    check_options(dict(options))  # every point, before any job exists
    group_name = sweep_group(name, group_name)
    return [
        create_model_job(
            point.name, dataset, network, dict(point.options), custom_code, group=group_name, sweep=point.values
        )
        for point in points
    ]
