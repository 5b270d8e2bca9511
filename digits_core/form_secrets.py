"""Keep secret form values (passwords, S3 secret keys) out of everything written to disk.

A form field is secret when it is a WTForms ``PasswordField``. Its value is
used to run the job but never persisted: ``job.json``'s ``form_data`` and the
dataset's userdata hold :data:`MASK` instead, and the real value stays in
this process's memory (:func:`stash`), keyed by job id. A launcher that runs
the job in a child process passes the secrets in the child's environment
(:func:`child_env`, variable :data:`ENV_VAR`), never through a file. A job
run later in a process that has neither (after a restart) gets an empty
value, so the plugin falls back to other credentials (for S3: the standard
AWS environment variables, profile or config files).

Plugins need no code for this: declaring the field as a ``PasswordField``
is enough.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from typing import Any

#: What a secret value is replaced with on disk.
MASK = "********"
#: Environment variable through which a launcher hands a job's secrets to its worker process.
ENV_VAR = "DIGITS_JOB_SECRETS"

_store: dict[str, dict[str, Any]] = {}
_lock = threading.Lock()


def secret_field_names(form_class) -> list[str]:
    """Return the names of the secret (``PasswordField``) fields of a form class (or instance)."""
    from .forms import form_class as _form_class  # forms loads WTForms: only when a form is redacted

    try:
        form = _form_class(form_class)(meta={"csrf": False})
    except Exception:  # noqa: BLE001 - a form that cannot be built has no fields to hide
        return []
    return [field.name for field in form if field.type == "PasswordField"]


def redact(values: Mapping[str, Any], names) -> dict[str, Any]:
    """Return a copy of ``values`` with the non-empty values of ``names`` replaced by :data:`MASK`."""
    names = set(names)
    return {k: (MASK if k in names and v not in (None, "") else v) for k, v in values.items()}


def stash(job_id: str, values: Mapping[str, Any], names) -> None:
    """Remember the secret values of a job in memory (never on disk)."""
    secrets = {k: values[k] for k in names if values.get(k) not in (None, "")}
    if secrets:
        with _lock:
            _store[job_id] = secrets


def _from_env(job_id: str) -> dict[str, Any]:
    try:
        return dict(json.loads(os.environ.get(ENV_VAR) or "{}").get(job_id, {}))
    except (ValueError, AttributeError, TypeError):
        return {}


def restore(job_id: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``values`` with masked entries replaced by the job's secrets.

    The secrets come from this process's memory (:func:`stash`) or from
    :data:`ENV_VAR` (:func:`child_env`); a masked value with neither becomes ``""``.
    """
    with _lock:
        secrets = dict(_store.get(job_id, {}))
    if not secrets:
        secrets = _from_env(job_id)
    return {k: (secrets.get(k, "") if v == MASK else v) for k, v in values.items()}


def child_env(job_id: str) -> dict[str, str]:
    """Return the environment entries that give a child process this job's secrets (``{}`` if none).

    Example::

        subprocess.Popen(cmd, env={**os.environ, **child_env(job.id)})
    """
    with _lock:
        secrets = dict(_store.get(job_id, {}))
    return {ENV_VAR: json.dumps({job_id: secrets})} if secrets else {}


def forget(job_id: str) -> None:
    """Drop the stashed secrets of a job."""
    with _lock:
        _store.pop(job_id, None)
