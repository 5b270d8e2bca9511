"""DIGITS Core: datasets, training and inference around two plugin interfaces.

This module is the **plugin API**: what plugins import, and all they import::

    from digits_core import DataIngestion, View, hookimpl, registry

the interfaces, hooks, registry, errors, form helpers, the volume and image types plugins return, and
the image, detection and S3 helpers views and data plugins use. The plugin API is exactly the names in
:data:`__all__` plus the names in the ``__all__`` of the submodules in :data:`PUBLIC_MODULES` (data-root
checks, outbound URL checks, input limits, image reading, template helpers, the testing kit);
``tests/test_plugin_api_imports.py`` holds the bundled plugins, the DIGITS 6 adapter and the examples to it. Embedding code (build, train, serve)
uses the application API in named submodules (``docs/python-api.md``): :mod:`digits_core.datasets`
(``create_dataset``, ``open_dataset``), :mod:`digits_core.engine` (``train``, ``resume_training``, ...),
:mod:`digits_core.inference` (``infer``, ``export_model``, ...), :mod:`digits_core.web` (``create_app``),
:mod:`digits_core.scheduler`, :mod:`digits_core.jobs` (``JobStore``), :mod:`digits_core.sweeps`
(``train_sweep``; ``.tune``, ``.report``), :mod:`digits_core.download`. Their former top-level names
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
#: 1.2 added ``View.model_context`` (:class:`ViewContext`: the model a view renders for, runnable on arrays).
#: 1.3 added the optional ``DataIngestion.pool_candidates``, ``pool_image`` and ``pool_store_proposal``
#: (active-learning pools from a plugin's source, e.g. a PACS).
PLUGIN_API_VERSION = (1, 3)

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
from .interfaces import STAGES, TEST, TRAIN, VAL, DataIngestion, View, ViewContext  # noqa: E402
from .jobs import Job, JobStatus  # noqa: E402  (hooks hand plugins a Job and its JobStatus)
from .plugins.discovery import ENTRY_POINT_GROUPS, PluginRecord  # noqa: E402
from .plugins.hookspecs import hookimpl  # noqa: E402
from .plugins.registry import PluginRegistry, registry  # noqa: E402

# Names provided by modules that are imported on first access (PEP 562), so
# that `import digits_core` never pulls in TensorFlow: name -> module.
_LAZY_EXPORTS: dict[str, str] = {
    "bind_form": "digits_core.forms",
    "select_choices": "digits_core.forms",
    "validate_values": "digits_core.forms",
    "user_fields": "digits_core.forms",
    "quiet_tensorflow": "digits_core.tf_quiet",
    # what data plugins return (issues 3, 29)
    "Volume": "digits_core.interfaces.volume",
    "EncodedImage": "digits_core.interfaces.images",
    "DeclaredLabel": "digits_core.interfaces.labels",
    # per-case 3-D segmentation metrics for volume views
    "case_metrics": "digits_core.volumes.metrics",
    # image helpers for views (issue 6)
    "to_display_uint8": "digits_core.inference.images",
    "to_display_rgb": "digits_core.inference.images",
    "png_data_uri": "digits_core.inference.images",
    "resize_nearest": "digits_core.inference.images",
    # detection helpers for detection data plugins and views
    "resize_geometry": "digits_core.boxes.geometry",
    "transform_boxes": "digits_core.boxes.geometry",
    "invert_boxes": "digits_core.boxes.geometry",
    "read_kitti_labels": "digits_core.boxes.kitti",
    "evaluate_detections": "digits_core.boxes.evaluate",
    "match_detections": "digits_core.boxes.evaluate",
    # S3 sources for data plugins (issue 8)
    "S3Location": "digits_core.sources",
    "S3SourceFields": "digits_core.sources.s3_form",
    "s3_source": "digits_core.sources.s3_form",
    "is_s3_url": "digits_core.sources.s3_form",
}

#: The plugin API's submodules -> what a plugin takes from them. A plugin imports ``digits_core`` (the names in
#: :data:`__all__`) and these modules (the names in each one's own ``__all__``), nothing else. They are light
#: (no TensorFlow), typed and documented in docs/writing-plugins.md, and change only with a deprecation period.
PUBLIC_MODULES: dict[str, str] = {
    "digits_core.errors": "the errors plugins raise and catch (DigitsError and its subclasses)",
    "digits_core.paths": "data-root checks for every server-side path a plugin reads (check_server_path, "
    "server_path_allowed, resolve_in_roots, open_in_roots)",
    "digits_core.outbound": "outbound URL checks (check_url, guard_session, in_server_context)",
    "digits_core.limits": "input size limits checked from headers before decoding (dicom_pixels_problem, "
    "volume_voxels_problem, series_voxels_problem, check_image_size)",
    "digits_core.resize": "image reading, channel conversion and DIGITS's four resize modes (open_image, "
    "image_to_array, resize_image, RESIZE_MODES)",
    "digits_core.templating": "the sandboxed Jinja2 environment plugin templates render in (plugin_environment, "
    "render_plugin_template, CSP_NONCE_PLACEHOLDER)",
    "digits_core.plugins.testing": "the testing kit for plugin test suites (registered, build_dataset, ...)",
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
    **dict.fromkeys(["expand_sweep", "train_sweep", "SweepPoint"], "digits_core.sweeps"),
    "normalize_group": "digits_core.groups",
    **dict.fromkeys(["tune", "resume_sweep", "abort_sweep", "TuneHandle"], "digits_core.sweeps.tune"),
    **dict.fromkeys(["sweep_summary", "compare_models"], "digits_core.sweeps.report"),
    **dict.fromkeys(["JobStore", "JobLock", "JobLockedError", "is_job_alive"], "digits_core.jobs"),
    "resolve_jobs_dir": "digits_core.config",
}

if TYPE_CHECKING:  # the lazy names, typed for type checkers and editors
    from .boxes.evaluate import evaluate_detections as evaluate_detections
    from .boxes.evaluate import match_detections as match_detections
    from .boxes.geometry import invert_boxes as invert_boxes
    from .boxes.geometry import resize_geometry as resize_geometry
    from .boxes.geometry import transform_boxes as transform_boxes
    from .boxes.kitti import read_kitti_labels as read_kitti_labels
    from .forms import bind_form as bind_form
    from .forms import user_fields as user_fields
    from .forms import validate_values as validate_values
    from .inference.images import png_data_uri as png_data_uri
    from .inference.images import resize_nearest as resize_nearest
    from .inference.images import to_display_rgb as to_display_rgb
    from .inference.images import to_display_uint8 as to_display_uint8
    from .interfaces.images import EncodedImage as EncodedImage
    from .interfaces.labels import DeclaredLabel as DeclaredLabel
    from .interfaces.volume import Volume as Volume
    from .option_spec import select_choices as select_choices
    from .sources import S3Location as S3Location
    from .sources.s3_form import S3SourceFields as S3SourceFields
    from .sources.s3_form import is_s3_url as is_s3_url
    from .sources.s3_form import s3_source as s3_source
    from .tf_quiet import quiet_tensorflow as quiet_tensorflow
    from .volumes.metrics import case_metrics as case_metrics

__all__ = [
    "__version__",
    "PLUGIN_API_VERSION",
    "DataIngestion",
    "View",
    "ViewContext",
    "STAGES",
    "TRAIN",
    "VAL",
    "TEST",
    "hookimpl",
    "registry",
    "PluginRegistry",
    "PluginRecord",
    "ENTRY_POINT_GROUPS",
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
