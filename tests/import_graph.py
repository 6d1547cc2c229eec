"""The project's in-project import graph, read from the source with :mod:`ast` (nothing imported).

Every module of ``theory/``, ``simulate/``, ``verify/`` and ``figures/`` is parsed and each of
its imports of another project module is kept as an :class:`Edge` of one of three kinds:

* ``"top"``: run when the module is imported (module level, a class body, a ``try`` at module
  level);
* ``"deferred"``: inside a function, run when the function is called -- an import hidden from
  a reader of the module's head;
* ``"type"``: under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``), read by type checkers
  only.

``import a.b.c`` and ``from a.b import c`` (``c`` a module) are edges to ``a.b.c``;
``from a.b import name`` (``name`` not a module) is an edge to ``a.b``; relative imports are
resolved against the importing module's package.  A package's ``__init__`` run on the way
(``import a.b.c`` runs ``a/__init__.py``) is not counted as an edge: the graph is of the
modules a module names.

An import *circle* is a strongly connected component of more than one module in the graph of
all edges, whatever their kind (:func:`circles`): a deferred or type-only import hides a
circle from the interpreter, not from a reader.  ``python -m tests.import_graph`` prints the
circles and the deferred imports.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Edge", "PACKAGES", "ROOT", "circles", "deferred", "edges", "modules"]

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("theory", "simulate", "verify", "figures")


@dataclass(frozen=True)
class Edge:
    """One in-project import: ``source`` imports ``target`` at ``path:line``, of ``kind``."""

    source: str
    target: str
    kind: str  # "top" | "deferred" | "type"
    path: str  # relative to the repository root
    line: int

    def where(self) -> str:
        return f"{self.path}:{self.line}"


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every project module's dotted name and file (a package under its own name)."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _targets(node: ast.Import | ast.ImportFrom, module: str, path: Path, known) -> list[str]:
    """The project modules an import statement names (empty for third-party imports)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name in known]
    if node.level:
        base = _package_of(module, path).split(".")
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        stem = ".".join(base + ([node.module] if node.module else []))
    else:
        stem = node.module or ""
    out = []
    for alias in node.names:
        if f"{stem}.{alias.name}" in known:
            out.append(f"{stem}.{alias.name}")
        elif stem in known:
            out.append(stem)
    return out


def _walk(node: ast.AST, kind: str):
    """(import node, kind) for every import under ``node``, its kind set by where it sits."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, kind
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from _walk(child, "deferred" if kind == "top" else kind)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield from _walk(ast.Module(body=[stmt], type_ignores=[]), "type")
            for stmt in child.orelse:
                yield from _walk(ast.Module(body=[stmt], type_ignores=[]), kind)
        else:
            yield from _walk(child, kind)


def edges(root: Path = ROOT) -> list[Edge]:
    """Every in-project import of every project module, one edge per module named."""
    known = modules(root)
    out = []
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        rel = path.relative_to(root).as_posix()
        for node, kind in _walk(tree, "top"):
            # one edge per module a statement names (``from a import b, c`` of a module's
            # names is one edge)
            for target in dict.fromkeys(_targets(node, module, path, known)):
                if target != module:
                    out.append(Edge(module, target, kind, rel, node.lineno))
    return out


def deferred(all_edges: list[Edge]) -> list[Edge]:
    """The in-project imports made inside a function."""
    return [e for e in all_edges if e.kind == "deferred"]


def circles(all_edges: list[Edge], kinds=("top", "deferred", "type")) -> list[list[str]]:
    """The import circles (strongly connected components of more than one module, each
    sorted; largest first) of the graph of the edges of the given kinds."""
    graph: dict[str, set[str]] = {}
    for e in all_edges:
        if e.kind in kinds:
            graph.setdefault(e.source, set()).add(e.target)
            graph.setdefault(e.target, set())
    # Tarjan's algorithm, iterative (no recursion limit to meet)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
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
    return sorted(found, key=lambda c: (-len(c), c))


def report(root: Path = ROOT) -> str:
    """The circles (with the edges that close each) and the deferred imports, as text."""
    all_edges = edges(root)
    lines = []
    found = circles(all_edges)
    lines.append(f"{len(found)} import circle(s), counting deferred and type-only imports:")
    for component in found:
        members = set(component)
        lines.append(f"  {len(component)} modules: {', '.join(component)}")
        for e in sorted(all_edges, key=lambda e: (e.path, e.line)):
            if e.source in members and e.target in members:
                lines.append(f"    {e.source} -> {e.target} ({e.kind}, {e.where()})")
    hidden = deferred(all_edges)
    lines.append(f"{len(hidden)} deferred in-project import(s):")
    lines.extend(f"  {e.where()}: {e.source} -> {e.target}" for e in hidden)
    typed = [e for e in all_edges if e.kind == "type"]
    lines.append(f"{len(typed)} type-only in-project import(s):")
    lines.extend(f"  {e.where()}: {e.source} -> {e.target}" for e in typed)
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
