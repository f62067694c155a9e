"""The awaited-send bench's pure parts: every send timed in every thread, and each graymq row set against the Redis
row with as many threads."""

from __future__ import annotations

import threading

from graymq.bench import bench_awaited
from graymq.bench.bench_awaited import CASES, THREADS, timed_sends
from graymq.bench.runner import fmt, table


def test_timed_sends_times_every_send_of_every_thread() -> None:
    seen: list[tuple[int, str]] = []
    figures = timed_sends(80, lambda seq: seen.append((seq, threading.current_thread().name)), threads=8)
    assert sorted(seq for seq, _ in seen) == list(range(80))
    assert len({name for _, name in seen}) == 8
    assert figures["msgs_s"] > 0 and figures["p50_us"] <= figures["p99_us"]


def row(msgs_s: float) -> dict[str, float]:
    return {"msgs_s": msgs_s, "p50_us": 100.0, "p99_us": 900.0, "server_cpu_us": 50.0, "client_cpu_us": 40.0,
            "load_1m": 1.5}


def test_each_graymq_row_is_set_against_redis_with_as_many_threads() -> None:
    medians = {CASES[0]: row(2000), CASES[1]: {"error": "RuntimeError: boom"}, CASES[2]: row(4000),
               CASES[3]: row(3000), CASES[4]: row(6000)}
    lines = "\n".join(bench_awaited.render(medians, table, fmt, 25.0)).splitlines()
    rows = {line.split("|")[1].strip(): line for line in lines if line.startswith("| ")}
    assert "| 0.50× " in rows[CASES[0]] and "| 0.50× " in rows[CASES[3]]
    assert "FAILED: RuntimeError: boom" in rows[CASES[1]]
    assert "×" not in rows[CASES[2]].split("|")[3]  # Redis is not set against itself
    assert any("25.00 µs" in line for line in lines) and f"{THREADS} threads" in CASES[3]


def test_nothing_is_rendered_without_the_part() -> None:
    assert bench_awaited.render({}, table, fmt, None) == []
