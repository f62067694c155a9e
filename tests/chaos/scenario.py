"""Chaos cases: a fault injected by PID into a real cluster (name server on PostgreSQL, one broker) under the
workload, then the checkers over what was recorded.

Live faults (``kill9``, ``sigterm`` of the broker, ``stop_broker`` / ``stop_ns``: SIGSTOP then SIGCONT;
``pause_leader``: SIGSTOP of a broker set's leader for three replica leases, a follower elected meanwhile) hit the
cluster while producers and consumers run; ``promote`` runs ``graymq gray promote`` across the fault. Store faults
(``flip``: one byte of one record inverted; ``truncate``: the last segment cut inside a record) hit a stopped
broker's store after a load, cross-checked with ``graymq broker verify --json``; consumers start after the
restart, so the damaged records are exactly what they cannot get.

A ``pure`` case runs its brokers (and the store check) on the pure-Python hot path (``GRAYMQ_PURE=1``, what runs
where no compiler exists), the others on the compiled one; every broker is checked to run the path its case names.
The workload's clients run in the test process, on the path it loaded.

The fault's time, for the recovery column: the broker's exit for kill -9 and SIGTERM (a clean stop serves until
it exits), the SIGSTOP for a stall, the stop before the damage for a store fault. After a restart (kill -9, SIGTERM,
a store fault) both producers send for 2 s more, so the column measures the restarted broker taking new sends.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import time
from dataclasses import dataclass
from typing import Any

import httpx

from graymq.devkit.processes import GraymqProcess
from tests.chaos import faults
from tests.chaos.checkers import Sent, Window, messages_in
from tests.chaos.report import CaseResult, evaluate
from tests.chaos.workload import Workload
from tests.support.cli import wait_for
from tests.support.cluster import FAST_ENV, Cluster
from tests.support.hot_path import assert_runs, path_env

GROUP = "GID_CHAOS"
TOPIC = "TOPIC_CHAOS"
QUEUES, GRAY_QUEUES = 4, 2  # gray queues 0 and 3
BROKER = "broker-a"
SEGMENT = 64 * 1024  # small segments: a load spans several, so the last one can be cut
PAUSE_S = 3.0  # how long SIGSTOP lasts
DRAIN_TIMEOUT_S = 60.0
LEADER_PAUSE_S = 12.0  # three of the name server's default replica leases (4 s)
LIVE_FAULTS = ("kill9", "sigterm", "stop_broker", "stop_ns", "pause_leader")
STORE_FAULTS = ("flip", "truncate")


@dataclass(frozen=True)
class Case:
    fault: str  # one of LIVE_FAULTS + STORE_FAULTS
    flush: str  # "sync" | "async"
    promote: bool = False
    replication: str | None = None  # "sync" | "async": a broker set of two replicas instead of one broker
    pure: bool = False  # the brokers on the pure-Python hot path instead of the compiled one

    @property
    def broker_args(self) -> tuple[str, ...]:
        return ("--flush", self.flush, "--segment-size", str(SEGMENT))

    @property
    def hot_path(self) -> str:
        return "pure" if self.pure else "compiled"

    @property
    def name(self) -> str:
        return (f"{self.fault}/{self.flush}" + ("+promote" if self.promote else "")
                + (f"+{self.replication}_replicas" if self.replication else "") + ("+pure" if self.pure else ""))


def load_seconds() -> float:
    """How long producers run around a fault: ``CHAOS_SOAK_S`` for a soak, 6 s by default."""
    return float(os.environ.get("CHAOS_SOAK_S", "6"))


def case_timeout() -> float:
    """The bound on one case: setup, load, fault, restart and drain."""
    return 300 + 2 * load_seconds()


def run_case(cluster: Cluster, start: Any, case: Case) -> CaseResult:
    """Set up the topic and the gray rule, run ``case``, return what the checkers found."""
    if case.replication:
        _add_replica_set(cluster, case)
    else:
        assert_runs(cluster.add_broker(BROKER, *case.broker_args, **path_env(case.hot_path)), case.hot_path)
    cluster.create_topic(TOPIC, QUEUES, GRAY_QUEUES)
    cluster.ns_call(lambda ns: ns.add_rule(GROUP, {"version": "v2"}, True))
    workload = Workload(cluster.ns_url, TOPIC, GROUP)
    runner = _run_store_fault if case.fault in STORE_FAULTS else _run_live_fault
    began = time.monotonic()
    fault_at, expected_lost, notes = asyncio.run(asyncio.wait_for(runner(cluster, start, case, workload),
                                                                      case_timeout() - 60))
    notes.append(f"brokers on the {case.hot_path} hot path (checked in each broker process)")
    status = cluster.ns_call(lambda ns: ns.get_group(GROUP)).settings
    # Nothing turns the switch off or adopts during a case: isolation is in force throughout.
    assert status.gray_switch and status.orphan_policy == "hold", status
    isolated = [Window(began, time.monotonic())]
    gray_acked = {s.msg_id for s in workload.sent if s.gray}
    assert gray_acked, "the v2 producer sent nothing gray: the isolation check would be empty"
    notes.append(f"{len(gray_acked)} gray acked, {len({c.msg_id for c in workload.consumed if c.gray})} gray consumed "
                 f"(v1 got {sum(c.gray and c.version == 'v1' for c in workload.consumed)})")
    return evaluate(case.name, workload.attempts, workload.sent, workload.consumed, fault_at, isolated,
                    expected_lost, notes)


async def _run_live_fault(cluster: Cluster, start: Any, case: Case, workload: Workload
                          ) -> tuple[float, set[str], list[str]]:
    notes: list[str] = []
    stopped: list[int] = []
    producers: list[asyncio.Task[None]] = []
    try:
        await workload.start_consumer("v1a", "v1")
        await workload.start_consumer("v2a", "v2")
        duration = load_seconds() + (LEADER_PAUSE_S if case.fault == "pause_leader" else 0.0)  # load past it
        producers += [asyncio.create_task(workload.produce(f"producer-{v}", v, duration, max_count=int(duration * 150)))
                      for v in ("v1", "v2")]
        await asyncio.sleep(duration * 0.35)
        promote = _start_promote(cluster, start) if case.promote else None
        if promote is not None:
            await asyncio.to_thread(promote.wait_for_line, "started", 30)
        fault_at = await _inject(cluster, case, stopped)
        await asyncio.gather(*producers)
        if case.fault in ("kill9", "sigterm"):  # the load may end during the restart: the restarted broker's sends
            await _produce_after(workload)
        acked = {s.msg_id for s in workload.sent}
        expected_lost: set[str] = set()
        if not await workload.wait_consumed(acked, DRAIN_TIMEOUT_S):
            missing = acked - workload.consumed_ids()
            expected_lost = missing & _async_loss_window(case, workload.sent, fault_at)
            notes.append(f"not everything consumed after {DRAIN_TIMEOUT_S:.0f}s" if missing - expected_lost else
                         f"{len(missing)} acked by the leader alone before the pause, not copied: moved aside")
        if promote is not None:
            notes.append(await asyncio.to_thread(_promote_outcome, promote))
        return fault_at, expected_lost, notes
    finally:
        for pid in stopped:  # never leave a process stopped, whatever failed
            _continue(pid)
        for task in producers:
            task.cancel()
        await asyncio.gather(*producers, return_exceptions=True)
        await workload.stop_consumers()


async def _produce_after(workload: Workload) -> None:
    """Both producers again, for 2 s: traffic sent after the fault, for the recovery column."""
    await asyncio.gather(*(workload.produce(f"producer-{v}-after", v, 2.0, max_count=200) for v in ("v1", "v2")))


async def _inject(cluster: Cluster, case: Case, stopped: list[int]) -> float:
    """Inject a live fault; returns when it was injected (the process is back, or restarted, on return)."""
    fault = case.fault
    broker = cluster.brokers[BROKER]
    if fault in ("kill9", "sigterm"):
        faults.signal_pid(broker.proc.pid, signal.SIGKILL if fault == "kill9" else signal.SIGTERM)
        await asyncio.to_thread(faults.wait_exit, broker.proc, 30)
        fault_at = time.monotonic()  # the broker is gone (a clean stop serves until it exits)
        await asyncio.to_thread(_restart_broker, cluster, case)
        return fault_at
    target = broker if fault in ("stop_broker", "pause_leader") else cluster.nameservers[0]
    stopped.append(target.proc.pid)
    fault_at = faults.signal_pid(target.proc.pid, signal.SIGSTOP)
    await asyncio.sleep(LEADER_PAUSE_S if fault == "pause_leader" else PAUSE_S)
    faults.signal_pid(target.proc.pid, signal.SIGCONT)
    stopped.remove(target.proc.pid)
    return fault_at


def _async_loss_window(case: Case, sent: list[Sent], fault_at: float) -> set[str]:
    """What async replication may lose to a leader's fault: sends it acknowledged before the fault (not copied yet);
    nothing it acknowledges after (a paused leader wakes past its lease and acknowledges nothing)."""
    return {s.msg_id for s in sent if s.acked_at <= fault_at} if case.replication == "async" else set()


def _add_replica_set(cluster: Cluster, case: Case) -> None:
    """Replica 0 leading, then replica 1 in sync; ``cluster.brokers`` names the leader."""
    for replica in (0, 1):
        store = cluster.root / f"{BROKER}-r{replica}"
        proc = cluster._start("broker", "--name", BROKER, "--replica-id", str(replica), "--replication",
                              str(case.replication), "--port", "0", "--store", str(store), "--nameserver",
                              cluster.ns_url, *case.broker_args, env={**FAST_ENV, **path_env(case.hot_path)})
        assert_runs(proc, case.hot_path)
        if replica == 0:
            cluster.brokers[BROKER] = proc
        _wait_in_sync(cluster.ns_url, list(range(replica + 1)))


def _wait_in_sync(ns_url: str, want: list[int]) -> None:
    def in_sync() -> bool:
        brokers = httpx.get(f"{ns_url.split(',')[0]}/v1/brokers", timeout=5).json()
        return next((b["replica_set"]["in_sync"] for b in brokers
                     if b["broker_name"] == BROKER and b["replica_set"]), None) == want

    wait_for(in_sync, 30, f"replicas {want} of {BROKER} in sync")


def _continue(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


def _restart_broker(cluster: Cluster, case: Case) -> GraymqProcess:
    """The broker again on its store (a new port: clients learn it from the name server)."""
    cluster.brokers[BROKER].kill()
    broker = cluster.add_broker(BROKER, *case.broker_args, **path_env(case.hot_path))
    assert_runs(broker, case.hot_path)
    return broker


def _start_promote(cluster: Cluster, start: Any) -> GraymqProcess:
    return start("gray", "promote", GROUP, "--timeout", "90", "--json", "--nameserver", cluster.ns_url, wait=False,
                 env={"GRAYMQ_ADMIN_TOKEN": "dev-token"})


def _promote_outcome(promote: GraymqProcess) -> str:
    code = faults.wait_exit(promote.proc, 120)
    promote.kill()
    reports = [line for line in promote.output.splitlines() if line.startswith("{")]
    state = json.loads(reports[-1]).get("state") if reports else None
    assert code == 0 and state == "SUCCEEDED", f"promote ended {code} {state}:\n{promote.output[-3000:]}"
    return f"promote across the fault: {state}"


async def _run_store_fault(cluster: Cluster, start: Any, case: Case, workload: Workload
                           ) -> tuple[float, set[str], list[str]]:
    duration = min(load_seconds(), 6.0)
    await asyncio.gather(*(workload.produce(f"producer-{v}", v, duration, max_count=600, interval_s=0.002)
                           for v in ("v1", "v2")))
    broker = cluster.brokers[BROKER]
    assert await asyncio.to_thread(broker.terminate) == 0, broker.output[-2000:]
    fault_at = time.monotonic()
    store = cluster.root / BROKER
    rng = random.Random(case.name)
    expected, notes = (_flip(store, workload.sent, rng, case) if case.fault == "flip"
                       else _truncate(store, workload.sent, rng, case))
    try:
        await asyncio.to_thread(_restart_broker, cluster, case)
        await workload.start_consumer("v1a", "v1")
        await workload.start_consumer("v2a", "v2")
        await _produce_after(workload)
        want = {s.msg_id for s in workload.sent} - expected
        if not await workload.wait_consumed(want, DRAIN_TIMEOUT_S):
            notes.append(f"not everything consumed after {DRAIN_TIMEOUT_S:.0f}s")
    finally:
        await workload.stop_consumers()
    return fault_at, expected, notes


def _flip(store: Any, sent: list[Sent], rng: random.Random, case: Case) -> tuple[set[str], list[str]]:
    """Flip one byte of a record in the middle of the log; verify must report exactly that record as a hole."""
    ordered = sorted(sent, key=lambda s: s.commit_log_offset)
    i = len(ordered) // 2
    victim, after = ordered[i], ordered[i + 1]
    at = rng.randrange(4, after.commit_log_offset - victim.commit_log_offset)
    faults.flip_byte(store, victim.commit_log_offset, at)
    report = faults.verify_store(store, path_env(case.hot_path))
    in_holes = {s.msg_id for h in report["holes"] for s in messages_in(sent, h["physical_offset"], h["length"])}
    assert in_holes == {victim.msg_id}, (report, victim)
    return in_holes, [f"flipped byte {at} of {victim.msg_id} (commit log {victim.commit_log_offset}); verify: "
                      f"{len(report['holes'])} hole(s) holding {sorted(in_holes)}"]


def _truncate(store: Any, sent: list[Sent], rng: random.Random, case: Case) -> tuple[set[str], list[str]]:
    """Cut the last segment inside a record: it and every later record are gone; verify reports a torn tail."""
    ordered = sorted(sent, key=lambda s: s.commit_log_offset)
    last_segment = ordered[-1].commit_log_offset // SEGMENT * SEGMENT
    assert last_segment > 0, "the load filled less than one segment"
    tail = [s for s in ordered if s.commit_log_offset >= last_segment]
    victim, after = tail[len(tail) // 2], tail[len(tail) // 2 + 1]
    cut = victim.commit_log_offset + rng.randrange(1, after.commit_log_offset - victim.commit_log_offset)
    faults.truncate_at(store, cut)
    report = faults.verify_store(store, path_env(case.hot_path))
    assert report["torn_tail"] is not None and not report["holes"], report
    gone = {s.msg_id for s in ordered if s.commit_log_offset >= victim.commit_log_offset}
    return gone, [f"cut the commit log at {cut}: {len(gone)} acked record(s) from {victim.msg_id} on; "
                  f"verify: torn tail at {report['torn_tail']['file']}:{report['torn_tail']['offset']}"]
