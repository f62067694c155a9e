"""The wheel installs one ``graymq`` namespace, and the client library needs no server or Spark extras."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


def test_every_package_folder_is_listed_under_the_graymq_namespace() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    for top, folder in config["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            found.add(".".join([top, *relative.parts]))
    data_only = set(config["package-data"]) - found  # folders of package data only (templates, .proto files)
    assert found | data_only == listed


def test_the_wheel_holds_only_graymq_and_its_dist_info_and_builds_without_a_warning(tmp_path: Path) -> None:
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--verbose", "--no-deps", "--wheel-dir",
                            str(tmp_path), str(ROOT)], check=True, capture_output=True, text=True, timeout=300)
    assert "BuildBackendWarning" not in build.stdout + build.stderr
    assert "SetuptoolsDeprecationWarning" not in build.stdout + build.stderr
    [wheel] = tmp_path.glob("graymq-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"graymq", next(t for t in tops if t.endswith(".dist-info"))}
    assert "graymq/client/producer.py" in names
    assert "graymq/protocol/proto/graymq.proto" in names
    assert "graymq/migrations/alembic.ini" in names
    # the compiled hot path: its extension, not its sources
    assert any(n.startswith("graymq/protocol/_speedups.") and n.endswith(".so") for n in names)
    assert not [n for n in names if n.endswith((".c", ".pyx"))]


def test_the_client_library_imports_without_server_or_spark_packages() -> None:
    blocker = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in {'fastapi', 'sqlalchemy', 'uvicorn', 'psycopg', 'alembic', 'pyspark',\n"
        "                                  'pyarrow', 'pydantic_settings', 'starlette', 'prometheus_client'}:\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import graymq.client, graymq.client.sync, graymq.protocol\n"
        "from graymq.client import Producer, PushConsumer, PullConsumer, Message\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True, timeout=60, cwd="/")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
