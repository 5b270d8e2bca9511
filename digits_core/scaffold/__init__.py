"""Generate the skeleton of a new plugin package (``digits plugin new``).

The skeletons live as package data in ``digits_core/scaffold/skeletons/<kind>/``.
Every file there is copied into the new package with these placeholders
replaced, in file contents and in file and folder names:

==================== ===================================== ==========================
placeholder          meaning                               e.g. for ``new data my-dicom``
==================== ===================================== ==========================
``@@PLUGIN_ID@@``    plugin id and entry-point name         ``my-dicom``
``@@DISTRIBUTION@@`` pip distribution name                  ``digits-data-my-dicom``
``@@PACKAGE@@``      import package                         ``digits_data_my_dicom``
``@@CLASS_NAME@@``   the plugin class                       ``MyDicomIngestion``
``@@TITLE@@``        human-readable title                   ``My dicom``
``@@CORE_VERSION@@`` lowest digits-core version required    ``0.1.0``
``@@NETWORK_NAME@@`` network name (``network`` kind)        ``my_dicom``
==================== ===================================== ==========================

A trailing ``.tmpl`` is dropped from file names (so that skeleton Python
files are not taken for modules of ``digits_core``).

The generated package installs with pip and is listed by ``digits plugins``
without edits; a data plugin builds a real dataset (a folder of images and a
CSV of labels), a view plugin shows the top classes of a classifier, a network
plugin registers a small convolutional network (``digits plugin check`` passes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import ConfigurationError
from ..interfaces import PLUGIN_ID_PATTERN

#: Plugin kinds ``digits plugin new`` can generate.
KINDS = ("data", "view", "network")
_CLASS_SUFFIX = {"data": "Ingestion", "view": "View", "network": "Network"}
_TEMPLATE_SUFFIX = ".tmpl"
#: Characters a title may not contain (it is pasted into Python, TOML and Jinja2/HTML sources).
_UNSAFE_TITLE = re.compile(r'["\\{}<>%\x00-\x1f]')


@dataclass(frozen=True)
class PluginNames:
    """The names a new plugin package uses, derived from its id.

    Attributes:
        kind: ``"data"`` or ``"view"``.
        plugin_id: Plugin id and entry-point name (``my-dicom``).
        distribution: pip distribution name (``digits-data-my-dicom``).
        package: Import package (``digits_data_my_dicom``).
        class_name: Name of the plugin class (``MyDicomIngestion``).
        title: Human-readable title (``My dicom``).
    """

    kind: str
    plugin_id: str
    distribution: str
    package: str
    class_name: str
    title: str

    def placeholders(self) -> dict[str, str]:
        """Return the placeholder → value mapping used to fill the skeleton."""
        from .. import __version__

        return {
            "@@PLUGIN_ID@@": self.plugin_id,
            "@@DISTRIBUTION@@": self.distribution,
            "@@PACKAGE@@": self.package,
            "@@CLASS_NAME@@": self.class_name,
            "@@TITLE@@": self.title,
            "@@CORE_VERSION@@": __version__,
            "@@NETWORK_NAME@@": self.plugin_id.replace("-", "_"),
        }


def plugin_names(kind: str, name: str, title: str | None = None) -> PluginNames:
    """Derive the names of a new plugin from its kind and id.

    Args:
        kind: ``"data"``, ``"view"`` or ``"network"``.
        name: The plugin id: lower-case letters, digits, ``-`` and ``_``,
            starting with a letter or digit (``my-dicom``).
        title: Title shown in menus; defaults to the id in words. It may
            not contain ``" \\ { } < > %`` or line breaks.

    Returns:
        The :class:`PluginNames`.

    Raises:
        ConfigurationError: Unknown kind, malformed id or unsafe title.
    """
    if kind not in KINDS:
        raise ConfigurationError(f"Unknown plugin kind {kind!r}: choose one of {', '.join(KINDS)}.")
    if not PLUGIN_ID_PATTERN.match(name or ""):
        suggestion = re.sub(r"[^a-z0-9_-]+", "-", (name or "").strip().lower()).strip("-_") or "my-plugin"
        raise ConfigurationError(
            f"Invalid plugin name {name!r}: a plugin id uses lower-case letters, digits, '-' and '_' "
            f"and starts with a letter or digit (try {suggestion!r})."
        )
    if title is not None and (not title.strip() or _UNSAFE_TITLE.search(title)):
        raise ConfigurationError(
            f"Invalid title {title!r}: it is written into Python, TOML and HTML files, so it must be "
            'non-empty and free of the characters " \\ { } < > % and line breaks.'
        )
    words = [w for w in re.split(r"[-_]+", name) if w]
    class_name = "".join(w.capitalize() for w in words) + _CLASS_SUFFIX[kind]
    if not class_name.isidentifier():  # an id starting with a digit
        class_name = "Plugin" + class_name
    return PluginNames(
        kind=kind,
        plugin_id=name,
        distribution=f"digits-{kind}-{name.replace('_', '-')}",
        package=f"digits_{kind}_{name.replace('-', '_')}",
        class_name=class_name,
        title=title or " ".join(words).capitalize(),
    )


def _skeleton_files(kind: str):
    """Yield ``(relative path parts, text)`` of every skeleton file of ``kind``."""
    root = resources.files(__name__).joinpath("skeletons", kind)

    def walk(node, parts):
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.name == "__pycache__":
                continue
            if child.is_dir():
                yield from walk(child, parts + [child.name])
            else:
                yield parts + [child.name], child.read_text(encoding="utf-8")

    yield from walk(root, [])


def _fill(text: str, values: dict[str, str]) -> str:
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return text


def create_plugin(kind: str, name: str, directory: str | Path = ".", *, title: str | None = None) -> Path:
    """Write a new, working plugin package.

    Creates ``<directory>/<distribution>/`` with a ``pyproject.toml``
    declaring the entry point, the plugin class, its WTForms form, its
    Jinja2 templates, a README and a pytest test file.

    Args:
        kind: ``"data"`` (a :class:`~digits_core.DataIngestion`) or
            ``"view"`` (a :class:`~digits_core.View`).
        name: The plugin id (``my-dicom``).
        directory: Folder in which the package folder is created.
        title: Title shown in menus (defaults to the id in words).

    Returns:
        The path of the new package folder.

    Raises:
        ConfigurationError: Bad kind or name, or the package folder
            already exists and is not empty.
    """
    names = plugin_names(kind, name, title)
    target = Path(directory).expanduser().resolve() / names.distribution
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ConfigurationError(
            f"{target} already exists and is not empty; choose another name or --dir, or remove it first."
        )
    values = names.placeholders()
    files = list(_skeleton_files(kind))
    try:
        for parts, text in files:
            parts = [_fill(p, values) for p in parts]
            if parts[-1].endswith(_TEMPLATE_SUFFIX):
                parts[-1] = parts[-1][: -len(_TEMPLATE_SUFFIX)]
            path = target.joinpath(*parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(_fill(text, values), encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"Cannot write the plugin package in {target}: {exc}") from exc
    return target


__all__ = ["KINDS", "PluginNames", "plugin_names", "create_plugin"]
