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

A list of roots may *fence* a folder (:func:`fence`): under it only the roots
listed inside it are readable. A server with accounts fences its jobs folder
this way, so a user's paths reach only the folders of the jobs that user may
read (not another user's private job, nor the accounts database); the list,
fence included, is what a job records and its worker is confined to again.

Paths that come *out of a file* (list-file lines, targets rows, label files
paired by name, a label named on an inference list line) go through one
gate, :func:`resolve_in_roots` (or :func:`open_in_roots`, which also opens
the file by its resolved path and checks what it opened). A refused path
gets the same message whatever exists there (no existence or type oracle),
and the message never quotes the line it came from::

    from digits_core.paths import open_in_roots, resolve_in_roots

    image = resolve_in_roots(row[0], base=image_folder, where=f"{csv_path} line {n}")
    with open_in_roots(label_path, "r", where=f"label of {image}") as handle:
        ...
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from .errors import DigitsError, FormValidationError

#: Marks a fenced folder in a list of data roots (see :func:`fence`); never a real path's beginning.
FENCE_MARK = "fenced:"

#: A list of data roots as given: folders, and fenced folders (``FENCE_MARK + folder``).
RootsSpec = Iterable[str | os.PathLike]


class _Confinement:
    """The roots in force, parsed from their list on first use (a server request lists them only if it checks a path)."""

    def __init__(self, spec: RootsSpec | Callable[[], RootsSpec]):
        self._spec = spec
        self._parsed: tuple[tuple[Path, ...], tuple[Path, ...]] | None = None

    def parsed(self) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
        """``(roots, fences)`` as real paths."""
        if self._parsed is None:
            spec = self._spec() if callable(self._spec) else self._spec
            roots: list[Path] = []
            fences: list[Path] = []
            for entry in spec:
                text = os.fspath(entry)
                if isinstance(text, str) and text.startswith(FENCE_MARK):
                    fences.append(Path(os.path.realpath(text[len(FENCE_MARK) :])))
                else:
                    roots.append(Path(os.path.realpath(text)))
            self._parsed = (tuple(dict.fromkeys(roots)), tuple(dict.fromkeys(fences)))
        return self._parsed

    def spec(self) -> tuple[Path | str, ...]:
        """The list again, as :func:`confined_to` takes it (for a process that goes on confined the same)."""
        roots, fences = self.parsed()
        return (*roots, *(FENCE_MARK + str(f) for f in fences))

    def admits(self, real: Path) -> bool:
        """True if the real path ``real`` is under a root, and, inside a fenced folder, under a root inside it."""
        roots, fences = self.parsed()
        fenced = next((f for f in fences if real == f or f in real.parents), None)
        return any(
            (real == root or root in real.parents) and (fenced is None or fenced in root.parents) for root in roots
        )

    def shown(self) -> list[str]:
        """The roots as an error names them: a fenced folder once, never the folders admitted inside it."""
        roots, fences = self.parsed()
        plain = [str(r) for r in roots if not any(r == f or f in r.parents for f in fences)]
        return [*plain, *(f"{f} (only the jobs you may read)" for f in fences)]


_roots: contextvars.ContextVar[_Confinement | None] = contextvars.ContextVar("digits_data_roots", default=None)


class PathOutsideRootsError(FormValidationError):
    """A server-side path lies outside the server's data roots (HTTP 400).

    Attributes:
        field: The form field or API key that gave the path.
    """

    def __init__(self, field: str, path: str, roots: Iterable[str | os.PathLike], form_name: str = "request"):
        self.field = field
        allowed = ", ".join(os.fspath(r) for r in roots)
        message = (
            f"{path} is outside the server's data roots ({allowed}); put the data under one "
            "of them or restart the server with --data-root DIR."
        )
        super().__init__({field: [message]}, form_name)


class OutsideDataRootsError(DigitsError, ValueError):
    """A path read from a file (a list line, a targets row, a label) lies outside the data roots.

    Also a :class:`ValueError`, so a data plugin's reader that turns
    ``ValueError`` into a dataset error names it too. The message is the same
    for a missing file, a folder, a symlink and an unreadable file.
    """

    def __init__(self, where: str):
        super().__init__(
            f"{where}: the path is outside the server's data roots; put the file under one of them "
            "(digits serve --data-root DIR)."
        )


def resolve_roots(roots: Iterable[str | os.PathLike] | None, jobs_dir: str | os.PathLike | None = None) -> list[Path]:
    """The data roots as real paths: ``roots`` (default: the current folder), plus ``jobs_dir``.

    The jobs folder is always a root: uploads for inference are saved there.
    """
    given = list(roots or []) or [Path.cwd()]
    if jobs_dir is not None:
        given.append(jobs_dir)
    return list(dict.fromkeys(Path(os.path.realpath(os.path.expanduser(os.fspath(r)))) for r in given))


def fence(folder: str | os.PathLike, inside: Iterable[str | os.PathLike]) -> list[str]:
    """Entries for a list of data roots that fence ``folder``: under it, only the folders ``inside`` are readable.

    Appended to the roots (which hold ``folder`` or a folder above it), a path under ``folder`` passes only
    inside one of ``inside``; ``folder`` itself and everything else in it is refused as outside the roots.
    """
    return [FENCE_MARK + os.path.realpath(os.fspath(folder)), *(os.path.realpath(os.fspath(p)) for p in inside)]


def current_roots() -> tuple[Path | str, ...] | None:
    """The data roots in force here, or ``None`` outside a server context (any path allowed).

    Folders as real paths; a fenced folder (see :func:`fence`) as a string starting with :data:`FENCE_MARK`.
    :func:`confined_to` takes the tuple as it is, e.g. in another process.
    """
    confinement = _roots.get()
    return None if confinement is None else confinement.spec()


@contextlib.contextmanager
def confined_to(roots: RootsSpec | Callable[[], RootsSpec] | None) -> Iterator[None]:
    """Enforce ``roots`` for :func:`check_server_path` in this context (``None``: no confinement).

    ``roots`` may be a function that returns them: it is called on the first check (a web request lists the
    jobs its user may read only when it checks a path).
    """
    token = _roots.set(None if roots is None else _Confinement(roots))
    try:
        yield
    finally:
        _roots.reset(token)


def _admitted(path: str | os.PathLike, confinement: _Confinement) -> bool:
    return confinement.admits(Path(os.path.realpath(os.path.expanduser(os.fspath(path)))))


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
    confinement = _roots.get()
    if confinement is not None and not _admitted(expanded, confinement):
        raise PathOutsideRootsError(field, str(expanded), confinement.shown(), form_name)
    return expanded


def server_path_allowed(path: str | os.PathLike) -> bool:
    """True outside a server context, or if ``path`` lies under the data roots."""
    confinement = _roots.get()
    return confinement is None or _admitted(path, confinement)


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


def resolve_in_roots(
    path: str | os.PathLike, *, base: str | os.PathLike | None = None, where: str = "a path read from a file"
) -> Path:
    """The one gate for a path that came out of a file; refuse it outside the data roots.

    ``~`` is expanded and a relative path is taken from ``base``. In a server
    context (see :func:`confined_to`) the path is resolved with every symlink
    followed and checked against the roots, and the *resolved* path is
    returned, so the caller opens what was checked. Outside one (the
    command line and the Python API without ``--data-root``) any path is
    allowed and the absolute path is returned unresolved, as before.

    Args:
        path: The path as written in the file.
        base: Folder a relative path starts from (default: the current folder).
        where: Names the file and line in an error, e.g. ``"targets.csv line 4"``;
            the path itself is never quoted.

    Raises:
        OutsideDataRootsError: The path (with symlinks resolved) is outside the roots,
            or is empty or holds a NUL character.
    """
    text = str(os.fspath(path)).strip()
    if not text or "\x00" in text:
        raise OutsideDataRootsError(where)
    expanded = os.path.expanduser(text)
    if base is not None and not os.path.isabs(expanded):
        expanded = os.path.join(os.path.expanduser(os.fspath(base)), expanded)
    confinement = _roots.get()
    if confinement is None:
        return Path(os.path.abspath(expanded))
    real = Path(os.path.realpath(expanded))
    if not confinement.admits(real):
        raise OutsideDataRootsError(where)
    return real


def open_in_roots(
    path: str | os.PathLike,
    mode: str = "rb",
    *,
    base: str | os.PathLike | None = None,
    where: str = "a path read from a file",
    **open_kwargs: Any,
) -> IO[Any]:
    """Open a path that came out of a file, through :func:`resolve_in_roots`, by its resolved path.

    In a server context the open file is checked again (Linux: its
    ``/proc/self/fd`` link; elsewhere: its device and inode against the
    resolved path), so a symlink swapped in between the check and the open is
    refused, not read. Only reading modes are accepted.

    Args:
        path: The path as written in the file.
        mode: ``"rb"`` or ``"r"`` (text; ``encoding``/``newline``/``errors`` in ``open_kwargs``).
        base: Folder a relative path starts from.
        where: Names the file and line in errors.

    Raises:
        OutsideDataRootsError: As :func:`resolve_in_roots`, or the opened file is outside the roots.
        OSError: The file cannot be opened (inside the roots only).
    """
    if mode not in ("r", "rb"):
        raise ValueError(f"open_in_roots reads only (mode 'r' or 'rb', not {mode!r})")
    real = resolve_in_roots(path, base=base, where=where)
    confinement = _roots.get()
    if confinement is None:
        return open(real, mode, **open_kwargs)
    handle = open(real, mode, **open_kwargs)
    try:
        if not _opened_inside(handle.fileno(), real, confinement):
            raise OutsideDataRootsError(where)
    except BaseException:
        handle.close()
        raise
    return handle


def _opened_inside(fd: int, real: Path, confinement: _Confinement) -> bool:
    """True if the open file ``fd`` is ``real`` and lies under the roots (no symlink swapped in meanwhile)."""
    link = f"/proc/self/fd/{fd}"
    if os.path.islink(link):
        return confinement.admits(Path(os.readlink(link)))
    try:
        now, then = os.fstat(fd), os.stat(real, follow_symlinks=False)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (then.st_dev, then.st_ino)


#: What plugins use (the plugin API, ``digits_core.PUBLIC_MODULES``); the rest serves the web server.
__all__ = [
    "OutsideDataRootsError",
    "PathOutsideRootsError",
    "check_server_path",
    "current_roots",
    "open_in_roots",
    "resolve_in_roots",
    "server_path_allowed",
]
