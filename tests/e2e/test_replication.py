"""Broker sets end to end, with real processes: two replicas under sync replication, a producer and consumers under
load; the leader is killed (kill -9) and its store deleted; a follower leads within seconds, the producer goes on,
every acknowledged message is there once in queue order; the old replica restarted empty catches up and rejoins the
in-sync set. Under async replication, what a deposed leader acknowledged but never copied is moved aside, counted
and kept, never dropped silently. A sync leader serves consumers only what its in-sync follower stored. A promote
running across the failover loses nothing. The failover and the moving
aside are checked on the compiled hot path and on the pure one (``GRAYMQ_PURE=1``: the replicas, and in the
failover the producer and consumer processes too).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import threading
import time
from collections import Counter, defaultdict
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from graymq.client import BlockingProducer, Message, Producer, SendResult
from graymq.devkit.processes import GraymqProcess
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import TopicNotExistError
from graymq.protocol.record import iter_records
from tests.integration.client.test_blocking_producer import stored
from tests.support.broker import pull_request, run, send
from tests.support.cli import graymq, json_lines, start_consumer, wait_for
from tests.support.hot_path import HOT_PATHS, assert_runs, path_env

pytestmark = pytest.mark.e2e
NAME = "broker-rs"
TOPIC = "TOPIC_RS"
LEASE_S = "2"
SEND_TIMEOUT_S = 5.0  # the producers' send timeout in the election test: the lease and a route refresh fit in it
ASYNC_IN_FLIGHT = 400  # the async producer's sends started and not finished, at most, in the election test


@pytest.fixture
def rs_cluster(graymq_process, fresh_pg_url, tmp_path):
    from tests.support.cluster import Cluster

    cluster = Cluster(graymq_process, fresh_pg_url, tmp_path)
    cluster.start_nameserver(GRAYMQ_REPLICA_LEASE_SECONDS=LEASE_S)
    return cluster


@pytest.fixture
def steady_cluster(graymq_process, fresh_pg_url, tmp_path):
    """A name server whose leader leases outlast a loaded machine's stalls: no election unless a test makes one."""
    from tests.support.cluster import Cluster

    cluster = Cluster(graymq_process, fresh_pg_url, tmp_path)
    cluster.start_nameserver(GRAYMQ_REPLICA_LEASE_SECONDS="12")
    return cluster


def start_replica(cluster, replica: int, mode: str = "sync", lag_s: str = "1.5", hot_path: str = "compiled",
                  env: dict[str, str] | None = None) -> GraymqProcess:
    from tests.support.cluster import FAST_ENV

    proc = cluster._start("broker", "--name", NAME, "--replica-id", str(replica), "--replication", mode,
                          "--port", "0", "--store", str(store_of(cluster, replica)), "--nameserver", cluster.ns_url,
                          "--segment-size", str(1 << 20),
                          env={**FAST_ENV, "GRAYMQ_BROKER_REPLICA_LAG_S": lag_s, "GRAYMQ_BROKER_QUEUE_LEASE_S": "5",
                               **path_env(hot_path), **(env or {})})
    assert_runs(proc, hot_path)
    return proc


def start_set(cluster, mode: str = "sync", lag_s: str = "1.5", hot_path: str = "compiled",
              env: dict[str, str] | None = None) -> tuple[GraymqProcess, GraymqProcess]:
    """Replica 0, leading once it reports, then replica 1, once it is in sync."""
    r0 = start_replica(cluster, 0, mode, lag_s, hot_path, env)
    wait_for(lambda: in_sync(cluster.ns_url, [0], leader=0), 30, "replica 0 leading")
    r1 = start_replica(cluster, 1, mode, lag_s, hot_path, env)
    wait_for(lambda: in_sync(cluster.ns_url, [0, 1]), 30, "replica 1 in sync")
    return r0, r1


def store_of(cluster, replica: int) -> Path:
    return Path(cluster.root) / f"{NAME}-r{replica}"


def replica_set(ns_url: str) -> dict[str, Any] | None:
    brokers = httpx.get(f"{ns_url.split(',')[0]}/v1/brokers", timeout=5).json()
    return next((b["replica_set"] for b in brokers if b["broker_name"] == NAME and b["replica_set"]), None)


def in_sync(ns_url: str, replicas: list[int], leader: int | None = None) -> bool:
    rs = replica_set(ns_url)
    return rs is not None and rs["in_sync"] == replicas and (leader is None or rs["leader_replica_id"] == leader)


def route_address(ns_url: str) -> str:
    route = httpx.get(f"{ns_url.split(',')[0]}/v1/topics/{TOPIC}/route", timeout=5).json()
    return str(route["brokers"][0]["address"])


def sent_ok(proc: GraymqProcess) -> dict[str, dict[str, Any]]:
    return {s["msg_id"]: s for s in json_lines(proc) if s.get("status") == "SEND_OK"}


def check_order(consumed: list[dict[str, Any]]) -> int:
    """Per queue, the messages come in queue-offset order with no offset twice; returns how many queues."""
    by_queue: dict[int, list[int]] = defaultdict(list)
    for m in consumed:
        by_queue[m["queue_id"]].append(m["queue_offset"])
    for queue_id, offsets in by_queue.items():
        assert offsets == sorted(set(offsets)), f"queue {queue_id} out of order or repeated"
    return len(by_queue)


@pytest.mark.parametrize("hot_path", HOT_PATHS)
def test_sync_replication_survives_the_leader_dying_with_its_disk(rs_cluster, graymq_process, hot_path) -> None:
    cluster = rs_cluster
    ns = cluster.ns_url
    start = partial(graymq_process, env=path_env(hot_path))  # the producer and the consumer on the same path
    r0, _ = start_set(cluster, hot_path=hot_path)
    cluster.create_topic(TOPIC, 4, 0)
    producer = start("produce", TOPIC, "--count", "3000", "--size", "256", "--interval", "0.003", "--json",
                     "--nameserver", ns, wait=False)
    wait_for(lambda: len(sent_ok(producer)) > 600, 60, "load before the fault")
    assert_runs(producer, hot_path)
    old_address = route_address(ns)
    acked_before = len(sent_ok(producer))
    os.kill(r0.proc.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    r0.proc.wait(10)
    shutil.rmtree(store_of(cluster, 0))
    wait_for(lambda: route_address(ns) != old_address, 30, "a new leader in the route", 0.05)
    failover_s = time.monotonic() - killed_at
    assert in_sync(ns, [1], leader=1)
    producer.proc.wait(180)
    acked = sent_ok(producer)
    failed = [s for s in json_lines(producer) if s.get("status") == "FAILED"]

    start_replica(cluster, 0, hot_path=hot_path)  # empty: it copies the whole log and rejoins the in-sync set
    rejoin_began = time.monotonic()
    wait_for(lambda: in_sync(ns, [0, 1], leader=1), 60, "the empty replica caught up and in sync again")
    rejoin_s = time.monotonic() - rejoin_began
    route = json.loads(graymq(ns, "topic", "route", TOPIC, "--json").stdout)
    assert [(r["broker_name"], r["replica_id"], r["leader"], r["in_sync"]) for r in route["replicas"]] == [
        (NAME, 0, False, True), (NAME, 1, True, True)]
    assert route["brokers"][0]["address"] == route["replicas"][1]["address"]  # today's fields name the leader

    reader = start_consumer(start, ns, "GID_RS", "reader", TOPIC, "*", "--from", "first")
    assert_runs(reader, hot_path)
    wait_for(lambda: set(acked) <= {m["msg_id"] for m in json_lines(reader)}, 90, "every acked message consumed")
    # the restarted replica may drop out of the in-sync set for a moment (no fetch for the 1.5 s lag on a loaded
    # machine) and rejoin: the status is read until it shows the set whole
    expected = f"broker set {NAME} (sync): leader replica 1 at epoch 2, followers 0 (in sync"
    wait_for(lambda: expected in graymq(ns, "gray", "status", "GID_RS").stdout, 30, f"gray status saying {expected}")
    assert reader.terminate() == 0
    consumed = json_lines(reader)
    counts = Counter(m["msg_id"] for m in consumed)
    lost = set(acked) - set(counts)
    stored_twice = sum(n - 1 for n in counts.values())
    queues = check_order(consumed)
    epoch = replica_set(ns)["epoch"]  # type: ignore[index]
    print(f"sync failover ({hot_path} hot path): leader killed with its store after {acked_before} acked; new leader "
          f"in the route after {failover_s:.2f} s (lease {LEASE_S} s); {len(acked)} acked of 3000, {len(failed)} "
          f"failed sends, {len(consumed)} consumed, lost {len(lost)}, stored twice {stored_twice}, order kept on "
          f"{queues} queues; the empty replica in sync again {rejoin_s:.2f} s after its start (epoch {epoch}); "
          f"failed with {dict(Counter(s['error'][:100] for s in failed))}")
    assert not lost, f"{len(lost)} acked messages lost"
    assert stored_twice == 0
    assert len(acked) + len(failed) == 3000


@pytest.mark.parametrize("hot_path", HOT_PATHS)
def test_async_replication_moves_aside_what_a_deposed_leader_acked_alone(rs_cluster, graymq_process, hot_path
                                                                         ) -> None:
    cluster = rs_cluster
    ns = cluster.ns_url
    r0, r1 = start_set(cluster, "async", lag_s="30", hot_path=hot_path)  # r1 stays in sync while stopped
    cluster.create_topic(TOPIC, 4, 0)
    first = json.loads(graymq(ns, "produce", TOPIC, "--count", "50", "--json").stdout.splitlines()[-1])
    assert first["status"] == "SEND_OK"
    wait_for(lambda: _log_ends(ns)[0] == _log_ends(ns)[1], 30, "replica 1 caught up")
    os.kill(r1.proc.pid, signal.SIGSTOP)  # the follower stops copying but is still in sync for a moment
    try:
        alone = [json.loads(line) for line in graymq(ns, "produce", TOPIC, "--count", "20", "--json").stdout
                 .splitlines() if line.startswith("{")]
        assert all(s["status"] == "SEND_OK" for s in alone)  # async: acked by the leader alone
        os.kill(r0.proc.pid, signal.SIGKILL)
        r0.proc.wait(10)
    finally:
        os.kill(r1.proc.pid, signal.SIGCONT)
    wait_for(lambda: in_sync(ns, [1], leader=1), 30, "replica 1 elected")
    # its store kept: 20 messages the leader lacks
    restarted = start_replica(cluster, 0, "async", lag_s="30", hot_path=hot_path)
    wait_for(lambda: in_sync(ns, [0, 1], leader=1), 60, "the deposed replica back in sync")
    [aside] = list((store_of(cluster, 0) / "moved-aside").iterdir())
    moved_bytes = aside.stat().st_size
    assert moved_bytes > 0
    restarted.wait_for_line("moved", timeout=5)
    listed = json.loads(graymq(ns, "broker", "moved-aside", "--store", str(store_of(cluster, 0)), "--json").stdout)
    [entry] = listed["files"]
    # the follower may have taken the first of them before it stopped: the rest were moved aside
    assert 0 < entry["messages"] <= 20 and entry["topics"] == {TOPIC: entry["messages"]} and not entry["damaged"]
    reader = start_consumer(graymq_process, ns, "GID_RS_ASIDE", "reader", TOPIC, "*", "--from", "first")
    graymq(ns, "broker", "moved-aside", "--store", str(store_of(cluster, 0)), "--republish")
    assert not list((store_of(cluster, 0) / "moved-aside").glob("*.log"))  # published: renamed, not again
    wait_for(lambda: len(json_lines(reader)) >= 70, 60, "the 50 + 20 consumed, the moved-aside ones republished")
    assert reader.terminate() == 0
    assert len({m["msg_id"] for m in json_lines(reader)}) == len(json_lines(reader)) == 70
    print(f"async failover ({hot_path} hot path): of {len(alone)} messages acked by the leader alone, "
          f"{entry['messages']} were moved aside on its return ({moved_bytes} bytes) and published again: 70 of 70 "
          "consumed")


def test_a_sync_leader_serves_consumers_only_what_its_in_sync_follower_stored(steady_cluster) -> None:
    """A send in flight while the follower is stopped is stored by the leader but not served; once the follower
    resumes, the send is acknowledged and a long poll held meanwhile gets the message, once."""
    cluster = steady_cluster
    r0, r1 = start_set(cluster, lag_s="30", env={"GRAYMQ_BROKER_REPLICATION_TIMEOUT_S": "60"})  # r1 stays in sync
    cluster.create_topic(TOPIC, 1, 0)
    address = route_address(cluster.ns_url)

    def pull(offset: int, suspend_ms: int = 0) -> pb.PullRequest:
        return pull_request("GID_RS_CONFIRMED", "reader", TOPIC, 0, offset, suspend_ms=suspend_ms, expression="*")

    async def scenario(client: BrokerClient) -> tuple[pb.PullResponse, pb.PullResponse, pb.SendResponse]:
        # the leader picks the topic up at its next registration (create_topic waits for no replica: they are not
        # the cluster's brokers); a send before it failed TOPIC_NOT_EXIST in CI
        for _ in range(150):
            try:
                await client.max_offset(address, TOPIC, 0)
                break
            except TopicNotExistError:
                await asyncio.sleep(0.1)
        assert (await send(client, address, TOPIC, 0, b"first")).status == pb.SEND_OK
        os.kill(r1.proc.pid, signal.SIGSTOP)
        try:
            in_flight = asyncio.ensure_future(send(client, address, TOPIC, 0, b"second"))
            for _ in range(500):  # the leader stored it (its queue holds 2) while the send waits for the follower
                early = await client.pull(address, pull(1))
                if early.max_offset == 2:
                    break
                await asyncio.sleep(0.02)
            assert await client.max_offset(address, TOPIC, 0) == 1  # what consumers may read up to
            held = asyncio.ensure_future(client.pull(address, pull(1, suspend_ms=30_000)))
            await asyncio.sleep(0.2)  # the long poll reaches the broker and is held there
            assert not in_flight.done() and not held.done()
        finally:
            os.kill(r1.proc.pid, signal.SIGCONT)
        return early, await held, await asyncio.wait_for(in_flight, 30)

    early, woken, acked = run(scenario)
    assert early.status == pb.NO_NEW_MSG and early.max_offset == 2  # stored, not yet served
    assert acked.status == pb.SEND_OK
    assert woken.status == pb.FOUND and woken.record_count == 1  # woken by the follower's fetch, not the timeout
    everything = run(lambda client: client.pull(address, pull(0)))
    assert [m.body for m in iter_records(everything.records)] == [b"first", b"second"]


def _log_ends(ns_url: str) -> dict[int, int]:
    rs = replica_set(ns_url)
    return {r["replica_id"]: r["log_end_offset"] for r in (rs or {}).get("replicas", [])}


def test_a_promote_across_a_failover_completes_losing_nothing(rs_cluster, graymq_process) -> None:
    """The gray producer's send in flight at the leader's kill is retried to its gray queue at the new leader,
    maybe after the producer was flipped normal: the producer reports gray until that send is answered, so the
    gray consumer drains after it lands and no gray message is left on a queue no consumer holds."""
    cluster = rs_cluster
    ns = cluster.ns_url
    r0, _ = start_set(cluster)
    cluster.create_topic(TOPIC, 6, 2)
    group = "GID_RS_PROMOTE"
    cluster.ns_call(lambda c: c.add_rule(group, {"version": "v2"}, True))
    consumers = [start_consumer(graymq_process, ns, group, cid, TOPIC, "*", "--label", f"version={cid[:2]}",
                                "--from", "first") for cid in ("v1a", "v2a")]
    producers = [graymq_process("produce", TOPIC, "--group", group, "--label", f"version={v}", "--count", "1200",
                                "--size", "128", "--interval", "0.004", "--json", "--client-id", f"producer-{v}",
                                "--nameserver", ns, wait=False) for v in ("v1", "v2")]
    wait_for(lambda: all(len(sent_ok(p)) > 200 for p in producers), 60, "load from both producers")
    promote = graymq_process("gray", "promote", group, "--timeout", "120", "--json", "--nameserver", ns, wait=False)
    time.sleep(0.3)
    os.kill(r0.proc.pid, signal.SIGKILL)
    r0.proc.wait(10)
    shutil.rmtree(store_of(cluster, 0))
    assert promote.proc.wait(150) == 0, promote.output[-3000:]
    report = json.loads([line for line in promote.output.splitlines() if line.startswith("{")][-1])
    assert report["state"] == "SUCCEEDED"
    for p in producers:
        p.proc.wait(120)
    acked = {k: v for p in producers for k, v in sent_ok(p).items()}
    wait_for(lambda: set(acked) <= {m["msg_id"] for c in consumers for m in json_lines(c)}, 120,
             "every acked message consumed")
    for c in consumers:
        assert c.terminate() == 0
    consumed = Counter(m["msg_id"] for c in consumers for m in json_lines(c))
    lost = set(acked) - set(consumed)
    print(f"promote across a failover: {report['state']} in {sum(report['timings_s'].values()):.2f} s; "
          f"{len(acked)} acked, lost {len(lost)}, delivered twice {sum(n - 1 for n in consumed.values())}")
    assert not lost


def test_sends_during_an_election_wait_for_the_new_leader_none_failing(rs_cluster) -> None:
    """Both producers send while the leader is killed: a send started during the election (an async task or a
    thread that starts after the kill) finds the set leaderless on its first attempt (no connection, NOT_LEADER),
    has no other broker to go to, and waits for the election within its timeout instead of spending its retries
    at once; a send in flight at the kill is resent to the new leader under its sequence — and with hundreds of
    async sends in flight, the producer's send window keeps newer sequences from overtaking it there."""
    cluster = rs_cluster
    ns = cluster.ns_url
    r0, _ = start_set(cluster)
    cluster.create_topic(TOPIC, 4, 0)
    stop, killed = threading.Event(), threading.Event()
    outcomes: list[SendResult | BaseException] = []
    senders = [threading.Thread(target=_blocking_sends, args=(ns, n, after, stop, outcomes))
               for n, after in enumerate([None, None, killed, killed])]
    senders.append(threading.Thread(target=lambda: asyncio.run(_async_sends(ns, killed, stop, outcomes))))
    for sender in senders:
        sender.start()
    wait_for(lambda: len(outcomes) > 400, 60, "load before the fault")
    old_address = route_address(ns)
    sent_before = len(outcomes)
    os.kill(r0.proc.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    killed.set()
    r0.proc.wait(10)
    wait_for(lambda: route_address(ns) != old_address, 30, "a new leader in the route", 0.05)
    failover_s = time.monotonic() - killed_at
    wait_for(lambda: len(outcomes) > sent_before + 400, 60, "load after the election")
    stop.set()
    for sender in senders:
        sender.join(2 * SEND_TIMEOUT_S + 30)
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    acked = {o.msg_id for o in outcomes if isinstance(o, SendResult)}
    counts = stored(ns, TOPIC, (NAME,))  # read from the set's new leader
    lost = acked - set(counts)
    stored_twice = sum(n - 1 for n in counts.values())
    print(f"sends during an election: new leader in the route {failover_s:.2f} s after the kill (lease {LEASE_S} s,"
          f" send timeout {SEND_TIMEOUT_S} s); {len(acked)} acknowledged of {len(outcomes)} sent, {len(failed)} "
          f"failed, lost {len(lost)}, stored twice {stored_twice}; failed with "
          f"{dict(Counter(repr(e)[:100] for e in failed))}")
    assert failover_s < SEND_TIMEOUT_S - 1.0, "the election outlasted the send timeout: nothing to check"
    assert not failed, failed[:3]
    assert not lost, [o for o in outcomes if isinstance(o, SendResult) and o.msg_id in lost]
    assert stored_twice == 0


def _blocking_sends(ns: str, n: int, after: threading.Event | None, stop: threading.Event,
                    outcomes: list[SendResult | BaseException]) -> None:
    """One thread's sends, one at a time, from ``after`` on (its producer made then: the route as the name server
    has it, no connection yet)."""
    if after is not None:
        after.wait(60)
    with BlockingProducer("GID_RS_ELECTION_BLOCKING", ns, send_timeout_s=SEND_TIMEOUT_S) as producer:
        while not stop.is_set():
            try:
                outcomes.append(producer.send(Message(TOPIC, f"blocking-{n}".encode())))
            except Exception as exc:  # noqa: BLE001 - collected for the assertions
                outcomes.append(exc)
            time.sleep(0.005)


async def _async_sends(ns: str, killed: threading.Event, stop: threading.Event,
                       outcomes: list[SendResult | BaseException]) -> None:
    """One producer, a new send task every 5 ms, up to ``ASYNC_IN_FLIGHT`` unfinished at once (about 200 wait
    through the election): far more than the five recent sequences a broker keeps per producer and queue
    (broker_ext/processors/producer_table.py), so only the producer's send window keeps a resend from being
    overtaken."""
    producer = Producer("GID_RS_ELECTION_ASYNC", ns, send_timeout_s=SEND_TIMEOUT_S)
    await producer.start()
    in_flight: set[asyncio.Task[None]] = set()
    most = 0

    async def send(n: int) -> None:
        try:
            outcomes.append(await producer.send(Message(TOPIC, f"async-{n}".encode())))
        except Exception as exc:  # noqa: BLE001 - collected for the assertions
            outcomes.append(exc)

    try:
        n = 0
        while not stop.is_set():
            if len(in_flight) < ASYNC_IN_FLIGHT:
                task = asyncio.create_task(send(n))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
                n += 1
            most = max(most, len(in_flight))
            await asyncio.sleep(0.005)
        await asyncio.gather(*in_flight)
    finally:
        await producer.stop()
    print(f"async sends: {n} started, at most {most} unfinished at once (after the kill: {killed.is_set()})")

