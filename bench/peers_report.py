"""The headline comparison's tables (issue 21): each system's four phases, its ratios to Redis with hiredis,
and the issue's targets, each decided by figures of the same run."""

from __future__ import annotations

from typing import Any

from graymq.bench.bench_awaited import CASES as AWAITED_CASES
from graymq.bench.bench_peers import AWAITED_COUNT, E2E_RATE, PEER_BATCH, PEER_COUNT, SYSTEMS

Figures = dict[str, Any]
REFERENCE = "redis hiredis"
LABELS = {
    "graymq": "graymq (default producer)",
    "graymq uvloop": "graymq, same code on uvloop",
    "graymq sync flush": "graymq, sync flush (group commit)",
    "graymq BlockingProducer": "graymq, BlockingProducer (no event loop)",
    "redis hiredis": "Redis 7 Streams, redis-py (sync) + hiredis",
    "redis asyncio": "Redis 7 Streams, redis.asyncio (no hiredis)",
    "nats": "NATS JetStream, nats-py",
}
E2E_SYSTEMS = ("graymq", "graymq uvloop", "graymq BlockingProducer", "redis hiredis", "nats")
PHASES = (("batched", "batched produce"), ("awaited", "awaited single send"), ("consume", "consume"))


def _ok(figures: Figures | None) -> bool:
    return bool(figures) and "error" not in figures  # type: ignore[operator]


def _k(rate: float) -> str:
    return f"{rate / 1000:.1f} k"


def _ms(value: float) -> str:
    return f"{value:.2f}"


def peer_rows(results: Any) -> list[list[str]]:
    """One row per system that ran: the phases' rates, the e2e rate reached and p50 / p99, peak RSS."""
    rows = []
    for system in SYSTEMS:
        phases, e2e = results.median("peers", system), results.median("peers e2e", system)
        if phases is None and e2e is None:
            continue
        row = [LABELS[system]]
        if _ok(phases):
            row += [_k(phases[f"{key}_msgs_s"]) for key, _ in PHASES] + [f"{phases['broker_peak_rss_mib']:.0f}"]
        else:
            row += [f"FAILED: {phases['error'][:60]}" if phases else "–", "", "", ""]
        if _ok(e2e):
            row += [f"{_k(e2e['rate_msgs_s'])} of {_k(E2E_RATE)}", f"{_ms(e2e['p50_ms'])} / {_ms(e2e['p99_ms'])}",
                    f"{e2e.get('send_errors', 0):,.0f} / {e2e.get('lost', 0):,.0f}"]
        else:
            row += [f"FAILED: {e2e['error'][:60]}" if e2e else "–", "", ""]
        rows.append(row)
    return rows


def ratio_rows(results: Any) -> list[list[str]]:
    """graymq's systems over Redis with hiredis, phase by phase (above 1: graymq is faster)."""
    ref = results.median("peers", REFERENCE)
    if not _ok(ref):
        return []
    rows = []
    for system in ("graymq", "graymq uvloop", "graymq sync flush"):
        ours = results.median("peers", system)
        if _ok(ours):
            ratios = (ours[f"{key}_msgs_s"] / ref[f"{key}_msgs_s"] for key, _ in PHASES)
            rows.append([LABELS[system], *(f"{ratio:.2f}×" for ratio in ratios)])
    return rows


def target_rows(results: Any) -> list[list[str]]:
    """The issue's targets, each with the figures of this run that decide it."""
    ref, ref_e2e = results.median("peers", REFERENCE), results.median("peers e2e", REFERENCE)
    ours, sync = results.median("peers", "graymq"), results.median("peers", "graymq sync flush")
    rows = []

    def status(flag: bool) -> str:
        return "met" if flag else "not met"

    if _ok(ours) and _ok(ref):
        for key, label, goal in (("awaited", "awaited single send", 1.0), ("batched", "batched produce", 1.2),
                                 ("consume", "consume", 1.5)):
            ratio = ours[f"{key}_msgs_s"] / ref[f"{key}_msgs_s"]
            rows.append([f"{label} ≥ {goal:.1f}× Redis (hiredis)",
                         f"{ours[f'{key}_msgs_s']:,.0f} vs {ref[f'{key}_msgs_s']:,.0f} msg/s = {ratio:.2f}×",
                         status(ratio >= goal)])
    rows += _blocking_rows(results)
    for system, which in (("graymq", ""), ("graymq BlockingProducer", ": BlockingProducer")):
        ours_e2e = results.median("peers e2e", system)
        if _ok(ours_e2e) and _ok(ref_e2e):
            reached = ours_e2e["rate_msgs_s"] >= 0.98 * E2E_RATE and not ours_e2e.get("send_errors")
            rows.append([f"{E2E_RATE:,.0f} msg/s e2e reached with awaited sends{which}",
                         f"{ours_e2e['rate_msgs_s']:,.0f} msg/s", status(reached)])
            rows.append([f"e2e p99 ≤ Redis's p99 of the run{which}",
                         f"{_ms(ours_e2e['p99_ms'])} vs {_ms(ref_e2e['p99_ms'])} ms",
                         status(ours_e2e["p99_ms"] <= ref_e2e["p99_ms"])])
    if _ok(ours) and _ok(sync):
        share = sync["batched_msgs_s"] / ours["batched_msgs_s"]
        rows.append(["sync flush (group commit) ≥ 60 % of async, batched", f"{share:.0%}", status(share >= 0.6)])
    rss = [f["broker_peak_rss_mib"] for system in ("graymq", "graymq uvloop", "graymq sync flush")
           for f in (results.median("peers", system), results.median("peers e2e", system)) if _ok(f)]
    if rss:
        rows.append(["broker RSS < 150 MiB at these loads", f"peak {max(rss):.0f} MiB", status(max(rss) < 150)])
    group = results.median("groupscale", "500 consumers")
    if _ok(group):
        join_s = group["converge_after_join_s"]
        rows.append(["500 consumers over several processes converge < 2 s after a join",
                     f"{join_s:.2f} s (after a leave {group['converge_after_leave_s']:.2f} s)", status(join_s < 2.0)])
    return rows


def _blocking_rows(results: Any) -> list[list[str]]:
    """The awaited-send target as the issue states it: graymq's BlockingProducer against redis-py's blocking
    client with hiredis (the ``awaited`` part), alone and shared by as many threads."""
    rows = []
    for ours_case, ref_case in ((AWAITED_CASES[0], AWAITED_CASES[2]), (AWAITED_CASES[3], AWAITED_CASES[4])):
        ours, ref = results.median("awaited", ours_case), results.median("awaited", ref_case)
        if _ok(ours) and _ok(ref):
            ratio = ours["msgs_s"] / ref["msgs_s"]
            rows.append([f"awaited single send ≥ 1.0× Redis (hiredis): {ours_case}",
                         f"{ours['msgs_s']:,.0f} vs {ref['msgs_s']:,.0f} msg/s = {ratio:.2f}×",
                         "met" if ratio >= 1.0 else "not met"])
    return rows


def group_rows(results: Any) -> list[list[str]]:
    rows = []
    for case, entry in results.parts.get("groupscale", {}).items():
        f = entry["median"]
        if "error" in f:
            rows.append([case, f"FAILED: {f['error'][:80]}", "", "", "", "", ""])
            continue
        rows.append([case, f"{f['processes']:.0f}", f"{f['start_to_converged_s']:.2f}",
                     f"{f['converge_after_join_s']:.2f}", f"{f['converge_after_leave_s']:.2f}",
                     *(" / ".join(_above_steady(f, phase, k) for k in ("broker", "nameserver", "consumers"))
                       for phase in ("join", "leave"))])
    return rows


def _above_steady(f: dict[str, float], phase: str, process: str) -> str:
    """CPU seconds of ``process`` during ``phase`` above what the idle group costs it meanwhile (total when the run
    did not measure the idle load)."""
    return f"{f.get(f'{phase}_{process}_cpu_s_over_steady', f[f'{phase}_{process}_cpu_s']):.2f}"


def render(results: Any, table: Any, meta: dict[str, Any]) -> list[str]:
    """The section of RESULTS.md: the comparison, ratios, targets, group scale and the charts' links."""
    out: list[str] = []
    rows = peer_rows(results)
    if rows:
        rtt, load = meta.get("echo_rtt_us"), meta.get("peers_load")
        settings = meta.get("settings", {})
        count, awaited = settings.get("peer_count", PEER_COUNT), settings.get("awaited_count", AWAITED_COUNT)
        out += ["## graymq against the peers' fastest Python clients (issue 21)", "",
                f"1 KiB messages; batched produce: {count:,} messages in batches of {PEER_BATCH}, one batch "
                f"outstanding; awaited single send: {awaited:,} sends, each awaited; consume: in batches of "
                f"{PEER_BATCH}; e2e: producer and consumer processes, {E2E_RATE:,.0f} msg/s with every send "
                "awaited. Flush: graymq async / Redis AOF everysec / JetStream default (graymq sync flush: group "
                "commit). Rates in messages per second, medians.",
                f"Loopback echo round trip between two Python processes in this run: "
                f"{'–' if rtt is None else f'{rtt:.0f} µs'}; load average during the part: {load or '–'}.", "",
                table(["system", "batched produce", "awaited single send", "consume", "broker RSS MiB",
                       "e2e rate reached", "e2e p50 / p99 ms", "e2e send errors / lost"], rows), ""]
        ratios = ratio_rows(results)
        if ratios:
            out += ["Ratios to Redis with hiredis (above 1: graymq is faster):", "",
                    table(["system", *(label for _, label in PHASES)], ratios), ""]
        goals = target_rows(results)
        if goals:
            out += ["### Targets of issue 21", "", table(["target", "figures (medians)", "status"], goals), ""]
    groups = group_rows(results)
    if groups:
        out += ["### Scale of a group (consumers over several processes, 100-queue topic)", "",
                "CPU: seconds of each process during the phase above what the idle group (heartbeats, watches) "
                "costs it in the same time.", "",
                table(["group", "processes", "start → converged s", "join → converged s", "leave → converged s",
                       "CPU s per join: broker / name server / consumers", "CPU s per leave"], groups), ""]
    charts = meta.get("charts") or []
    if charts:
        out += ["### Charts", "", *(f"![{title}]({name})" for name, title in charts), ""]
    return out
