"""Convergence of a large consumer group spread over several processes (issue 21's "scale of a group").

``consumers`` consumers of one group (a fifth of them gray, or spread over several lanes) on a 100-queue topic
(10 gray queues; with K lanes, 10 more queues per lane after the first: docs/lanes.md), split over ``processes``
worker processes, against one broker and a name server. Each worker writes who holds
what whenever it changes; this process polls those files and times three phases: every consumer
started → converged (every queue held by exactly one consumer of its side, each side evenly spread), one
more consumer joins → converged, one leaves → converged. For the join and the leave it also reports the
CPU seconds the broker, the name server and the workers spent until the group converged again, the steady
load's CPU per second measured over the second before (heartbeats, watches, pulls of 500 idle consumers), and
the phase's CPU above that steady load (``*_over_steady``: what the rebalance itself cost).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import multiprocessing as mp
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from graymq.bench.common import Figures, cpu_seconds, worker_processes
from graymq.bench.graymq_servers import NameServer

QUEUES, GRAY_QUEUES = 100, 10
POLL_S = 0.01
SETTLE_S = 1.0  # before a join or leave; the CPU spent meanwhile per second is the group's steady load
TIMEOUT_S = 180.0

Holdings = dict[str, tuple[str | None, list[int]]]  # client id -> (lane, None for base; queue ids held)


def group_converged(holdings: Holdings, queue_nums: int, gray_nums: int, lane_slots: int = 1) -> bool:
    """Every queue held by exactly one consumer of its side: base queues by base consumers, each lane's queues (one
    lane slot, a different one per lane) by that lane's; the totals of each side differ by at most one."""
    from graymq.core.queue_layout import lane_base_ids, slot_queue_ids

    slots = {frozenset(slot_queue_ids(queue_nums, gray_nums, lane_slots, s)) for s in range(lane_slots)}
    held: dict[str | None, set[int]] = {}
    counts: dict[str | None, list[int]] = {}
    for lane, queue_ids in holdings.values():
        counts.setdefault(lane, []).append(len(queue_ids))
        side = held.setdefault(lane, set())
        if any(q in side for q in queue_ids) or len(set(queue_ids)) != len(queue_ids):
            return False
        side.update(queue_ids)
    if held.get(None, set()) != set(lane_base_ids(queue_nums, gray_nums, lane_slots)):
        return False
    lane_sets = [frozenset(ids) for lane, ids in held.items() if lane is not None]
    return (len(set(lane_sets)) == len(lane_sets) and all(ids in slots for ids in lane_sets)
            and all(max(c) - min(c) <= 1 for c in counts.values()))


def _worker(ns_url: str, group: str, topic: str, ids: list[tuple[str, str | None]], status_path: str,
            commands: Any, ready: Any) -> None:
    """Run ``ids`` consumers; ``("join", id)`` starts one more, ``("leave", id)`` stops one, ``None`` ends."""
    from graymq.bench.common import consumers_mark, quiet_logs, serve_group_commands
    from graymq.client import PushConsumer

    async def ignore(messages: list[Any]) -> None:
        return None

    async def run() -> None:
        consumers: dict[str, PushConsumer] = {}

        def make(client_id: str, lane: str | None) -> PushConsumer:
            consumer = PushConsumer(group, ns_url, listener=ignore, client_id=client_id, lane=lane)
            consumer.subscribe(topic)
            consumers[client_id] = consumer
            return consumer

        await asyncio.gather(*(make(client_id, lane).start() for client_id, lane in ids))
        ready.set()
        await serve_group_commands(
            lambda: json.dumps({cid: (c.lane, sorted(mq.queue_id for mq in c.assigned() if mq.topic == topic))
                                for cid, c in consumers.items()}),
            status_path, commands, lambda cid: make(cid, None).start(), lambda cid: consumers.pop(cid).stop(), POLL_S,
            mark=lambda: consumers_mark(consumers))
        await asyncio.gather(*(c.stop() for c in consumers.values()), return_exceptions=True)

    with quiet_logs():
        asyncio.run(run())


@contextlib.contextmanager
def _workers(ns_url: str, group: str, topic: str, consumers_n: int, processes: int, root: Path,
             lanes: tuple[str, ...]) -> Iterator[tuple[list[Any], list[Path], list[Any]]]:
    """A fifth of the consumers in ``lanes`` (in turn), the rest base."""
    ctx = mp.get_context("spawn")
    ids = [(f"c{i:04d}", lanes[i % len(lanes)] if i < consumers_n // 5 else None) for i in range(consumers_n)]
    shares = [ids[p::processes] for p in range(processes)]
    commands = [ctx.Queue() for _ in range(processes)]
    paths = [root / f"holdings-{p}.json" for p in range(processes)]
    readies = [ctx.Event() for _ in range(processes)]
    procs = [ctx.Process(target=_worker, name=f"group-scale-{p}",
                         args=(ns_url, group, topic, shares[p], str(paths[p]), commands[p], readies[p]))
             for p in range(processes)]
    with worker_processes(procs, commands, 30):
        yield procs, paths, commands


def _holdings(paths: list[Path]) -> Holdings:
    holdings: Holdings = {}
    for path in paths:
        with contextlib.suppress(OSError, ValueError):
            holdings.update({cid: (lane, ids) for cid, (lane, ids) in json.loads(path.read_text()).items()})
    return holdings


def _wait_converged(paths: list[Path], expected: int, what: str, lane_slots: int) -> float:
    queue_nums = QUEUES + (lane_slots - 1) * GRAY_QUEUES
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        holdings = _holdings(paths)
        if len(holdings) == expected and group_converged(holdings, queue_nums, GRAY_QUEUES, lane_slots):
            return time.monotonic()
        time.sleep(POLL_S)
    raise TimeoutError(f"{what}: not converged after {TIMEOUT_S:g}s: {_sides(_holdings(paths))}")


def _sides(holdings: Holdings) -> str:
    """Per side: its consumers and the queues they hold (what a run that did not converge shows)."""
    sides: dict[str, list[tuple[str, list[int]]]] = {}
    for client_id, (lane, queue_ids) in sorted(holdings.items()):
        sides.setdefault(lane or "base", []).append((client_id, queue_ids))
    return "; ".join(f"{side}: {len(held)} consumers, {sum(len(q) for _, q in held)} queues "
                     f"{sorted(q for _, ids in held for q in ids)[:40]}" for side, held in sorted(sides.items()))


def _cpu(sources: dict[str, Callable[[], float]]) -> dict[str, float]:
    return {key: read() for key, read in sources.items()}


def group_scale_case(ns: NameServer, root: Path, log_dir: Path, consumers_n: int = 500, processes: int = 5,
                     lanes: tuple[str, ...] = ("gray",)) -> Figures:
    """The figures of one group whose fifth is in ``lanes`` (the topic has a slot for each)."""
    from graymq.bench.bench_gray import _setup

    slots = len(lanes)
    broker, topic, group, _ = asyncio.run(_setup(ns, root, log_dir, QUEUES, GRAY_QUEUES, lane_slots=slots))
    try:
        with _workers(ns.url, group, topic, consumers_n, processes, root, lanes) as (procs, paths, commands):
            began = time.monotonic()
            started = _wait_converged(paths, consumers_n, f"{consumers_n} consumers started", slots)
            sources = {"broker_cpu_s": broker.cpu_seconds, "nameserver_cpu_s": ns.cpu_seconds,
                       "consumers_cpu_s": lambda: sum(cpu_seconds(p.pid) for p in procs if p.pid)}
            figures: Figures = {"consumers": consumers_n, "processes": processes,
                                "start_to_converged_s": started - began}
            for phase, command, expected in (("join", ("join", "joiner"), consumers_n + 1),
                                             ("leave", ("leave", "joiner"), consumers_n)):
                settling, settle_began = _cpu(sources), time.monotonic()
                time.sleep(SETTLE_S)  # heartbeats and pulls settle; what they cost per second is the steady load
                before = _cpu(sources)
                steady = {key: (before[key] - settling[key]) / (time.monotonic() - settle_began) for key in sources}
                phase_began = time.monotonic()
                commands[0].put(command)
                done = _wait_converged(paths, expected, f"after a {phase}", slots)
                after = _cpu(sources)
                took = done - phase_began
                figures[f"converge_after_{phase}_s"] = took
                for key in sources:
                    figures[f"{phase}_{key}"] = after[key] - before[key]
                    figures[f"{phase}_{key}_over_steady"] = max(0.0, after[key] - before[key] - steady[key] * took)
                    figures[f"steady_{key}_per_s_before_{phase}"] = steady[key]
            return figures
    finally:
        broker.stop()


def main() -> None:
    """``python -m graymq.bench.bench_group_scale [consumers] [processes] [lanes]``: one run, figures as JSON
    (``lanes``: comma-separated, default ``gray``)."""
    import sys
    import tempfile

    consumers_n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    processes = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    lanes = tuple(sys.argv[3].split(",")) if len(sys.argv) > 3 else ("gray",)
    with tempfile.TemporaryDirectory() as tmp, NameServer(Path(tmp) / "ns", Path(tmp)).wait_ready() as ns:
        figures = group_scale_case(ns, Path(tmp), Path(tmp), consumers_n, processes, lanes)
    print(json.dumps({k: round(v, 3) if isinstance(v, float) and not math.isnan(v) else v
                      for k, v in figures.items()}, indent=1))


if __name__ == "__main__":
    main()
