"""The submission layer: creating, validating and queuing dataset, model and sweep jobs, below every door.

The web pages, the JSON API, the CLI's queued path and the Python API create jobs
here and nowhere else:

* :mod:`.options`: the one gate of the training options a request carries
  (:func:`~.options.check_request_options`; server settings are never request options).
* :mod:`.models`: model jobs, one or a sweep's grid (:func:`~.models.create_model_jobs`).
* :mod:`.datasets`: dataset jobs (:func:`~.datasets.queue_dataset_job`).
* :mod:`.sweeps`: searches (:func:`~.sweeps.start_sweep`).
* :mod:`.records`: the one place a job folder is made (at the job store's layer, so the
  runs that create their own job, :func:`digits_core.engine.train` and
  :func:`digits_core.datasets.create_dataset`, call it too).

Submission functions take the job store, the queue and the jobs folder as arguments: they know
nothing of Flask or of the command line.
"""
