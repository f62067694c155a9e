"""The package layering of pyproject.toml's ``[tool.importlinter]`` contracts holds, checked by import-linter.

The repository's folders install as subpackages of one ``graymq`` namespace through an editable finder that
import-linter cannot walk, so the check runs on a copy of the tree laid out as the installed package: a
``graymq/`` folder of links to the package folders. A second run plants an upward import in that copy and must
see the contract broken, so the check cannot pass by reading nothing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIRS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
    "package-dir"]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def staged_tree(at: Path, planted: dict[str, str] | None = None) -> Path:
    """``at/graymq/<package>`` for every package folder (links; a real copy where ``planted`` adds a module, by
    its path under ``graymq/``), and the pyproject holding the contracts."""
    root = at / "graymq"
    root.mkdir()
    (root / "__init__.py").write_text("")
    planted = planted or {}
    for dotted, folder in PACKAGE_DIRS.items():
        name = dotted.removeprefix("graymq.")
        if any(path.startswith(f"{name}/") for path in planted):
            shutil.copytree(ROOT / folder, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        else:
            (root / name).symlink_to(ROOT / folder)
    (root / "jobs").symlink_to(ROOT / "jobs")
    for path, text in planted.items():
        (root / path).write_text(text)
    shutil.copy(ROOT / "pyproject.toml", at / "pyproject.toml")
    return at


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "pyproject.toml"], cwd=tree, env={"PYTHONPATH": str(tree)},
                          capture_output=True, text=True, timeout=120)


def test_every_package_is_in_the_contracts() -> None:
    contracts = (ROOT / "pyproject.toml").read_text().split("[tool.importlinter]", 1)[1]
    packages = [*PACKAGE_DIRS, "graymq.jobs"]
    assert [p for p in packages if f'"{p}"' not in contracts and f"{p} |" not in contracts
            and f"| {p}" not in contracts] == []


def test_the_layering_contracts_are_kept(tmp_path: Path) -> None:
    result = lint_imports(staged_tree(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    tree = staged_tree(tmp_path, {"core/_planted.py": "from graymq.client import Producer\n"})
    result = lint_imports(tree)
    assert result.returncode != 0
    assert "graymq.core._planted -> graymq.client" in result.stdout
