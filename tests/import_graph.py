"""The import graph of ``digits_core`` read from its source (no imports run): for tests/test_layers.py."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class ImportEdge:
    """One ``import`` of a ``digits_core`` module by another."""

    source: str  # the importing module
    target: str  # the imported module (the deepest existing module the statement names)
    line: int
    function_level: bool  # inside a function (runs on call, not on import)


@dataclass(frozen=True)
class FunctionImport:
    """One import statement inside a function, with the comment that explains it (if any)."""

    module: str
    line: int
    text: str
    imported: str  # the top-level package name, or the digits_core module
    reason: str  # the comment on the line or on the line just above; "" when none


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """``digits_core`` module name -> file (the scaffold's skeleton templates are not modules)."""
    return package_modules(root / "digits_core")


def package_modules(folder: Path) -> dict[str, Path]:
    """Module name -> file for the package in ``folder`` (its name is the folder's); skeletons and tests left out."""
    found = {}
    for path in sorted(folder.rglob("*.py")):
        if "skeletons" in path.parts or "tests" in path.relative_to(folder).parts:
            continue
        parts = list(path.relative_to(folder.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def plugin_packages(root: Path = ROOT) -> dict[str, Path]:
    """The import packages of the bundled plugins, the DIGITS 6 adapter and the examples: name -> folder."""
    folders = [*(root / "plugins").glob("*/*/__init__.py"), *(root / "compat").glob("*/*/__init__.py")]
    folders += (root / "examples").glob("*/*/__init__.py")
    return {init.parent.name: init.parent for init in sorted(folders) if "tests" not in init.parts}


def read_package_graph(folder: Path) -> list[ImportEdge]:
    """Every import between the modules of the package in ``folder`` (as :func:`read_graph` for ``digits_core``)."""
    edges, _ = _read(package_modules(folder), folder.name)
    return edges


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: dict, top: str) -> list[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = module if is_package else module.rpartition(".")[0]
        if node.level:
            parts = base.split(".")
            base = ".".join(parts[: len(parts) - (node.level - 1)])
            target = f"{base}.{node.module}" if node.module else base
        else:
            target = node.module or ""
        names = [f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target for alias in node.names]
    out = []
    for name in names:
        if name != top and not name.startswith(top + "."):
            continue
        while name not in known and "." in name:
            name = name.rpartition(".")[0]
        out.append(name)
    return out


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def read_graph(root: Path = ROOT) -> tuple[list[ImportEdge], list[FunctionImport]]:
    """Every import between ``digits_core`` modules, and every import statement inside a function.

    Imports under ``if TYPE_CHECKING:`` are left out (they never run).
    """
    return _read(module_files(root), "digits_core")


def _read(known: dict[str, Path], top: str) -> tuple[list[ImportEdge], list[FunctionImport]]:
    edges: list[ImportEdge] = []
    function_imports: list[FunctionImport] = []
    for module, path in known.items():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        is_package = path.name == "__init__.py"

        def visit(node: ast.AST, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and _is_type_checking(child):
                    continue
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    targets = _targets(child, module, is_package, known, top)
                    for target in targets:
                        if target != module:
                            edges.append(ImportEdge(module, target, child.lineno, in_function))
                    if in_function:
                        line = lines[child.lineno - 1]
                        above = lines[child.lineno - 2].strip() if child.lineno > 1 else ""
                        reason = line.partition("#")[2].strip() or (above[1:].strip() if above.startswith("#") else "")
                        first = child.names[0].name if isinstance(child, ast.Import) else (child.module or "")
                        imported = targets[0] if targets else first.split(".")[0]
                        function_imports.append(FunctionImport(module, child.lineno, line.strip(), imported, reason))
                    continue
                visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        visit(ast.parse(text), False)
    return edges, function_imports


def cycles(edges: list[ImportEdge]) -> list[list[str]]:
    """The import cycles: strongly connected components of more than one module (Tarjan), sorted."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:  # recursion depth is bounded by the module count (a few hundred)
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(found)
