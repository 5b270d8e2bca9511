"""The one gate of the training options a request carries, whatever its door.

:func:`check_request_options` checks the options of the New Model form and
``POST /api/models`` (through :func:`digits_core.submit.models.create_model_job`),
the Search panel and ``POST /api/sweeps`` (through
:func:`digits_core.submit.sweeps.start_sweep`); :func:`check_options` is the
engine's own validation of every point of a sweep. Server settings
(:data:`SERVER_SETTINGS`) are refused there by name: a request never picks the
server's Ray cluster, jobs folder or data roots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..engine.mlflow_log import TRACKING_KEY, check_tracking_uri
from ..errors import DigitsError, FormValidationError
from ..outbound import OutboundURLError, check_url
from ..paths import check_form_paths
from ..sweeps import expand_sweep

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


def check_options(options: dict) -> None:
    """Validate training options with the engine's own rules (no TensorFlow); every point of a sweep.

    Raises:
        FormValidationError: Naming the bad fields.
    """
    from ..engine.options import TrainingOptions  # the engine's option rules, only when a request is checked

    skip = ("dataset", "network", TRACKING_KEY)  # the tracking URI rides beside the options (engine.mlflow_log)
    for point in expand_sweep({k: v for k, v in options.items() if k not in skip}):
        TrainingOptions.from_kwargs(**point.options)


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
    and a URL must be one the operator allows (:func:`digits_core.outbound.check_url`), an MLflow
    tracking URI (``mlflow``) too, and only http(s) (:func:`digits_core.engine.mlflow_log.check_tracking_uri`);
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
    tracking = options.get(TRACKING_KEY)
    if TRACKING_KEY not in errors and tracking not in (None, ""):
        try:  # an MLflow server is an outbound address: http(s) the operator allows, never a file or database URI
            check_tracking_uri(str(tracking).strip(), TRACKING_KEY, request=True)
        except OutboundURLError as exc:
            errors[TRACKING_KEY] = [str(exc)]
    for key, items in texts.items():
        for text in items:
            if key not in errors and "://" in text:
                try:
                    check_url(text.strip(), key)
                except OutboundURLError as exc:
                    errors[key] = [str(exc)]
    return errors
