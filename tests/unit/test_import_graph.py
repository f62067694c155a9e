"""No import cycle: neither between the top-level packages nor among the modules of one package.

Every module is parsed, not imported: ``import graymq.x``, ``from graymq.x import y`` (``y`` a module or a name)
and relative imports all count, those under ``if TYPE_CHECKING:`` and inside functions included — a cycle that
only type checkers or a late import see is still a circle a reader has to walk. Importing ``a.b.c`` counts as an
edge to ``a.b.c`` alone, not to the packages ``a`` and ``a.b`` whose ``__init__`` runs first: a package that
re-exports its modules would otherwise be in a cycle with each of them.
"""

from __future__ import annotations

import ast
import functools
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# every installed package (pyproject's package-dir) and the example jobs
PACKAGES = sorted({folder for folder in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
    "package-dir"].values()} | {"jobs"})
# Imports no parser sees, each with what it may load: they must stay inside their own package.
DYNAMIC_IMPORTS = {
    "gray_controller/cli/__init__.py": "graymq.gray_controller.cli.<command module>, one per CLI command",
    "bench/latency.py": "graymq.bench.<system module> in the latency part's child processes (bench_client, ...)",
}

Graph = dict[str, set[str]]


def module_name(path: Path) -> str:
    parts = ["graymq", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_files() -> dict[str, Path]:
    """Every module of the packages, by dotted name (``graymq.broker_ext.store`` for its ``__init__.py``)."""
    return {module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> Iterator[str]:
    """The dotted names one import statement may bind: its module, and ``module.name`` for each name taken."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:
        anchor = module.split(".")
        anchor = anchor[:len(anchor) - node.level + (1 if is_package else 0)]
        base = ".".join([*anchor, base] if base else anchor)
    yield base
    yield from (f"{base}.{alias.name}" for alias in node.names)


@functools.cache
def import_graph() -> Graph:
    """Module -> the project's modules it imports (parsed once for all the tests here)."""
    files = module_files()
    graph: Graph = {}
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                targets.update(name for name in imported(node, module, is_package) if name in files)
        targets.discard(module)
        graph[module] = targets
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """One cycle per strongly connected component of two or more nodes (Tarjan), each as a path back to its
    start, e.g. ``[a, b, a]``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [cycle_in(graph, component) for component in components]


def cycle_in(graph: Graph, component: set[str]) -> list[str]:
    """A shortest cycle through the component's first node (breadth first inside the component)."""
    start = min(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node] & component):
                if target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if target not in came_from:
                    came_from[target] = node
                    following.append(target)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # a strongly connected component always has one


def package_of(module: str) -> str:
    return module.split(".")[1]


def package_graph(graph: Graph) -> Graph:
    """Top-level package -> the packages its modules import."""
    packages: Graph = {package: set() for package in PACKAGES}
    for module, targets in graph.items():
        packages[package_of(module)].update(package_of(t) for t in targets if package_of(t) != package_of(module))
    return packages


def named(cycle: list[str]) -> str:
    return " -> ".join(cycle)


@pytest.mark.unit
def test_the_cycle_finder_names_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.unit
def test_relative_imports_resolve_against_the_module_or_package() -> None:
    node = ast.parse("from .store import commitlog").body[0]
    assert isinstance(node, ast.ImportFrom)
    assert list(imported(node, "graymq.broker_ext.x", False)) == ["graymq.broker_ext.store",
                                                                  "graymq.broker_ext.store.commitlog"]
    assert list(imported(node, "graymq.broker_ext", True))[0] == "graymq.broker_ext.store"


@pytest.mark.unit
def test_no_cycle_between_top_level_packages() -> None:
    found = cycles(package_graph(import_graph()))
    assert not found, "import cycle between packages: " + "; ".join(named(c) for c in found)


@pytest.mark.unit
@pytest.mark.parametrize("package", PACKAGES)
def test_no_cycle_among_the_modules_of_a_package(package: str) -> None:
    graph = import_graph()
    inside = {m: {t for t in targets if package_of(t) == package}
              for m, targets in graph.items() if package_of(m) == package}
    found = cycles(inside)
    assert not found, f"import cycle inside {package}: " + "; ".join(named(c) for c in found)


@pytest.mark.unit
def test_every_dynamic_import_is_listed() -> None:
    """``import_module`` and ``__import__`` hide an edge from every graph: each use is listed with what it loads."""
    dynamic = re.compile(r"\bimport_module\(|\b__import__\(")
    found = {str(path.relative_to(ROOT)) for package in PACKAGES for path in (ROOT / package).rglob("*.py")
             if dynamic.search(path.read_text())}
    assert found == set(DYNAMIC_IMPORTS)
