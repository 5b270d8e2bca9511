"""Where DIGITS Core keeps its files.

The jobs folder holds one sub-folder per job (dataset or model). It is chosen,
first match wins, from:

1. an explicit argument (``--jobs-dir`` on the command line, ``jobs_dir=`` in the API),
2. the ``DIGITS_JOBS_DIR`` environment variable,
3. ``~/.digits/jobs``.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ConfigurationError

JOBS_DIR_ENV = "DIGITS_JOBS_DIR"
DEFAULT_JOBS_DIR = Path("~/.digits/jobs")


def resolve_jobs_dir(explicit: str | os.PathLike | None = None, *, create: bool = True) -> Path:
    """Return the jobs folder to use, creating it if asked.

    Args:
        explicit: A folder given by the caller; wins over the environment.
        create: Create the folder (and its parents) when it does not exist.

    Returns:
        The absolute path of the jobs folder.

    Raises:
        ConfigurationError: The path exists but is not a folder, or cannot be created.
    """
    if explicit:
        source, raw = "--jobs-dir", str(explicit)
    elif os.environ.get(JOBS_DIR_ENV):
        source, raw = JOBS_DIR_ENV, os.environ[JOBS_DIR_ENV]
    else:
        source, raw = "the default jobs folder", str(DEFAULT_JOBS_DIR)
    path = Path(raw).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise ConfigurationError(
            f"Jobs folder {path} (from {source}) exists but is not a folder; "
            "point --jobs-dir or DIGITS_JOBS_DIR at a folder."
        )
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigurationError(
                f"Cannot create jobs folder {path} (from {source}): {exc.strerror}; "
                "choose a writable folder with --jobs-dir or DIGITS_JOBS_DIR."
            ) from exc
    return path
