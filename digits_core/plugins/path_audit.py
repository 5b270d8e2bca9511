"""Which files a data plugin reads during ``digits plugin check``, compared with the check's data roots.

The web server confines every path a job reads to its data roots through one
gate (:mod:`digits_core.paths`). A plugin that opens a path from a list file
or a CSV row without passing it through :func:`~digits_core.paths.resolve_in_roots`
/ :func:`~digits_core.paths.open_in_roots` would read outside them. The check
runs ``itemize_entries`` and ``encode_entry`` confined to the data roots (a
gated path outside them is refused, so it is never opened) while a Python
audit hook (:func:`sys.addaudithook`, PEP 578) notes every file opened for
reading; a file outside the roots that was opened anyway did not pass the
gate, and the check warns, naming it. Files of Python itself and of installed
packages (imports, codecs' tables) are not data and are left out.

The hook is installed once per process, on the first check, and costs one
list test per ``open`` while no check runs.
"""

from __future__ import annotations

import contextlib
import os
import site
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

_RECORDING: list[list[str]] = []
_HOOK_INSTALLED: list[bool] = []
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND
#: Files the import system reads (a module imported during the check is not a data file).
_CODE_SUFFIXES = {".py", ".pyc", ".pyd", ".so", ".pth"}


def _on_audit_event(event: str, args: tuple) -> None:
    if event != "open" or not _RECORDING:
        return
    path, mode, flags = args
    if isinstance(path, int) or path is None:
        return
    writing = (flags or 0) & _WRITE_FLAGS if mode is None else any(c in str(mode) for c in "wax+")
    if not writing:
        _RECORDING[-1].append(os.fsdecode(path))


@contextlib.contextmanager
def recording_reads() -> Iterator[list[str]]:
    """Collect the paths opened for reading (by any code of this process) inside the ``with`` block."""
    if not _HOOK_INSTALLED:
        sys.addaudithook(_on_audit_event)
        _HOOK_INSTALLED.append(True)
    opened: list[str] = []
    _RECORDING.append(opened)
    try:
        yield opened
    finally:
        _RECORDING.remove(opened)


def _system_folders() -> tuple[Path, ...]:
    """Python, installed packages and the import path (an editable plugin's own files), /proc and friends."""
    cwd = os.getcwd()
    imports = [p for p in sys.path if p and os.path.isdir(p) and os.path.realpath(p) != os.path.realpath(cwd)]
    folders = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        *site.getsitepackages(),
        site.getusersitepackages(),
        *imports,
        "/proc",
        "/sys",
        "/dev",
        "/etc/ssl",
        "/usr/share/zoneinfo",
    }
    return tuple(Path(os.path.realpath(f)) for f in folders if f)


def _code_folders(plugin_class: type | None) -> list[Path]:
    """The folders of the core's and the plugin's own package (their templates and data files are not inputs)."""
    folders = [Path(__file__).parent]
    module = sys.modules.get(getattr(plugin_class, "__module__", "") or "")
    if module is not None and getattr(module, "__file__", None):
        folders.append(Path(str(module.__file__)).parent)
    return folders


def gate_warning(
    plugin_id: str, opened: Iterable[str], roots: Iterable[Path], plugin_class: type | None = None
) -> str | None:
    """The check's warning when the plugin read data files outside ``roots`` (it did not gate them), else ``None``."""
    roots = list(roots)
    outside = reads_outside(opened, [*roots, *_code_folders(plugin_class)])
    if not outside:
        return None
    shown = ", ".join(outside[:3]) + (f" and {len(outside) - 3} more" if len(outside) > 3 else "")
    return (
        f"plugin {plugin_id} opened {len(outside)} file(s) outside the data roots of the check "
        f"({', '.join(map(str, roots))}) without passing them through digits_core.paths: {shown}. On the web "
        "server that reads outside its data roots: resolve each path read from a file or form with "
        "resolve_in_roots (or open it with open_in_roots)"
    )


def reads_outside(opened: Iterable[str], roots: Iterable[Path]) -> list[str]:
    """The opened data files (symlinks followed) outside every root, in the order first opened."""
    roots = tuple(Path(os.path.realpath(r)) for r in roots)
    ignored = _system_folders()
    outside: list[str] = []
    for path in opened:
        real = Path(os.path.realpath(os.path.abspath(path)))
        if (
            real.suffix in _CODE_SUFFIXES
            or not real.is_file()
            or any(real == r or r in real.parents for r in roots + ignored)
        ):
            continue
        if str(real) not in outside:
            outside.append(str(real))
    return outside


__all__ = ["gate_warning", "reads_outside", "recording_reads"]
