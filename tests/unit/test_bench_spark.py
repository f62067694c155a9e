"""The bench's Spark part: source and sink side by side in RESULTS.md, one line when it cannot run, and part of
``python -m graymq.bench`` with no arguments."""

from __future__ import annotations

import shutil

import pytest

from graymq.bench import bench_spark
from graymq.bench.runner import PARTS, Results, fmt, render, table

pytestmark = pytest.mark.unit


def test_the_default_run_has_the_spark_part() -> None:
    assert "spark" in PARTS


def test_source_and_sink_are_rendered_side_by_side() -> None:
    medians = {bench_spark.READ_CASE: {"rows_s": 41_000.0, "mib_s": 40.0, "seconds": 0.49},
               bench_spark.WRITE_CASE: {"rows_s": 23_500.0, "mib_s": 22.9, "seconds": 0.85}}
    lines = bench_spark.render(medians, bench_spark.Settings(count=20_000), table, fmt, None)
    text = "\n".join(lines)
    assert "| graymq → Spark (source, batch read) | 41,000 | 40.00 |" in text
    assert "| Spark → graymq (sink, batch write)  | 23,500 | 22.90 |" in text
    assert "20,000 rows of 1024 B" in text


def test_a_part_that_cannot_run_says_why_in_one_line() -> None:
    lines = bench_spark.render({}, bench_spark.Settings(), table, fmt, "no Java runtime")
    assert [line for line in lines if line.startswith("Not run")] == ["Not run: no Java runtime."]


def test_without_java_the_part_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert bench_spark.missing() == "no Java runtime (java on PATH or JAVA_HOME), which Spark needs"


def test_the_results_page_carries_the_spark_table() -> None:
    results = Results()
    results.add("spark", bench_spark.WRITE_CASE, {"rows_s": 23_500.0, "mib_s": 22.9, "seconds": 0.85})
    meta = {"machine": {"cpu_model": "cpu", "cores": 2, "memory_gib": 4, "implementation": "CPython",
                        "python": "3.11", "protobuf_backend": "upb", "kernel": "k", "load_average": [0.0] * 3,
                        "graymq_commit": "abc"},
            "versions": {"redis": "r", "nats": "n", "redis-py": "x", "nats-py": "y"}, "parts": ["spark"],
            "started": "now", "duration_s": 60.0, "load_average_end": [0.0] * 3,
            "settings": {"count": 1, "repeat": 2, "rate": 1.0, "duration": 1.0, "gray_backlog": 1, "consumers": 1},
            "spark_settings": {"count": 20_000, "rounds": 3}}
    assert "### Spark: the graymq source and sink" in render(results, meta, None)
