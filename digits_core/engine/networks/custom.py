"""Custom network files: a Python file defining ``build_model``.

Contract (see ``docs/custom-networks.md``)::

    def build_model(input_shape, num_outputs, **params):
        # input_shape: (H, W, C) after cropping; num_outputs: classes,
        # or the regression label length
        ...
        return model                      # a keras.Model
        # or: return model, loss, metrics  # loss: a Keras loss (name or callable), metrics: list

Errors in the file (syntax errors, exceptions at import or in
``build_model``, a wrong return value) raise :class:`TrainingError` whose
message starts with ``<file>:<line>`` and quotes the user's line, so the
person sees their own code, not the engine's.
"""

from __future__ import annotations

import hashlib
import linecache
import sys
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...errors import TrainingError


def _user_frames(exc: BaseException, path: str) -> list[traceback.FrameSummary]:
    frames = traceback.extract_tb(exc.__traceback__)
    return [f for f in frames if f.filename == path]


def describe_user_error(exc: BaseException, path: str, what: str) -> TrainingError:
    """Turn an exception raised by code in ``path`` into a TrainingError pointing at the user's line."""
    if isinstance(exc, SyntaxError) and (exc.filename == path or exc.filename is None):
        line = (exc.text or linecache.getline(path, exc.lineno or 0) or "").rstrip()
        caret = ""
        if exc.offset and line:
            caret = "\n    " + " " * (max(exc.offset, 1) - 1) + "^"
        return TrainingError(f"{path}:{exc.lineno}: {what}: SyntaxError: {exc.msg}\n    {line.strip() and line}{caret}")
    frames = _user_frames(exc, path)
    if frames:
        frame = frames[-1]
        code = (frame.line or linecache.getline(path, frame.lineno or 0) or "").strip()
        return TrainingError(f"{path}:{frame.lineno}: {what}: {type(exc).__name__}: {exc}\n    in {frame.name}: {code}")
    return TrainingError(f"{path}: {what}: {type(exc).__name__}: {exc}")


def load_network_module(path: str | Path) -> types.ModuleType:
    """Import a network file as a fresh module.

    Raises:
        TrainingError: Missing file, syntax error, import-time exception or no ``build_model``.
    """
    path = str(Path(path).expanduser().resolve())
    if not Path(path).is_file():
        raise TrainingError(f"Network file {path} does not exist.")
    source = Path(path).read_text(encoding="utf-8")
    digest = hashlib.sha1(path.encode()).hexdigest()[:10]
    module = types.ModuleType(f"digits_user_network_{digest}")
    module.__file__ = path
    linecache.checkcache(path)
    try:
        code = compile(source, path, "exec")
        sys.modules[module.__name__] = module
        exec(code, module.__dict__)  # noqa: S102 - running the user's own network file is the point
    except BaseException as exc:  # noqa: BLE001
        sys.modules.pop(module.__name__, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise describe_user_error(exc, path, "error while loading the network file") from exc
    build = getattr(module, "build_model", None)
    if not callable(build):
        raise TrainingError(
            f"{path}: defines no function build_model(input_shape, num_outputs, **params); see docs/custom-networks.md."
        )
    return module


def call_builder(
    build: Callable, input_shape, num_outputs: int, params: dict, *, origin: str, path: str | None = None
) -> tuple[Any, Any, Any]:
    """Call ``build_model`` and check what it returns.

    Returns:
        ``(model, loss_or_None, metrics_or_None)``.

    Raises:
        TrainingError: The builder raised, or did not return a Keras model (or a
            ``(model, loss, metrics)`` tuple).
    """
    import keras

    try:
        result = build(tuple(int(d) for d in input_shape), int(num_outputs), **params)
    except TrainingError:
        raise
    except Exception as exc:  # noqa: BLE001
        if path:
            raise describe_user_error(exc, path, "build_model failed") from exc
        raise TrainingError(f"Network {origin}: build_model failed: {type(exc).__name__}: {exc}") from exc
    loss = metrics = None
    if isinstance(result, tuple):
        if not 1 <= len(result) <= 3:
            raise TrainingError(
                f"{path or origin}: build_model returned a tuple of {len(result)} items; "
                "return a keras.Model or (model, loss, metrics)."
            )
        model, loss, metrics = (list(result) + [None, None])[:3]
    else:
        model = result
    if not isinstance(model, keras.Model):
        raise TrainingError(f"{path or origin}: build_model returned {type(model).__name__}, not a keras.Model.")
    return model, loss, metrics
