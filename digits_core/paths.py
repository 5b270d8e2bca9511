"""Data roots: which server-side paths the web UI and API may read.

The command line and the Python API act with the user's own rights and
accept any path. The web server acts for whoever reaches it, so the paths it
is given (dataset folders and list files, inference inputs, plugin path
fields, and the paths named inside list files) must lie under its data
roots: ``digits serve --data-root DIR`` (repeatable; default: the folder the
server was started in) and always the jobs folder. Paths are resolved with
symlinks followed, so a link inside a root that points outside is refused.

While a server request (or a job or inference the server queued) runs, the
roots are set with :func:`confined_to`; :func:`check_server_path` then
enforces them, and is a no-op otherwise. Plugins call it on paths they read
that the core does not know about::

    from digits_core.paths import check_server_path

    path = check_server_path(form.image_folder.data, field="image_folder")

Errors name the field, the path and the roots; never the content of a file
or the listing of a folder outside the roots.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from .errors import FormValidationError

_roots: contextvars.ContextVar[tuple[Path, ...] | None] = contextvars.ContextVar("digits_data_roots", default=None)


class PathOutsideRootsError(FormValidationError):
    """A server-side path lies outside the server's data roots (HTTP 400).

    Attributes:
        field: The form field or API key that gave the path.
    """

    def __init__(self, field: str, path: str, roots: Iterable[Path], form_name: str = "request"):
        self.field = field
        allowed = ", ".join(str(r) for r in roots)
        message = (f"{path} is outside the server's data roots ({allowed}); put the data under one "
                   "of them or restart the server with --data-root DIR.")
        super().__init__({field: [message]}, form_name)


def resolve_roots(roots: Iterable[str | os.PathLike] | None, jobs_dir: str | os.PathLike | None = None) -> list[Path]:
    """The data roots as real paths: ``roots`` (default: the current folder), plus ``jobs_dir``.

    The jobs folder is always a root: uploads for inference are saved there.
    """
    given = list(roots or []) or [Path.cwd()]
    if jobs_dir is not None:
        given.append(jobs_dir)
    return list(dict.fromkeys(Path(os.path.realpath(os.path.expanduser(os.fspath(r)))) for r in given))


def current_roots() -> tuple[Path, ...] | None:
    """The data roots in force here, or ``None`` outside a server context (any path allowed)."""
    return _roots.get()


@contextlib.contextmanager
def confined_to(roots: Iterable[str | os.PathLike] | None) -> Iterator[None]:
    """Enforce ``roots`` for :func:`check_server_path` in this context (``None``: no confinement)."""
    value = None if roots is None else tuple(Path(os.path.realpath(os.fspath(r))) for r in roots)
    token = _roots.set(value)
    try:
        yield
    finally:
        _roots.reset(token)


def is_under(path: str | os.PathLike, roots: Iterable[Path]) -> bool:
    """True if ``path`` (symlinks followed) is one of ``roots`` or inside one."""
    real = Path(os.path.realpath(os.path.expanduser(os.fspath(path))))
    return any(real == root or root in real.parents for root in roots)


def check_server_path(path: str | os.PathLike, field: str = "path", *, form_name: str = "request") -> Path:
    """Return ``path`` (``~`` expanded); in a server context, refuse it outside the data roots.

    Args:
        path: The path as given (absolute, ``~/...``, or relative to the
            server's current folder).
        field: The form field or API key it came from, named in the error.
        form_name: What the field belongs to, for the error message.

    Raises:
        PathOutsideRootsError: A server context is active and the path,
            with symlinks resolved, is not under one of its data roots.
    """
    text = os.fspath(path)
    if "\x00" in str(text):
        raise FormValidationError({field: ["the path contains a NUL character"]}, form_name)
    expanded = Path(os.path.expanduser(text))
    roots = _roots.get()
    if roots is not None and not is_under(expanded, roots):
        raise PathOutsideRootsError(field, str(expanded), roots, form_name)
    return expanded


def server_path_allowed(path: str | os.PathLike) -> bool:
    """True outside a server context, or if ``path`` lies under the data roots."""
    roots = _roots.get()
    return roots is None or is_under(path, roots)


def looks_like_path(value: str) -> bool:
    """True for a form value that names a server-side file.

    That is: absolute, ``~...``, ``./...``, or containing a path separator and
    naming an existing entry. URLs (``scheme://...``) and plain words (``png``,
    ``28``) are not paths; plugins check their own bare-name path fields with
    :func:`check_server_path`.
    """
    text = value.strip()
    if not text or "://" in text or "\n" in text:
        return False
    if text.startswith(("/", "~", "./", "../")) or ".." in Path(text).parts:
        return True
    if os.sep not in text:
        return False
    try:
        return os.path.lexists(text)
    except (OSError, ValueError):
        return False


def check_form_paths(values: Mapping[str, object], form_name: str = "form") -> None:
    """Refuse (in a server context) every string value that names a path outside the data roots.

    A catch-all for plugin forms: it needs no knowledge of which fields are
    paths, so a plugin that forgot :func:`check_server_path` is still covered.
    All offending fields are reported together.
    """
    roots = _roots.get()
    if roots is None:
        return
    errors: dict[str, list[str]] = {}
    for name, value in values.items():
        candidates = value if isinstance(value, (list, tuple)) else [value]
        for item in candidates:
            if isinstance(item, str) and looks_like_path(item):
                try:
                    check_server_path(item.strip(), name, form_name=form_name)
                except FormValidationError as exc:
                    errors.setdefault(name, []).extend(exc.errors.get(name, []))
    if errors:
        raise FormValidationError(errors, form_name)
