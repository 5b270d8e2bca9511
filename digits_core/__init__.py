"""DIGITS Core: datasets, training and inference around two plugin interfaces.

This module is the **plugin API**: what plugins import, and all they import::

    from digits_core import DataIngestion, View, hookimpl, registry

the interfaces, hooks, registry, errors, form helpers, the volume and image types plugins return, and
the image, detection and S3 helpers views and data plugins use. Embedding code (build, train, serve)
uses the application API in named submodules (``docs/python-api.md``): :mod:`digits_core.datasets`
(``create_dataset``, ``open_dataset``), :mod:`digits_core.engine` (``train``, ``resume_training``, ...),
:mod:`digits_core.inference` (``infer``, ``export_model``, ...), :mod:`digits_core.web` (``create_app``),
:mod:`digits_core.scheduler`, :mod:`digits_core.jobs` (``JobStore``), :mod:`digits_core.tuning`,
:mod:`digits_core.sweep`, :mod:`digits_core.download`. Their former top-level names
(``digits_core.train``, ...) still work with a warning until plugin API 2.0
(:data:`digits_core.deprecated.MOVED_NAME`).

Heavy parts (the training engine, TensorFlow) are imported lazily, on first
use of the names that need them, so listing plugins and rendering forms stay
light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import phase_marks  # noqa: F401  (first: marks the interpreter's start-up when DIGITS_PHASE_LOG is set)
from .deprecated import MOVED_NAME, install_module_aliases

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
from .jobs import Job, JobStatus  # noqa: E402  (hooks hand plugins a Job and its JobStatus)
from .plugins.discovery import PluginRecord  # noqa: E402
from .plugins.hookspecs import hookimpl  # noqa: E402
from .plugins.registry import PluginRegistry, registry  # noqa: E402

# Names provided by modules that are imported on first access (PEP 562), so
# that `import digits_core` never pulls in TensorFlow: name -> module.
_LAZY_EXPORTS: dict[str, str] = {
    "bind_form": "digits_core.forms",
    "select_choices": "digits_core.forms",
    "validate_values": "digits_core.forms",
    "quiet_tensorflow": "digits_core.tf_quiet",
    # what data plugins return (issues 3, 29)
    "Volume": "digits_core.datasets.volumes",
    "EncodedImage": "digits_core.datasets",
    # image helpers for views (issue 6)
    "to_display_uint8": "digits_core.inference.images",
    "to_display_rgb": "digits_core.inference.images",
    "png_data_uri": "digits_core.inference.images",
    "resize_nearest": "digits_core.inference.images",
    # detection helpers for detection data plugins and views
    "resize_geometry": "digits_core.engine.detection.geometry",
    "transform_boxes": "digits_core.engine.detection.geometry",
    "invert_boxes": "digits_core.engine.detection.geometry",
    "read_kitti_labels": "digits_core.engine.detection.kitti",
    "evaluate_detections": "digits_core.engine.detection.evaluate",
    "match_detections": "digits_core.engine.detection.evaluate",
    # S3 sources for data plugins (issue 8)
    "S3Location": "digits_core.sources",
    "S3SourceFields": "digits_core.sources.s3_form",
    "s3_source": "digits_core.sources.s3_form",
    "is_s3_url": "digits_core.sources.s3_form",
}

#: The application API's former top-level names -> the submodule that exports them now. ``digits_core.NAME``
#: still answers, with a :data:`~digits_core.deprecated.MOVED_NAME` warning, until plugin API 2.0.
APPLICATION_API: dict[str, str] = {
    **dict.fromkeys(["create_dataset", "open_dataset", "Dataset"], "digits_core.datasets"),
    **dict.fromkeys(
        [
            "train",
            "resume_training",
            "request_abort",
            "load_snapshot",
            "lr_schedule_preview",
            "TrainingOptions",
            "Preprocessing",
            "list_networks",
            "read_metrics",
            "read_model_info",
        ],
        "digits_core.engine",
    ),
    **dict.fromkeys(
        [
            "infer",
            "InferenceResult",
            "clear_model_cache",
            "export_model",
            "render_html",
            "render_fragments",
            "report_json",
            "run_view",
        ],
        "digits_core.inference",
    ),
    "download_dataset": "digits_core.download",
    "upload_tree": "digits_core.sources",
    "create_app": "digits_core.web",
    "Scheduler": "digits_core.scheduler",
    **dict.fromkeys(["expand_sweep", "train_sweep", "SweepPoint"], "digits_core.sweep"),
    "normalize_group": "digits_core.groups",
    **dict.fromkeys(["tune", "resume_sweep", "abort_sweep", "TuneHandle"], "digits_core.tuning"),
    **dict.fromkeys(["sweep_summary", "compare_models"], "digits_core.sweep_report"),
    **dict.fromkeys(["JobStore", "JobLock", "JobLockedError", "is_job_alive"], "digits_core.jobs"),
    "resolve_jobs_dir": "digits_core.config",
}

if TYPE_CHECKING:  # the lazy names, typed for type checkers and editors
    from .datasets import EncodedImage as EncodedImage
    from .datasets.volumes import Volume as Volume
    from .engine.detection.evaluate import evaluate_detections as evaluate_detections
    from .engine.detection.evaluate import match_detections as match_detections
    from .engine.detection.geometry import invert_boxes as invert_boxes
    from .engine.detection.geometry import resize_geometry as resize_geometry
    from .engine.detection.geometry import transform_boxes as transform_boxes
    from .engine.detection.kitti import read_kitti_labels as read_kitti_labels
    from .forms import bind_form as bind_form
    from .forms import validate_values as validate_values
    from .inference.images import png_data_uri as png_data_uri
    from .inference.images import resize_nearest as resize_nearest
    from .inference.images import to_display_rgb as to_display_rgb
    from .inference.images import to_display_uint8 as to_display_uint8
    from .option_spec import select_choices as select_choices
    from .sources import S3Location as S3Location
    from .sources.s3_form import S3SourceFields as S3SourceFields
    from .sources.s3_form import is_s3_url as is_s3_url
    from .sources.s3_form import s3_source as s3_source
    from .tf_quiet import quiet_tensorflow as quiet_tensorflow

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


def __getattr__(name: str) -> Any:
    module_name = _LAZY_EXPORTS.get(name)
    if module_name is not None:
        value = getattr(importlib.import_module(module_name), name)
        globals()[name] = value
        return value
    moved_to = APPLICATION_API.get(name)
    if moved_to is not None:  # not cached: every old use warns, naming its own line
        MOVED_NAME.warn(stacklevel=3, old=f"digits_core.{name}", new=f"{moved_to}.{name}")
        return getattr(importlib.import_module(moved_to), name)
    raise AttributeError(f"module 'digits_core' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_EXPORTS))
