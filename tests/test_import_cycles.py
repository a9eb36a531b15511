"""No import cycles among conveyor's modules.

Every ``import`` statement in a module counts, wherever it is: at the top, inside a
function, or under ``if TYPE_CHECKING``. A lazy import keeps a circle from failing at
import time; it does not keep the two modules from depending on each other, which is
what this test is about. ``import a.b.c`` and ``from a.b import c`` depend on module
``a.b.c`` (or its nearest enclosing module that exists), not on the packages above it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import conveyor

ROOT = Path(conveyor.__file__).resolve().parent.parent

# Known cycles, each listed in full, with why it is still here. A new cycle fails, and so
# does a known one that grows or goes away (then delete it here): nothing passes unseen.
KNOWN_CYCLES: set[frozenset[str]] = set()


def modules() -> dict[str, tuple[Path, bool]]:
    """Every conveyor module by dotted name -> (file, whether it is a package)."""
    found = {}
    for path in sorted((ROOT / "conveyor").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts.pop()
        found[".".join(parts)] = (path, package)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the conveyor modules it imports."""
    known = modules()

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, (path, package) in known.items():
        here = name if package else name.rpartition(".")[0]
        targets: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: from the package `level - 1` steps up
                    base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                # `from pkg import sub` imports the submodule when there is one.
                targets += [
                    f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                    for alias in node.names
                ]
        graph[name] = {t for t in map(resolve, targets) if t is not None and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]


def test_the_graph_sees_relative_lazy_and_type_checking_imports() -> None:
    graph = import_graph()
    # A sample of edges of each kind, so a resolver that misses one kind cannot pass.
    assert "conveyor.server.http.connection" in graph["conveyor.server.metrics_port"]
    assert "conveyor.examples" in graph["conveyor.engine.engine"]  # lazy
    assert "conveyor.engine.stats" in graph["conveyor.server.metrics"]  # TYPE_CHECKING


def test_conveyor_has_no_import_cycles_but_the_known_ones() -> None:
    found = set(cycles(import_graph()))
    new = [sorted(c) for c in found - KNOWN_CYCLES]
    gone = [sorted(c) for c in KNOWN_CYCLES - found]
    assert new == [], f"import cycles: {new}"
    assert gone == [], f"known cycles changed or went away, update KNOWN_CYCLES: {gone}"
