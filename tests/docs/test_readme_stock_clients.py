"""The README's *Stock RocketMQ clients* runs as written: its commands in a fresh directory (a cluster of its own
with the gRPC endpoint on 8081), its Python and Node.js examples saved beside them, as a reader would."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.test_readme_commands import (
    README_GROUP,
    ROOT,
    bash_block,
    code_block,
    require_readme_ports_free,
    run_block,
)

pytestmark = [pytest.mark.e2e, README_GROUP]

HEADING = "## Stock RocketMQ clients"


def test_the_stock_clients_examples_run_as_written(tmp_path: Path) -> None:
    readme = ROOT / "README.md"
    (tmp_path / "stock_clients.py").write_text(code_block(readme, HEADING, language="python"))
    (tmp_path / "stock_clients.js").write_text(code_block(readme, HEADING, language="javascript"))
    require_readme_ports_free()
    output = run_block(tmp_path, bash_block(readme, HEADING), timeout=300)

    assert len(re.findall(r"^sent \w+$", output, re.M)) == 2, output[-4000:]
    # the Python SDK's consumer gets its own message; the Node.js SDK's, in a new group, both
    assert len(re.findall(r"^received order-1 paid paid eu$", output, re.M)) == 2, output[-4000:]
    assert len(re.findall(r"^received order-2 paid paid us$", output, re.M)) == 1, output[-4000:]
