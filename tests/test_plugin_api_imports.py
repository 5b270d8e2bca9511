"""The plugin API is what plugins import: the bundled plugins, the DIGITS 6 adapter and the examples use no other part
of ``digits_core``.

Public means (``digits_core/__init__.py``, docs/writing-plugins.md "The plugin API"): a name in
``digits_core.__all__``; a name in the ``__all__`` of a module listed in ``digits_core.PUBLIC_MODULES``; or an
application-API name from the submodule ``digits_core.APPLICATION_API`` names for it (embedding helpers such as
``digits_data_images.numpy_arrays.build_numpy_dataset`` build datasets the way any embedding code does). Read from the
source (nothing is imported but ``digits_core`` itself); tests of the plugins are left out (they may reach further in).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import digits_core

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("plugins", "compat", "examples")


def _sources() -> list[Path]:
    found = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = path.relative_to(ROOT).parts
            if "tests" in parts or "build" in parts or any(p.startswith(".") for p in parts):
                continue
            found.append(path)
    return found


def _public(module: str, name: str | None) -> bool:
    """Whether ``from module import name`` (``name`` None: ``import module``) stays inside the public API."""
    if module == "digits_core":
        return name is None or name in digits_core.__all__
    if module in digits_core.PUBLIC_MODULES:
        return name is None or name in getattr(importlib.import_module(module), "__all__", ())
    return name is not None and digits_core.APPLICATION_API.get(name) == module


def non_public_imports(path: Path, text: str | None = None) -> list[str]:
    """``file:line: module.name`` for each import of ``digits_core`` outside the public API in one source file."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8") if text is None else text)
    for node in sorted(
        (n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))), key=lambda n: n.lineno
    ):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "digits_core" or node.module.startswith("digits_core."):
                found += [
                    f"{path.relative_to(ROOT)}:{node.lineno}: {node.module}.{alias.name}"
                    for alias in node.names
                    if not _public(node.module, alias.name)
                ]
        elif isinstance(node, ast.Import):
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno}: {alias.name}"
                for alias in node.names
                if alias.name.startswith("digits_core.") and not _public(alias.name, None)
            ]
    return found


def test_plugins_the_adapter_and_the_examples_import_only_the_plugin_api():
    sources = _sources()
    assert len(sources) > 50, "the scan found the plugin sources"
    outside = [line for path in sources for line in non_public_imports(path)]
    assert not outside, (
        "imports of digits_core outside the plugin API (use a name in digits_core.__all__ or in a "
        "PUBLIC_MODULES module's __all__, or make the name public and document it):\n" + "\n".join(outside)
    )


def test_the_scan_sees_imports_outside_the_plugin_api():
    source = (
        "from digits_core import DataIngestion, case_metrics\n"
        "from digits_core.paths import check_server_path\n"
        "from digits_core.paths import confined_to\n"  # in the module, not in its __all__
        "from digits_core.datasets import create_dataset\n"  # the application API from its submodule: allowed
        "from digits_core.datasets.records import pack_record\n"
        "import digits_core.jobs.store\n"
        "import digits_core.outbound\n"
        "def f():\n    from digits_core.engine.options import TrainingOptions\n"
    )
    found = non_public_imports(ROOT / "plugins" / "probe.py", source)
    assert [line.split(": ", 1)[1] for line in found] == [
        "digits_core.paths.confined_to",
        "digits_core.datasets.records.pack_record",
        "digits_core.jobs.store",
        "digits_core.engine.options.TrainingOptions",
    ]


def test_every_public_module_declares_its_names_is_documented_and_strictly_typed():
    guide = (ROOT / "docs" / "writing-plugins.md").read_text(encoding="utf-8")
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    strict = pyproject.split("disallow_untyped_defs = true")[0]  # the strict list comes first
    for module in digits_core.PUBLIC_MODULES:
        names = getattr(importlib.import_module(module), "__all__", None)
        assert names, f"{module} declares its public names in __all__"
        assert all(hasattr(importlib.import_module(module), n) for n in names), module
        assert f"`{module}`" in guide, f"docs/writing-plugins.md documents {module}"
        assert f'"{module}"' in strict, f"{module} is in pyproject.toml's strict mypy list"
