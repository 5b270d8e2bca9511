"""Hook implementations of the sample plugin: one for every DIGITS hook.

Every call is recorded, so tests can prove that DIGITS calls each hook with
its documented arguments:

* in this process, ``CALLS`` gets ``(hook name, {argument: value})``;
* when ``DIGITS_SAMPLE_HOOK_LOG`` names a file, one JSON line
  ``{"hook", "pid", "args"}`` is appended to it (arguments described as
  plain data), which shows calls made in job worker processes too.

Each implementation accepts every argument of its hookspec, so a call that
drops one fails to reach it.
"""

import json
import os

from digits_core import hookimpl

from . import NumbersIngestion, TextView

CALLS = []
CREATED = []
ROUTE = "/sample-plugin/hello"


def _describe(value):
    """Plain-data description of a hook argument (for the JSON log)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): _describe(v) for k, v in value.items()}
    if hasattr(value, "id") and hasattr(value, "kind"):  # a digits_core Job
        return {"type": type(value).__name__, "id": value.id, "kind": value.kind, "path": str(value.path)}
    if hasattr(value, "job_path"):  # a digits_core Dataset
        return {"type": type(value).__name__, "path": str(value.path), "job_path": str(value.job_path)}
    try:
        return float(value)  # numpy scalars in Keras logs
    except (TypeError, ValueError):
        return {"type": type(value).__name__}


def _record(hook, **args):
    CALLS.append((hook, args))
    path = os.environ.get("DIGITS_SAMPLE_HOOK_LOG")
    if path:
        line = json.dumps({"hook": hook, "pid": os.getpid(), "args": {k: _describe(v) for k, v in args.items()}})
        with open(path, "a", encoding="utf-8") as log:
            log.write(line + "\n")


class HookNumbersIngestion(NumbersIngestion):
    """The sample numbers again, registered through ``digits_register_data_ingestions``."""

    plugin_id = "sample-hook-numbers"
    title = "Sample numbers (from a hook)"


class HookTextView(TextView):
    """The sample text view again, registered through ``digits_register_views``."""

    plugin_id = "sample-hook-text"
    title = "Sample text view (from a hook)"


def build_sample_net(input_shape, num_outputs, **params):
    """Sample plugin network: flatten then one softmax layer."""
    import keras

    return keras.Sequential(
        [
            keras.Input(shape=tuple(input_shape)),
            keras.layers.Flatten(),
            keras.layers.Dense(num_outputs, activation="softmax"),
        ]
    )


@hookimpl
def digits_register_data_ingestions():
    _record("digits_register_data_ingestions")
    return [HookNumbersIngestion]


@hookimpl
def digits_register_views():
    _record("digits_register_views")
    return [HookTextView]


@hookimpl
def digits_register_networks():
    _record("digits_register_networks")
    return {"sample-net": build_sample_net}


@hookimpl
def digits_dataset_created(dataset):
    CREATED.append(dataset)
    _record("digits_dataset_created", dataset=dataset)


@hookimpl
def digits_training_callbacks(job):
    import keras

    class EpochRecorder(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            _record("sample-callback.on_epoch_end", job=job, epoch=epoch, logs=dict(logs or {}))

    _record("digits_training_callbacks", job=job)
    return [EpochRecorder()]


@hookimpl
def digits_training_finished(job, status, logs):
    _record("digits_training_finished", job=job, status=status, logs=logs)


@hookimpl
def digits_job_status_changed(job, old_status, new_status):
    _record("digits_job_status_changed", job=job, old_status=old_status, new_status=new_status)


@hookimpl
def digits_register_routes(app):
    _record("digits_register_routes", app=app)
    app.add_url_rule(ROUTE, "sample_plugin_hello", lambda: "hello from the sample plugin")
