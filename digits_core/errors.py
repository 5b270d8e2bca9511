"""Errors a user can cause, and fix.

Every exception that reaches a person because of something they did (a wrong
form value, a missing folder, a broken plugin, an unknown job id) is a
:class:`DigitsError`. Its message names the file, field or plugin involved and
says what to do. The command line prints these messages without a traceback
and exits with a non-zero status; the web UI shows them on the page; the
Python API lets them propagate.

Anything else that escapes is a bug in DIGITS Core or in a plugin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class DigitsError(Exception):
    """Base class of every error a user can cause and fix.

    Attributes:
        exit_code: The status the ``digits`` command exits with.
    """

    exit_code = 1


class ConfigurationError(DigitsError):
    """A setting (jobs folder, environment variable, option) is unusable."""


class PluginError(DigitsError):
    """A plugin is missing, failed to load, or broke its contract.

    Args:
        plugin: The plugin's id or entry-point name.
        message: What went wrong and what to do about it.
    """

    def __init__(self, plugin: str, message: str):
        self.plugin = plugin
        super().__init__(message)


class PluginCodeError(PluginError):
    """Plugin code (a constructor, form, template, view or hook) raised an exception.

    The message is one line naming the plugin, the method and the cause;
    the original exception is chained as ``__cause__`` (``digits -v`` prints
    its traceback).

    Args:
        plugin: The plugin's id.
        method: What the core called (e.g. ``get_dataset_form``, ``View.__init__``).
        exc: The exception plugin code raised.

    Attributes:
        method: As given.
        cause: ``"ExceptionType: message"`` of the original exception.
    """

    def __init__(self, plugin: str, method: str, exc: BaseException):
        self.method = method
        first_line = (str(exc).strip().splitlines() or [""])[0]
        self.cause = f"{type(exc).__name__}: {first_line}" if first_line else type(exc).__name__
        super().__init__(plugin, f'plugin "{plugin}" failed in {method}: {self.cause}')


class PluginNotFoundError(PluginError):
    """No loaded plugin has the requested id."""


class PluginLoadError(PluginError):
    """A plugin failed to load and strict mode (``DIGITS_STRICT_PLUGINS=1``) is on."""

    def __init__(self, plugin: str, error: str):
        super().__init__(plugin, f'Error loading plugin "{plugin}": {error}')


class FormValidationError(DigitsError):
    """Form values failed validation.

    Args:
        errors: Mapping of field name to the list of messages for that field.
        form_name: What the form is for (e.g. ``dataset form of plugin "image-classification"``).

    Attributes:
        errors: The same mapping, for callers (like the web UI) that show
            each message next to its field.
    """

    exit_code = 2

    def __init__(self, errors: Mapping[str, Sequence[str]], form_name: str = "form"):
        self.errors = {name: list(messages) for name, messages in errors.items()}
        lines = [f"Invalid value in {form_name}:"]
        for name, messages in self.errors.items():
            for message in messages:
                lines.append(f"  {name}: {message}")
        super().__init__("\n".join(lines))


class JobNotFoundError(DigitsError):
    """No job with the given id exists in the jobs folder."""


class JobStateError(DigitsError):
    """The job is not in a state that allows the requested action."""


class DiskFullError(DigitsError):
    """The storage cannot take a write (a full disk, an exceeded quota, an I/O error); the message says where.

    The web server answers it with HTTP 507 (Insufficient Storage).
    """


class DatasetError(DigitsError):
    """A dataset could not be created or read."""


class TrainingError(DigitsError):
    """A training job could not start or failed."""


class InferenceError(DigitsError):
    """Inference could not run on the given inputs."""


__all__ = [
    "DigitsError",
    "ConfigurationError",
    "PluginError",
    "PluginCodeError",
    "PluginNotFoundError",
    "PluginLoadError",
    "FormValidationError",
    "JobNotFoundError",
    "JobStateError",
    "DiskFullError",
    "DatasetError",
    "TrainingError",
    "InferenceError",
]
