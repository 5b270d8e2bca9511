"""DIGITS Core: datasets, training and inference around two plugin interfaces.

The public API. Plugins import only what this module exports::

    from digits_core import DataIngestion, View, hookimpl, registry

Heavy parts (the training engine, TensorFlow) are imported lazily, on first
use of the names that need them, so listing plugins and rendering forms stay
light.
"""

from __future__ import annotations

import importlib

from . import phase_marks  # noqa: F401  (first: marks the interpreter's start-up when DIGITS_PHASE_LOG is set)
from .deprecated import install_module_aliases

install_module_aliases()  # the plugin system's and job store's old flat module names, until plugin API 2.0

__version__ = "0.1.0"
#: Version (major, minor) of the plugin contract: interfaces, hooks, entry-point groups, userdata keys.
#: A minor bump only adds; a major bump may remove what ``digits_core.deprecated`` announced.
PLUGIN_API_VERSION = (1, 1)

from .errors import (  # noqa: E402
    ConfigurationError,
    DatasetError,
    DigitsError,
    FormValidationError,
    InferenceError,
    JobNotFoundError,
    JobStateError,
    PluginCodeError,
    PluginError,
    PluginLoadError,
    PluginNotFoundError,
    TrainingError,
)
from .interfaces import STAGES, TEST, TRAIN, VAL, DataIngestion, View  # noqa: E402
from .jobs import Job, JobLock, JobLockedError, JobStatus, JobStore, is_job_alive  # noqa: E402
from .plugins.hookspecs import hookimpl  # noqa: E402
from .plugins.registry import PluginRecord, PluginRegistry, registry  # noqa: E402

# Names provided by modules that are imported on first access (PEP 562), so
# that `import digits_core` never pulls in TensorFlow. Each later feature
# adds its public names here: name -> module.
_LAZY_EXPORTS: dict[str, str] = {
    "bind_form": "digits_core.forms",
    "select_choices": "digits_core.forms",
    "quiet_tensorflow": "digits_core.tf_quiet",
    "validate_values": "digits_core.forms",
    "resolve_jobs_dir": "digits_core.config",
    # datasets (issue 3)
    "create_dataset": "digits_core.datasets",
    "open_dataset": "digits_core.datasets",
    "Dataset": "digits_core.datasets",
    "Volume": "digits_core.datasets.volumes",  # 3-D volume features (issue 29)
    "EncodedImage": "digits_core.datasets",
    # inference, results pages, export (issue 6)
    "infer": "digits_core.inference.runner",
    "InferenceResult": "digits_core.inference.runner",
    "clear_model_cache": "digits_core.inference.model",
    "export_model": "digits_core.inference.export",
    "render_html": "digits_core.inference.report",
    "render_fragments": "digits_core.inference.report",
    "report_json": "digits_core.inference.report",
    "run_view": "digits_core.inference.report",
    "to_display_uint8": "digits_core.inference.images",
    "to_display_rgb": "digits_core.inference.images",
    "png_data_uri": "digits_core.inference.images",
    "resize_nearest": "digits_core.inference.images",
    "resize_geometry": "digits_core.engine.detection.geometry",
    "transform_boxes": "digits_core.engine.detection.geometry",
    "invert_boxes": "digits_core.engine.detection.geometry",
    "read_kitti_labels": "digits_core.engine.detection.kitti",
    "evaluate_detections": "digits_core.engine.detection.evaluate",
    "match_detections": "digits_core.engine.detection.evaluate",
    # standard datasets and S3 sources (issue 8)
    "download_dataset": "digits_core.download",
    "S3Location": "digits_core.sources",
    "upload_tree": "digits_core.sources",
    "S3SourceFields": "digits_core.sources.s3_form",
    "s3_source": "digits_core.sources.s3_form",
    "is_s3_url": "digits_core.sources.s3_form",
    # web UI and job scheduler (issue 7)
    "create_app": "digits_core.web",
    "Scheduler": "digits_core.scheduler",
    # training engine (issue 5)
    "train": "digits_core.engine",
    "resume_training": "digits_core.engine",
    "request_abort": "digits_core.engine",
    "load_snapshot": "digits_core.engine",
    "lr_schedule_preview": "digits_core.engine",
    "TrainingOptions": "digits_core.engine",
    "Preprocessing": "digits_core.engine",
    "list_networks": "digits_core.engine",
    "read_metrics": "digits_core.engine",
    "read_model_info": "digits_core.engine",
    # sweeps and job groups (issue 15)
    "expand_sweep": "digits_core.sweep",
    "train_sweep": "digits_core.sweep",
    "SweepPoint": "digits_core.sweep",
    "normalize_group": "digits_core.groups",
    # hyper-parameter search on Ray Tune (issue 30)
    "tune": "digits_core.tuning",
    "resume_sweep": "digits_core.tuning",
    "abort_sweep": "digits_core.tuning",
    "TuneHandle": "digits_core.tuning",
    "sweep_summary": "digits_core.sweep_report",
    "compare_models": "digits_core.sweep_report",
}

__all__ = [
    "__version__",
    "PLUGIN_API_VERSION",
    "DataIngestion",
    "View",
    "STAGES",
    "TRAIN",
    "VAL",
    "TEST",
    "hookimpl",
    "registry",
    "PluginRegistry",
    "PluginRecord",
    "Job",
    "JobStatus",
    "JobStore",
    "JobLock",
    "JobLockedError",
    "is_job_alive",
    "DigitsError",
    "ConfigurationError",
    "DatasetError",
    "FormValidationError",
    "InferenceError",
    "JobNotFoundError",
    "JobStateError",
    "PluginCodeError",
    "PluginError",
    "PluginLoadError",
    "PluginNotFoundError",
    "TrainingError",
    *_LAZY_EXPORTS,
]


def __getattr__(name: str):
    module_name = _LAZY_EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'digits_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
