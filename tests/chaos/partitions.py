"""Partition cases: a nemesis cuts links between nodes of a ``PartitionCluster`` (nftables rules in the nodes'
namespaces) while two producers (v1, v2: gray) and two orderly consumers run, each client in its own node; healed,
then the checkers over what was recorded (tests/chaos/checkers.py) and how long writes and reads were unavailable.

Nemeses (each cut lasts ``CUT_S`` unless it flaps):

- ``leader_cut``: the leader of the set cut from PostgreSQL, the name servers and its followers; its clients reach it;
- ``follower_cut``: a follower cut from its leader;
- ``ns_cut_pg``: one name server cut from PostgreSQL; clients, brokers reach it;
- ``asymmetric``: the leader hears nothing from the name servers and its followers (what it sends still leaves);
- ``flapping``: the leader cut and healed every 1-3 s (a seeded random) for ``FLAP_S``;
- ``majorities_ring``: three replicas and two name servers on a ring, each reaching only its two neighbours;
- ``bridge``: two halves ({r0, ns0} and {r2, ns1}) joined only through r1;
- ``gray_consumer_cut_ns`` / ``gray_consumer_cut_broker``: during a promote, the gray consumer cut from the name
  servers / from the brokers. The promote must not report SUCCEEDED while a gray message acknowledged is
  unconsumed.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from graymq.devkit.processes import GraymqProcess
from graymq.gray_controller.cli.moved_aside import read_moved_aside
from tests.chaos import faults
from tests.chaos.checkers import Window, longest_gap, reordered, reused_positions
from tests.chaos.partition_cluster import LEASE_S, PartitionCluster
from tests.chaos.report import CaseResult, evaluate
from tests.chaos.workload import Workload
from tests.support.cluster import Cluster
from tests.support.netns import NodeLoop

GROUP = "GID_PARTITION"
TOPIC = "TOPIC_PARTITION"
QUEUES, GRAY_QUEUES = 4, 2
CUT_S = 10.0
PRE_S, POST_S = 3.0, 4.0  # load before the cut, and after the heal
DRAIN_TIMEOUT_S = 60.0
PROMOTE_TIMEOUT_S = {"gray_consumer_cut_ns": 40, "gray_consumer_cut_broker": 8}
CLIENTS = ("p-v1", "p-v2", "c-v1", "c-v2")


def flap_seconds() -> float:
    """How long ``flapping`` lasts: ``CHAOS_FLAP_S``, a minute by default."""
    return float(os.environ.get("CHAOS_FLAP_S", "60"))


@dataclass(frozen=True)
class PartitionCase:
    nemesis: str
    replication: str  # "sync" | "async"
    in_flight: int = 1  # sends each producer has waiting at once

    @property
    def name(self) -> str:
        return f"{self.nemesis}/{self.replication}_replicas" + (f"+in_flight{self.in_flight}"
                                                                  if self.in_flight > 1 else "")

    @property
    def replicas(self) -> int:
        return 3 if self.nemesis in ("majorities_ring", "bridge") else 1 if self.promote else 2

    @property
    def promote(self) -> bool:
        return self.nemesis.startswith("gray_consumer")

    @property
    def cut_s(self) -> float:
        return flap_seconds() if self.nemesis == "flapping" else CUT_S


@dataclass
class Run:
    """One case's clients and what happened: ``fault_at``/``healed_at`` (monotonic), notes."""

    cluster: PartitionCluster
    case: PartitionCase
    loops: dict[str, NodeLoop]
    workloads: dict[str, Workload]
    fault_at: float = 0.0
    healed_at: float = 0.0
    promote_state: str | None = None
    promote_ended_at: float = 0.0

    @property
    def sent(self) -> list:  # type: ignore[type-arg]
        return [s for w in self.workloads.values() for s in w.sent]

    @property
    def consumed(self) -> list:  # type: ignore[type-arg]
        return sorted((c for w in self.workloads.values() for c in w.consumed), key=lambda c: c.at)

    def consumed_ids(self) -> set[str]:
        return {c.msg_id for c in self.consumed}


def observer(cluster: PartitionCluster) -> Cluster:
    """The test process's admin view of the cluster (through the bridge's address)."""
    view = Cluster(lambda *a, **k: None, cluster.pg_url, cluster.root)  # type: ignore[arg-type, return-value]
    view.nameservers = cluster.nameservers
    view.brokers = {"broker-a": cluster.replicas[0]}
    return view


def run_partition_case(cluster: PartitionCluster, case: PartitionCase) -> CaseResult:
    admin = observer(cluster)
    admin.create_topic(TOPIC, QUEUES, GRAY_QUEUES)
    admin.ns_call(lambda ns: ns.add_rule(GROUP, {"version": "v2"}, True))
    loops = {name: cluster.client(name) for name in CLIENTS}
    run = Run(cluster, case, loops, {name: Workload(cluster.ns_url, TOPIC, GROUP) for name in CLIENTS})
    began = time.monotonic()
    notes = asyncio.run(asyncio.wait_for(_run(run), 240 + case.cut_s))
    expected_lost = _async_loss_window(run)
    moved_aside, moved_notes = _moved_aside(run, set(_lost(run)))
    notes.extend(moved_notes)
    result = evaluate(case.name, sum(w.attempts for w in run.workloads.values()), run.sent, run.consumed,
                      run.fault_at, [Window(began, time.monotonic())], expected_lost & set(_lost(run)), notes)
    acks = [s.acked_at for s in run.sent]
    firsts = _first_consumptions(run)
    end = max([run.healed_at + POST_S, *acks, *firsts])
    return CaseResult(**{**result.__dict__, "reordered": _reordered(run, result.notes), "moved_aside": moved_aside,
                         "writes_down_s": longest_gap(acks, run.fault_at, end),
                         "reads_down_s": longest_gap(firsts, run.fault_at, end)})


def _reordered(run: Run, notes: list[str]) -> int:
    """Reorderings, but (async) a consumer going back to offsets a new leader reused: it had read the old leader's
    uncopied tail there (moved aside since), a documented async loss, noted rather than counted."""
    found = reordered(run.consumed)
    if run.case.replication != "async":
        return len(found)
    reused = reused_positions(run.consumed)
    real = [c for c, _ in found if (c.client_id, c.topic, c.broker, c.queue_id, c.queue_offset) not in reused]
    if reused:
        notes.append(f"{len(reused)} queue position(s) read twice with different messages: the old leader's "
                     f"uncopied tail, then the new leader's messages at the same offsets")
    return len(real)


def _moved_aside(run: Run, lost: set[str]) -> tuple[int, list[str]]:
    """How many acknowledged messages a replica moved aside (``graymq broker moved-aside`` lists them: a deposed
    leader's uncopied tail), how many of them consumers had read before, and whether every message lost is there."""
    moved = {m.msg_id for r in run.cluster.replicas for f in read_moved_aside(run.cluster.root / f"r{r}")
             for m in f.messages}
    acked = {s.msg_id for s in run.sent} & moved
    notes = [f"{len(acked)} acknowledged messages have a copy a deposed leader moved aside (its uncopied tail; under "
             f"sync, sends it answered TIMEOUT and a new leader stored again): {len(acked - lost)} consumed, "
             f"{len(acked & lost)} lost"] if acked else []
    if lost - moved:
        held = {(c.topic, c.broker, c.queue_id, c.queue_offset) for c in run.consumed}
        shadowed = [s for s in run.sent if s.msg_id in lost - moved
                    and (s.topic, s.broker, s.queue_id, s.queue_offset) in held]
        notes.append(f"not moved aside: {len(lost - moved)} of the {len(lost)} lost, e.g. {sorted(lost - moved)[:3]}; "
                     f"{len(shadowed)} of them at a queue offset where consumers got another message")
    return len(acked), notes


def _lost(run: Run) -> list[str]:
    seen = run.consumed_ids()
    return [s.msg_id for s in run.sent if s.msg_id not in seen]


def _first_consumptions(run: Run) -> list[float]:
    first: dict[str, float] = {}
    for c in run.consumed:
        first.setdefault(c.msg_id, c.at)
    return list(first.values())


def _async_loss_window(run: Run) -> set[str]:
    """What async replication may lose to a cut leader: what it acknowledged before its lease ran out (0.9 lease
    after its last renewal, sent before the cut) that no follower had copied, moved aside when it rejoins; the
    flapping link's last cut may be the one. Half a lease more for the acks to reach the producers. Nothing under
    sync replication."""
    if run.case.replication != "async":
        return set()
    cut = run.healed_at if run.case.nemesis == "flapping" else run.fault_at
    return {s.msg_id for s in run.sent if s.acked_at <= cut + 1.5 * LEASE_S}


async def _run(run: Run) -> list[str]:
    notes: list[str] = []
    producers: list[asyncio.Future[None]] = []
    promote: GraymqProcess | None = None
    try:
        for name, version in (("c-v1", "v1"), ("c-v2", "v2")):
            await run.loops[name].run(run.workloads[name].start_consumer(name, version))
        duration = PRE_S + run.case.cut_s + POST_S
        producers = [asyncio.ensure_future(run.loops[name].run(run.workloads[name].produce(
            name, version, duration, max_count=int(duration * 100 * run.case.in_flight),
            in_flight=run.case.in_flight))) for name, version in (("p-v1", "v1"), ("p-v2", "v2"))]
        await asyncio.sleep(PRE_S)
        if run.case.promote:
            promote = _start_promote(run)
            await asyncio.to_thread(promote.wait_for_line, "started", 30)
        await NEMESES[run.case.nemesis](run)
        await asyncio.gather(*producers)
        if promote is not None:
            notes.append(await asyncio.to_thread(_promote_outcome, run, promote))
        acked = {s.msg_id for s in run.sent}
        if not await _wait_consumed(run, acked):
            missing = acked - run.consumed_ids()
            allowed = missing & _async_loss_window(run)
            notes.append(f"not everything consumed after {DRAIN_TIMEOUT_S:.0f}s ({len(missing - allowed)})"
                         if missing - allowed else f"{len(allowed)} lost, acknowledged within the async loss window")
        notes.append(await _rejoined(run))
        return notes
    finally:
        run.cluster.net.heal_all()
        for task in producers:
            task.cancel()
        await asyncio.gather(*producers, return_exceptions=True)
        for name in ("c-v1", "c-v2"):
            await run.loops[name].run(run.workloads[name].stop_consumers())
        if promote is not None:
            promote.kill()


async def _wait_consumed(run: Run, expected: set[str]) -> bool:
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while not expected <= run.consumed_ids():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.2)
    return True


async def _rejoined(run: Run) -> str:
    """Every replica back in sync after the heal (an old leader truncated and following)."""
    want = list(range(run.case.replicas))
    await asyncio.to_thread(run.cluster.wait_in_sync, want, 60.0)
    view = run.cluster.replica_set()
    return f"every replica back in sync; leader r{view['leader_replica_id']} at epoch {view['epoch']}"


# -- nemeses -------------------------------------------------------------------------------------
def _cut(run: Run, node: str, peers: list[str], inbound: bool = True, outbound: bool = True) -> None:
    run.cluster.net.nodes[node].cut(run.cluster.net.addresses(*peers), inbound, outbound)


async def _hold(run: Run, cuts: Callable[[], None]) -> None:
    """Apply ``cuts`` now, heal every cut ``CUT_S`` later."""
    cuts()
    run.fault_at = time.monotonic()
    await asyncio.sleep(CUT_S)
    run.cluster.net.heal_all()
    run.healed_at = time.monotonic()


def _others(run: Run, replica: int) -> list[str]:
    return [f"r{r}" for r in range(run.case.replicas) if r != replica]


async def leader_cut(run: Run) -> None:
    await _hold(run, lambda: _cut(run, "r0", ["pg", *run.cluster.ns_names, *_others(run, 0)]))


async def follower_cut(run: Run) -> None:
    await _hold(run, lambda: _cut(run, "r1", ["r0"]))


async def ns_cut_pg(run: Run) -> None:
    await _hold(run, lambda: _cut(run, "ns1", ["pg"]))


async def asymmetric(run: Run) -> None:
    await _hold(run, lambda: _cut(run, "r0", [*run.cluster.ns_names, *_others(run, 0)], outbound=False))


async def flapping(run: Run) -> None:
    rng = random.Random(run.case.name)
    run.fault_at = time.monotonic()
    end = run.fault_at + run.case.cut_s
    while time.monotonic() < end:
        _cut(run, "r0", ["pg", *run.cluster.ns_names, *_others(run, 0)])
        await asyncio.sleep(rng.uniform(1, 3))
        run.cluster.net.heal_all()
        await asyncio.sleep(rng.uniform(1, 3))
    run.healed_at = time.monotonic()


async def majorities_ring(run: Run) -> None:
    ring = ["ns0", "r0", "r1", "ns1", "r2"]

    def cuts() -> None:
        for i, node in enumerate(ring):
            neighbours = {ring[i - 1], ring[(i + 1) % len(ring)], node}
            _cut(run, node, [n for n in ring if n not in neighbours])

    await _hold(run, cuts)


async def bridge(run: Run) -> None:
    def cuts() -> None:
        for node in ("r0", "ns0"):
            _cut(run, node, ["r2", "ns1"])

    await _hold(run, cuts)


async def gray_consumer_cut_ns(run: Run) -> None:
    await _hold(run, lambda: _cut(run, "c-v2", run.cluster.ns_names))


async def gray_consumer_cut_broker(run: Run) -> None:
    await _hold(run, lambda: _cut(run, "c-v2", _others(run, -1)))


NEMESES: dict[str, Callable[[Run], Awaitable[None]]] = {f.__name__: f for f in (
    leader_cut, follower_cut, ns_cut_pg, asymmetric, flapping, majorities_ring, bridge, gray_consumer_cut_ns,
    gray_consumer_cut_broker)}


# -- the promote ----------------------------------------------------------------------------------
def _start_promote(run: Run) -> GraymqProcess:
    node = run.cluster.net.add("ctl-promote")
    return run.cluster.start("gray", "promote", GROUP, "--timeout", str(PROMOTE_TIMEOUT_S[run.case.nemesis]),
                             "--json", "--nameserver", run.cluster.ns_url, node=node, wait=False,
                             env={"GRAYMQ_ADMIN_TOKEN": "dev-token"})


def _promote_outcome(run: Run, promote: GraymqProcess) -> str:
    """How the promote ended; it must not report SUCCEEDED while an acknowledged gray message is unconsumed."""
    code = faults.wait_exit(promote.proc, 120)
    run.promote_ended_at = time.monotonic()
    reports = [line for line in promote.output.splitlines() if line.startswith("{")]
    report = json.loads(reports[-1]) if reports else {}
    run.promote_state = report.get("state")
    consumed = {c.msg_id for c in run.consumed if c.at <= run.promote_ended_at}
    gray_left = {s.msg_id for s in run.sent if s.gray} - consumed
    assert run.promote_state in ("SUCCEEDED", "FAILED"), f"promote ended {code}:\n{promote.output[-3000:]}"
    assert not (run.promote_state == "SUCCEEDED" and gray_left), (
        f"promote SUCCEEDED with {len(gray_left)} acknowledged gray message(s) unconsumed: {sorted(gray_left)[:5]}")
    return (f"promote {run.promote_state} ({report.get('message') or 'gray backlog 0'}), "
            f"{len(gray_left)} gray unconsumed when it ended")
