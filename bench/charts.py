"""PNG charts of a bench run, written next to RESULTS.md (matplotlib, from the ``bench`` extra).

- ``throughput.png``: messages per second of each system in each phase (batched produce, awaited single
  send, consume), one panel per phase;
- ``latency.png``: end-to-end p50 / p99 / max of each system at the e2e rate;
- ``convergence.png``: seconds until a group converges after start, a join and a leave, against its size.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from graymq.bench.peers_report import E2E_SYSTEMS, PHASES, SYSTEMS

SHORT = {"graymq": "graymq", "graymq uvloop": "graymq\nuvloop", "graymq sync flush": "graymq\nsync flush",
         "graymq BlockingProducer": "graymq\nblocking",
         "redis hiredis": "Redis\nhiredis", "redis asyncio": "Redis\nasyncio", "nats": "NATS\nnats-py"}
COLORS = {"graymq": "#2b6cb0", "graymq uvloop": "#63b3ed", "graymq sync flush": "#90cdf4",
          "redis hiredis": "#c53030", "redis asyncio": "#fc8181", "nats": "#2f855a"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _ok(figures: Any) -> bool:
    return bool(figures) and "error" not in figures


def throughput(results: Any, path: Path) -> bool:
    systems = [s for s in SYSTEMS if _ok(results.median("peers", s))]
    if not systems:
        return False
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(PHASES), figsize=(12, 4.2))
    for ax, (key, label) in zip(axes, PHASES, strict=True):
        rates = [results.median("peers", s)[f"{key}_msgs_s"] / 1000 for s in systems]
        bars = ax.bar(range(len(systems)), rates, color=[COLORS[s] for s in systems])
        ax.bar_label(bars, fmt="%.1f", fontsize=8)
        ax.set_title(label)
        ax.set_ylabel("k msg/s")
        ax.set_xticks(range(len(systems)), [SHORT[s] for s in systems], fontsize=8)
    fig.suptitle("Throughput per system and phase (1 KiB messages, medians)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def latency(results: Any, path: Path) -> bool:
    systems = [s for s in E2E_SYSTEMS if _ok(results.median("peers e2e", s))]
    if not systems:
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.2))
    width = 0.25
    for i, (key, label) in enumerate((("p50_ms", "p50"), ("p99_ms", "p99"), ("max_ms", "max"))):
        values = [results.median("peers e2e", s)[key] for s in systems]
        bars = ax.bar([x + (i - 1) * width for x in range(len(systems))], values, width, label=label)
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("ms, send → receipt (log scale)")
    ax.set_xticks(range(len(systems)), [SHORT[s] for s in systems], fontsize=8)
    ax.legend()
    ax.set_title("End-to-end latency with every send awaited, per system")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def convergence(results: Any, path: Path) -> bool:
    """Start, join and leave convergence against group size: a fifth gray (solid), a fifth over 3 lanes (dashed)."""
    cases = results.parts.get("groupscale", {})
    series = {style: sorted(((f["consumers"], f) for name, e in cases.items()
                             if ("lanes" in name) == lanes and _ok(f := e["median"])), key=lambda p: p[0])
              for style, lanes in (("-", False), ("--", True))}
    if not any(series.values()):
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for style, points in series.items():
        sizes = [n for n, _ in points]
        for key, label in (("start_to_converged_s", "all started → converged"),
                           ("converge_after_join_s", "a join → converged"),
                           ("converge_after_leave_s", "a leave → converged")):
            if points:
                ax.plot(sizes, [f[key] for _, f in points], style, marker="o",
                        label=label + (", 3 lanes" if style == "--" else ""))
    ax.set_xlabel("consumers in the group")
    ax.set_ylabel("seconds")
    ax.set_title("Group convergence against group size (100-queue topic)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def render_all(results: Any, directory: Path) -> list[tuple[str, str]]:
    """Write every chart the run has figures for; (file name, title) of each written."""
    written = []
    for name, title, draw in (("throughput.png", "Throughput per system and phase", throughput),
                              ("latency.png", "End-to-end latency per system", latency),
                              ("convergence.png", "Group convergence against group size", convergence)):
        if draw(results, directory / name):
            written.append((name, title))
    return written
