"""``digits plugin wrap-digits6 PATH``: make a DIGITS 6 built-in extension folder an installable plugin.

DIGITS 6's built-in views (``digits/extensions/view/imageSegmentation``,
``rawData``, ``boundingBox``, ``imageOutput``) and data extensions lived
inside the ``digits`` package: no ``setup.py``, and ``from ..interface
import VisualizationInterface``. :func:`wrap_digits6` copies such a folder
into a new distribution folder, writes the ``setup.py`` (with the entry
point of the class that subclasses the interface, and every template and
static file as package data) and turns the relative ``..interface`` import
into ``digits.extensions.<kind>.interface`` (what ``digits6-compat``
provides). Nothing else in the copy changes; the original folder is not
touched.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path
from typing import NamedTuple

from ..errors import DigitsError

#: Interface class name -> (plugin kind, compat module).
INTERFACES = {
    "VisualizationInterface": ("view", "digits.extensions.view.interface"),
    "DataIngestionInterface": ("data", "digits.extensions.data.interface"),
}
INTERFACES_BY_KIND = {kind: module for kind, module in INTERFACES.values()}
_RELATIVE_INTERFACE = re.compile(r"^(\s*from\s+)\.\.interface(\s+import\b)", re.M)

SETUP_PY = """\
# Written by `digits plugin wrap-digits6` for the DIGITS 6 built-in {kind} "{package}".
from setuptools import setup

from digits.extensions.{kind} import GROUP

setup(
    name="{distribution}",
    version="0.0.1",
    description="DIGITS 6 built-in {kind} {package}, packaged for DIGITS Core (digits6-compat)",
    packages=["{package}"],
    package_data={{"{package}": {data_files!r}}},
    entry_points={{GROUP: ["class={package}.{module}:{cls}"]}},
)
"""


class Wrapped(NamedTuple):
    """What :func:`wrap_digits6` wrote."""

    folder: Path  #: the new distribution folder (``pip install --no-build-isolation FOLDER``)
    distribution: str
    kind: str  #: ``view`` or ``data``
    entry_point: str  #: ``package.module:Class``
    plugin_id: str | None  #: what ``get_id()`` returns, when it is a literal
    fixed_imports: list[str]  #: the files whose ``from ..interface import`` was rewritten


def _plugin_class(package: Path) -> tuple[str, str, str, str | None]:
    """``(kind, module, class name, plugin id or None)`` of the class subclassing a DIGITS 6 interface."""
    found = []
    for path in sorted(package.glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        except SyntaxError as exc:
            raise DigitsError(
                f"{path}: line {exc.lineno}: {exc.msg} (make the Python 3 fixes first: print(), range, except E as e)"
            ) from None
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
            for interface, (kind, _module) in INTERFACES.items():
                if interface in bases:
                    found.append((kind, path.stem, node.name, _literal_id(node)))
    if len(found) != 1:
        names = ", ".join(f"{m}.{c}" for _k, m, c, _i in found) or "none"
        raise DigitsError(
            f"{package}: expected one class subclassing VisualizationInterface or DataIngestionInterface, found {names}"
        )
    return found[0]


def _literal_id(node: ast.ClassDef) -> str | None:
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "get_id":
            for statement in ast.walk(item):
                if isinstance(statement, ast.Return) and isinstance(statement.value, ast.Constant):
                    return str(statement.value.value)
    return None


def distribution_name(package: str, kind: str) -> str:
    """``imageSegmentation`` -> ``digits6-view-image-segmentation``."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", package).replace("_", "-").lower()
    return f"digits6-{kind}-{words}"


def wrap_digits6(path: str | Path, out_dir: str | Path = ".") -> Wrapped:
    """Copy the DIGITS 6 extension folder ``path`` into ``out_dir/<distribution>/`` with a ``setup.py``.

    A folder without ``__init__.py`` gets one in the copy, importing the class.

    Raises:
        DigitsError: ``path`` holds no Python module, no (or several)
            plugin classes, or the target folder exists.
    """
    source = Path(path).resolve()
    if not source.is_dir() or not any(source.glob("*.py")):
        raise DigitsError(f"{source} is not a DIGITS 6 extension folder (it has no Python module)")
    kind, module, cls, plugin_id = _plugin_class(source)
    distribution = distribution_name(source.name, kind)
    target = Path(out_dir).resolve() / distribution
    if target.exists():
        raise DigitsError(f"{target} exists already; remove it or choose another --dir")
    package = target / source.name
    shutil.copytree(source, package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if not (package / "__init__.py").exists():  # the folder was a package of digits/extensions only
        (package / "__init__.py").write_text(
            f"from .{module} import {cls}  # written by wrap-digits6\n", encoding="utf-8"
        )
    fixed = []
    for py in sorted(package.rglob("*.py")):
        text = py.read_text(encoding="utf-8")
        new = _RELATIVE_INTERFACE.sub(rf"\g<1>{INTERFACES_BY_KIND[kind]}\g<2>", text)
        if new != text:
            py.write_text(new, encoding="utf-8")
            fixed.append(str(py.relative_to(target)))
    data_files = sorted(
        str(p.relative_to(package)) for p in package.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")
    )
    (target / "setup.py").write_text(
        SETUP_PY.format(
            kind=kind, package=source.name, distribution=distribution, data_files=data_files, module=module, cls=cls
        ),
        encoding="utf-8",
    )
    return Wrapped(target, distribution, kind, f"{source.name}.{module}:{cls}", plugin_id, fixed)
