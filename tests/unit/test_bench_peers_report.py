"""The headline comparison's tables and charts render from a run's medians; targets are decided by them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graymq.bench import peers_report
from graymq.bench.bench_awaited import CASES
from graymq.bench.runner import Results, table

pytestmark = pytest.mark.unit


def phases(batched: float, awaited: float, consume: float, rss: float = 60.0) -> dict[str, float]:
    return {"batched_msgs_s": batched, "awaited_msgs_s": awaited, "consume_msgs_s": consume,
            "broker_peak_rss_mib": rss}


def e2e(rate: float, p50: float, p99: float) -> dict[str, float]:
    return {"rate_msgs_s": rate, "p50_ms": p50, "p99_ms": p99, "max_ms": p99 * 2, "send_errors": 0, "lost": 0,
            "broker_peak_rss_mib": 90.0}


def a_run() -> Results:
    results = Results()
    results.add("peers", "graymq", phases(130_000, 7_000, 250_000))
    results.add("peers", "graymq sync flush", phases(70_000, 1_500, 250_000))
    results.add("peers", "redis hiredis", phases(100_000, 7_500, 150_000))
    results.add("peers", "nats", {"error": "RuntimeError: nats-server not found"})
    results.add("peers e2e", "graymq", e2e(4_990, 0.3, 1.5))
    results.add("peers e2e", "graymq BlockingProducer", e2e(4_000, 0.2, 1.9))
    results.add("peers e2e", "redis hiredis", e2e(5_000, 0.2, 1.8))
    for case, rate in zip(CASES, (9_000, 5_000, 8_000, 20_000, 30_000), strict=True):  # blocking, async, redis, x8
        results.add("awaited", case, {"msgs_s": rate})
    for label in ("", ", base + 3 lanes"):  # one size twice, as part_groupscale runs it (a chart once sorted by it)
        results.add("groupscale", f"500 consumers{label}", {
            "consumers": 500, "processes": 5, "start_to_converged_s": 4.0, "converge_after_join_s": 1.5,
            "converge_after_leave_s": 1.2, "join_broker_cpu_s": 0.1, "join_nameserver_cpu_s": 0.4,
            "join_consumers_cpu_s": 1.0, "join_consumers_cpu_s_over_steady": 0.25, "leave_broker_cpu_s": 0.1,
            "leave_nameserver_cpu_s": 0.3, "leave_consumers_cpu_s": 0.8})
    return results


def test_targets_are_decided_by_the_figures_of_the_run() -> None:
    status = {target: state for target, _, state in peers_report.target_rows(a_run())}
    assert status == {
        "awaited single send ≥ 1.0× Redis (hiredis)": "not met",
        "batched produce ≥ 1.2× Redis (hiredis)": "met",
        "consume ≥ 1.5× Redis (hiredis)": "met",
        "awaited single send ≥ 1.0× Redis (hiredis): graymq BlockingProducer": "met",
        "awaited single send ≥ 1.0× Redis (hiredis): graymq BlockingProducer, 8 threads": "not met",
        "5,000 msg/s e2e reached with awaited sends": "met",
        "e2e p99 ≤ Redis's p99 of the run": "met",
        "5,000 msg/s e2e reached with awaited sends: BlockingProducer": "not met",
        "e2e p99 ≤ Redis's p99 of the run: BlockingProducer": "not met",
        "sync flush (group commit) ≥ 60 % of async, batched": "not met",
        "broker RSS < 150 MiB at these loads": "met",
        "500 consumers over several processes converge < 2 s after a join": "met",
    }


def test_the_section_shows_every_system_that_ran_with_its_ratios_and_the_run_conditions() -> None:
    text = "\n".join(peers_report.render(a_run(), table, {"echo_rtt_us": 61.0, "peers_load": "1.20 at start"}))
    assert "Redis 7 Streams, redis-py (sync) + hiredis" in text and "FAILED: RuntimeError" in text
    assert "| graymq (default producer)         | 1.30×" in text
    assert "61 µs" in text and "1.20 at start" in text
    assert re.search(r"\| 500 consumers +\| 5", text) and "| 500 consumers, base + 3 lanes | 5" in text
    assert "0.10 / 0.40 / 0.25" in text and "0.10 / 0.30 / 0.80" in text  # above the idle load where measured


def test_charts_are_written_next_to_the_results(tmp_path: Path) -> None:
    from graymq.bench import charts

    written = charts.render_all(a_run(), tmp_path)
    assert [name for name, _ in written] == ["throughput.png", "latency.png", "convergence.png"]
    assert all((tmp_path / name).read_bytes().startswith(b"\x89PNG") for name, _ in written)
