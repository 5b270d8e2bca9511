"""Every lifecycle hook of DIGITS Core, in one place.

Plugins implement hooks with ``@digits_core.hookimpl`` on functions of a
module (or methods of an object) registered under the entry-point group
``digits.plugins.hooks``, or in process with
``digits_core.registry.register(module_or_object)``. As in pluggy and
pytest, an implementation may accept fewer arguments than the spec, so
hooks can grow new arguments without breaking existing plugins. All hook
names start with ``digits_``.
"""

from __future__ import annotations

import pluggy

PROJECT_NAME = "digits"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def digits_register_data_ingestions():
    """Return a list of :class:`~digits_core.DataIngestion` subclasses to make available."""


@hookspec
def digits_register_views():
    """Return a list of :class:`~digits_core.View` subclasses to make available."""


@hookspec
def digits_register_networks():
    """Return a dict mapping network names to ``build_model(input_shape, num_outputs, **params)`` callables."""


@hookspec
def digits_dataset_created(dataset):
    """Called in the job's process after a dataset was published; ``dataset`` is its metadata."""


@hookspec
def digits_training_callbacks(job):
    """Return a list of Keras callbacks to attach to the training run of model job ``job``."""


@hookspec
def digits_training_finished(job, status, logs):
    """Called after a training run ends with ``status`` (Done, Error or Aborted) and the last epoch's ``logs``."""


@hookspec
def digits_job_status_changed(job, old_status, new_status):
    """Called whenever a job's status changes (in the process that changed it)."""


@hookspec
def digits_register_routes(app):
    """Add routes or blueprints to the web UI's Flask ``app`` before it starts serving."""
