"""Shape limits a reader can rely on: no function over 60 lines, no client class taking over 12 parameters
(a longer list wants a settings object).

Checked: every package (pyproject's package-dir) and jobs/. Left out: migrations/ (Alembic revisions, one function
per schema step), tests/ and generated protobuf/gRPC modules.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = sorted(({*tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].values()}
                  - {"migrations"}) | {"jobs"})
MAX_LINES = 60
MAX_CLIENT_PARAMETERS = 12


def source_files(folder: str) -> Iterator[Path]:
    for path in sorted((ROOT / folder).rglob("*.py")):
        if not path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
            yield path


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function with its qualified name (``Class.method``, ``outer.inner``)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + node.name, node
            yield from functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")
        else:
            yield from functions(node, prefix)


def long_functions() -> dict[str, int]:
    """``path::qualified name`` -> lines, for every function over the limit."""
    found = {}
    for folder in FOLDERS:
        for path in source_files(folder):
            for name, node in functions(ast.parse(path.read_text(), str(path))):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_LINES:
                    found[f"{path.relative_to(ROOT)}::{name}"] = lines
    return found


def parameter_count(init: ast.FunctionDef) -> int:
    args = init.args
    named = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    return len(named) - 1 + (args.vararg is not None) + (args.kwarg is not None)  # less self


def wide_client_classes() -> dict[str, int]:
    """``path::class`` -> parameters of its ``__init__`` (``self`` not counted), for every one over the limit."""
    found = {}
    for path in source_files("client"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ClassDef):
                continue
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    count = parameter_count(item)
                    if count > MAX_CLIENT_PARAMETERS:
                        found[f"{path.relative_to(ROOT)}::{node.name}"] = count
    return found


@pytest.mark.unit
def test_function_names_are_qualified() -> None:
    tree = ast.parse("class A:\n    def f(self):\n        def g():\n            pass\n")
    assert [name for name, _ in functions(tree)] == ["A.f", "A.f.g"]


@pytest.mark.unit
def test_no_function_over_60_lines() -> None:
    found = long_functions()
    assert found == {}, f"functions over {MAX_LINES} lines (split them into named steps): {found}"


@pytest.mark.unit
def test_no_client_init_over_12_parameters() -> None:
    found = wide_client_classes()
    assert found == {}, f"client classes whose __init__ takes over {MAX_CLIENT_PARAMETERS} parameters: {found}"
