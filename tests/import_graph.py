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
    found = {}
    for path in sorted((root / "digits_core").rglob("*.py")):
        if "skeletons" in path.parts:
            continue
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: dict) -> list[str]:
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
        if name != "digits_core" and not name.startswith("digits_core."):
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
    known = module_files(root)
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
                    targets = _targets(child, module, is_package, known)
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
