"""The plugin system's and job store's old flat module names still import, with a warning, until plugin API 2.0.

Our own code (core, bundled plugins, the DIGITS-6 compat layer) imports the new names only: a plugin run under
``-W error::DeprecationWarning`` must not trip over the framework.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

import digits_core
from digits_core.deprecated import DEPRECATIONS, MOVED_MODULE, MOVED_MODULES, DigitsDeprecationWarning

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_an_old_module_name_imports_the_moved_module_and_warns(old, monkeypatch):
    new = MOVED_MODULES[old]
    monkeypatch.delitem(sys.modules, old, raising=False)
    parent, _, child = old.rpartition(".")
    monkeypatch.delattr(importlib.import_module(parent), child, raising=False)
    namespace: dict = {}
    with pytest.warns(DigitsDeprecationWarning, match=rf"{old} moved to {new}.*plugin API 2\.0") as caught:
        exec(compile(f"import {old} as module", __file__, "exec"), namespace)
    module = namespace["module"]
    assert module is importlib.import_module(new), "one module object under both names (the registry is shared)"
    assert module.__name__ == new and module.__spec__.name == new
    assert caught[0].filename == __file__, "the warning names the line that imports the old name"


def test_from_the_package_import_an_old_module_name_warns_too(monkeypatch):
    monkeypatch.delitem(sys.modules, "digits_core.hookspecs", raising=False)
    monkeypatch.delattr(digits_core, "hookspecs", raising=False)
    with pytest.warns(DigitsDeprecationWarning, match="digits_core.plugins.hookspecs"):
        from digits_core import hookspecs
    assert hookspecs.hookimpl is digits_core.hookimpl


def test_the_module_moves_are_a_declared_deprecation():
    assert MOVED_MODULE in DEPRECATIONS and MOVED_MODULE.removal > digits_core.PLUGIN_API_VERSION
    for old, new in MOVED_MODULES.items():
        assert importlib.util.find_spec(new) is not None, f"{old} points at {new}, which does not exist"
        assert not (ROOT / Path(*old.split("."))).with_suffix(".py").exists(), f"{old} is still a file"


@functools.cache
def _import_nodes(path: Path) -> tuple[ast.AST, ...]:
    """The imports and attribute reads of one source file, parsed once for both source scans below."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return tuple(node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom, ast.Attribute)))


def _imported_names(path: Path, module: str) -> list[tuple[int, str]]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in _import_nodes(path):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            found += [(node.lineno, base)] + [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def test_our_own_code_imports_the_new_names_only():
    old_names = []
    for top in ("digits_core", "plugins", "compat", "tests"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if "skeletons" in path.parts or path.name == Path(__file__).name:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            old_names += [
                f"{path.relative_to(ROOT)}:{line}: {name}"
                for line, name in _imported_names(path, module)
                if any(name == old or name.startswith(old + ".") for old in MOVED_MODULES)
            ]
    assert not old_names, "imports of moved modules by their old names:\n" + "\n".join(old_names)


@pytest.mark.parametrize("name", ["train", "create_app", "JobStore", "infer"])
def test_an_application_name_at_the_top_level_warns_and_is_the_submodules(name):
    from digits_core import APPLICATION_API

    new = APPLICATION_API[name]
    with pytest.warns(
        DigitsDeprecationWarning, match=rf"digits_core\.{name} is the application API.*{new}\.{name}"
    ) as caught:
        value = getattr(digits_core, name)
    assert value is getattr(importlib.import_module(new), name)
    assert caught[0].filename == __file__, "the warning names the line that used the old name"
    assert name not in digits_core.__all__, "the plugin API's __all__ lists only what plugins use"


def test_the_application_api_moves_are_a_declared_deprecation():
    from digits_core import APPLICATION_API
    from digits_core.deprecated import MOVED_NAME

    assert MOVED_NAME in DEPRECATIONS and MOVED_NAME.removal > digits_core.PLUGIN_API_VERSION
    for name, module in APPLICATION_API.items():
        assert hasattr(importlib.import_module(module), name), f"{module} does not export {name}"


def test_our_own_code_uses_the_application_api_from_its_submodules():
    from digits_core import APPLICATION_API

    found = []
    for top in ("digits_core", "plugins", "compat", "tests", "bench", "scripts", "examples"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if "skeletons" in path.parts or "build" in path.parts:
                continue
            for node in _import_nodes(path):
                if isinstance(node, ast.ImportFrom) and node.module == "digits_core" and not node.level:
                    found += [
                        f"{path.relative_to(ROOT)}:{node.lineno}: from digits_core import {a.name}"
                        for a in node.names
                        if a.name in APPLICATION_API
                    ]
                elif (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "digits_core"
                    and node.attr in APPLICATION_API
                ):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: digits_core.{node.attr}")
    assert not found, "use the application API's submodules (digits_core.engine.train, ...):\n" + "\n".join(found)
