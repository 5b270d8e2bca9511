"""Which view renders a model's results when none is named: the per-task default views.

First match wins, per task:

1. ``$DIGITS_DEFAULT_VIEWS`` (the operator's setting; ``digits serve --default-view TASK=VIEW`` sets it for
   the server and its workers), written ``TASK=VIEW`` separated by commas or new lines;
2. the user's settings file (``$DIGITS_SETTINGS``, default ``~/.digits/settings.json``), its
   ``"default_views"`` object, e.g. ``{"default_views": {"classification": "saliency"}}``;
3. the bundled view of the task (:data:`BUNDLED_DEFAULT_VIEWS`).

A default only changes what is preselected: every installed view stays available (``--view``, the
model page's menu, ``view_id=``). Nothing here imports TensorFlow or the plugins.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import ConfigurationError, PluginNotFoundError

DEFAULT_VIEWS_ENV = "DIGITS_DEFAULT_VIEWS"
SETTINGS_ENV = "DIGITS_SETTINGS"
DEFAULT_SETTINGS_FILE = Path("~/.digits/settings.json")
#: The view each task gets when no setting names one.
BUNDLED_DEFAULT_VIEWS = {
    "classification": "image-classification",
    "segmentation": "image-segmentation",
    "regression": "regression",
    "image-to-image": "image-output",
    "detection": "bounding-boxes",
    "multilabel": "multilabel",
}
#: Largest settings file read (a settings file is a few lines).
MAX_SETTINGS_BYTES = 64 * 1024


def parse_default_views(text: str, source: str) -> dict[str, str]:
    """Parse ``TASK=VIEW`` pairs (separated by commas or new lines).

    Raises:
        ConfigurationError: A pair is malformed; the message names ``source``.
    """
    views: dict[str, str] = {}
    for part in text.replace("\n", ",").split(","):
        if not part.strip():
            continue
        task, sep, view = (s.strip() for s in part.partition("="))
        if not sep or not task or not view:
            raise ConfigurationError(f'{source}: "{part.strip()}" is not TASK=VIEW (e.g. classification=saliency).')
        views[task] = view
    return views


def settings_file() -> Path:
    """The user's settings file (``$DIGITS_SETTINGS``, else ``~/.digits/settings.json``)."""
    return Path(os.environ.get(SETTINGS_ENV) or DEFAULT_SETTINGS_FILE).expanduser()


def _from_settings_file() -> dict[str, str]:
    path = settings_file()
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_SETTINGS_BYTES + 1)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigurationError(f"Settings file {path}: cannot read it ({exc.strerror}).") from None
    if len(raw) > MAX_SETTINGS_BYTES:
        raise ConfigurationError(
            f"Settings file {path} is over {MAX_SETTINGS_BYTES // 1024} KiB; is it the right file?"
        )
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ConfigurationError(f"Settings file {path} is not valid JSON ({exc}); fix or remove it.") from None
    views = data.get("default_views", {}) if isinstance(data, dict) else None
    if not isinstance(views, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in views.items()):
        raise ConfigurationError(
            f'Settings file {path}: "default_views" must be an object of task names to view ids, '
            'e.g. {"default_views": {"classification": "saliency"}}.'
        )
    return dict(views)


def default_views() -> dict[str, tuple[str, str]]:
    """Every task's default view and where it comes from: ``{task: (view_id, source)}``.

    Raises:
        ConfigurationError: The environment variable or the settings file is malformed.
    """
    chosen = {task: (view, "the bundled default") for task, view in BUNDLED_DEFAULT_VIEWS.items()}
    path = settings_file()
    chosen.update({task: (view, f"settings file {path}") for task, view in _from_settings_file().items()})
    env = os.environ.get(DEFAULT_VIEWS_ENV, "")
    chosen.update(
        {
            task: (view, f"${DEFAULT_VIEWS_ENV} or --default-view")
            for task, view in parse_default_views(env, f"${DEFAULT_VIEWS_ENV}").items()
        }
    )
    return chosen


def default_view_for(task: str | None) -> str | None:
    """The view id that renders ``task``'s results when none is named, or ``None``.

    Raises:
        ConfigurationError: A setting is malformed, or names a view that is not installed (named with
            the setting, so the operator knows what to fix).
    """
    view, source = default_views().get(task or "", (None, ""))
    if view is None or view == BUNDLED_DEFAULT_VIEWS.get(task or ""):
        return view
    from ..plugins.registry import registry  # the plugins load on first use, here only for a chosen view

    try:
        registry.get_view(view)
    except PluginNotFoundError:
        raise ConfigurationError(
            f'The default view for {task} results is "{view}" ({source}), but no such view is installed; '
            "see `digits plugins`, or change the setting."
        ) from None
    return view
