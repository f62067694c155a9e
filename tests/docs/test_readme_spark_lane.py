"""The README's Spark lane example runs as written against a recording Spark (no JVM, no cluster), and the options it
gives the source and the sink put both in lane v3."""

from __future__ import annotations

import pytest

from graymq.client.spark import SinkOptions, SourceOptions
from tests.docs.test_readme_commands import ROOT, code_block

pytestmark = pytest.mark.spark


class Recorder:
    """The builder of a read or a write, chained as Spark chains it; ``given`` the options it was given."""

    def __init__(self) -> None:
        self.given: dict[str, str] = {}
        self.started = False

    def format(self, name: str) -> Recorder:
        assert name == "graymq"
        return self

    def options(self, **options: str) -> Recorder:
        self.given.update(options)
        return self

    def option(self, key: str, value: str) -> Recorder:
        self.given[key] = value
        return self

    def start(self) -> Recorder:
        self.started = True
        return self


class RecordingSpark:
    def __init__(self) -> None:
        self.readStream, self.write = Recorder(), Recorder()
        self.registered: list[type] = []
        self.dataSource = self
        self.readStream.load = lambda: self  # type: ignore[attr-defined] - a read's frame is this Spark

    def register(self, source: type) -> None:
        self.registered.append(source)

    def selectExpr(self, *expressions: str) -> RecordingSpark:  # noqa: N802 - Spark's name
        return self

    @property
    def writeStream(self) -> Recorder:  # noqa: N802 - Spark's name
        return self.write


def test_the_spark_lane_example_reads_and_writes_in_lane_v3() -> None:
    block = code_block(ROOT / "README.md", "## Spark", language="python")
    assert '.option("lane", "v3")' in block
    spark = RecordingSpark()
    exec(compile(block, "README.md", "exec"), {"spark": spark, "ns": "http://127.0.0.1:9876"})  # noqa: S102
    assert spark.registered, "register(spark) was called"
    assert SourceOptions.parse(spark.readStream.given).in_lane == "v3"
    assert spark.write.started and SinkOptions.parse(spark.write.given).side == "v3"


def test_the_spark_writes_example_is_a_whole_program() -> None:
    """Every name it uses is imported, assigned or built in (no ``spark`` or ``ns`` to bring along), its topics are
    created and its checkpoint is a fresh temporary directory."""
    import ast
    import builtins

    block = code_block(ROOT / "README.md", "## Spark writes", language="python")
    tree = ast.parse(block)
    defined = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            defined |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    assert used <= defined, f"names the example does not define: {sorted(used - defined)}"
    assert "put_topic(topic" in block and '("ORDERS", "ORDERS_ENRICHED")' in block
    assert "tempfile.mkdtemp(" in block and "/data/" not in block
