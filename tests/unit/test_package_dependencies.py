"""The package layering of DESIGN §2: runbooks depend only on client and protocol,
and no package but the CLI reaches into gray_controller."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def imported_packages(folder: str) -> dict[str, set[str]]:
    """`graymq.<package>` names imported by each module of `folder` (absolute imports only)."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            modules = []
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            names.update(m.split(".")[1] for m in modules if m.startswith("graymq."))
        found[str(path.relative_to(ROOT))] = names
    return found


@pytest.mark.unit
def test_runbooks_import_only_client_and_protocol() -> None:
    allowed = {"client", "protocol", "runbooks"}
    offenders = {mod: names - allowed for mod, names in imported_packages("runbooks").items()}
    assert {mod: names for mod, names in offenders.items() if names} == {}


@pytest.mark.unit
@pytest.mark.parametrize("folder", ["nameserver", "client", "broker_ext", "protocol", "runbooks"])
def test_only_the_cli_imports_gray_controller(folder: str) -> None:
    offenders = [mod for mod, names in imported_packages(folder).items() if "gray_controller" in names]
    assert offenders == []
