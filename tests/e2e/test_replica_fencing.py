"""A paused leader (SIGSTOP for several leases) wakes deposed: it acknowledges nothing after its lease ran out on
its own monotonic clock, so every message acknowledged to a long-lived producer across the pause is consumable on
the new leader (before the fence, the woken leader acknowledged sends on old connections for ~0.2 s, and those
messages were moved aside when it followed). Queue locks and offset commits are fenced alike."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import NotLeaderError
from tests.e2e.test_replication import LEASE_S, TOPIC, in_sync, rs_cluster, sent_ok, start_set  # noqa: F401
from tests.support.broker import heartbeat
from tests.support.cli import json_lines, start_consumer, wait_for

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_a_leader_paused_past_its_lease_acknowledges_nothing_on_waking(
    rs_cluster, graymq_process, mode  # noqa: F811
) -> None:
    cluster = rs_cluster
    ns = cluster.ns_url
    r0, _ = start_set(cluster, mode, lag_s="30")
    cluster.create_topic(TOPIC, 4, 0)
    producer = graymq_process("produce", TOPIC, "--count", "1500", "--size", "64", "--interval", "0.01", "--json",
                              "--nameserver", ns, wait=False)
    wait_for(lambda: len(sent_ok(producer)) > 100, 60, "load before the pause")
    os.kill(r0.proc.pid, signal.SIGSTOP)
    try:
        wait_for(lambda: in_sync(ns, [1], leader=1), 30, "replica 1 elected while replica 0 is paused")
        time.sleep(3 * float(LEASE_S))  # several leases in all: the paused leader's connections stay open
    finally:
        os.kill(r0.proc.pid, signal.SIGCONT)
    producer.proc.wait(180)
    acked = sent_ok(producer)
    reader = start_consumer(graymq_process, ns, f"GID_FENCE_{mode.upper()}", "reader", TOPIC, "*", "--from",
                            "first")
    try:
        wait_for(lambda: set(acked) <= {m["msg_id"] for m in json_lines(reader)}, 60,
                 "every acknowledged message consumed")
    finally:
        reader.terminate()
        lost = set(acked) - {m["msg_id"] for m in json_lines(reader)}
        print(f"{mode} leader paused {3 * float(LEASE_S) :.0f}+ s: {len(acked)} acked, {len(lost)} not consumable")


def test_a_woken_deposed_leader_refuses_queue_locks_and_offset_commits_on_old_connections(
    rs_cluster, graymq_process  # noqa: F811
) -> None:
    cluster = rs_cluster
    ns = cluster.ns_url
    r0, _ = start_set(cluster, "async", lag_s="30")
    cluster.create_topic(TOPIC, 4, 0)

    async def main() -> list[BaseException | object]:
        client = BrokerClient(timeout_s=20)
        try:
            await heartbeat(client, r0.address, "c1", "GID_FENCE", {TOPIC: "*"}, gray=False)  # the connection
            os.kill(r0.proc.pid, signal.SIGSTOP)
            try:
                await asyncio.to_thread(wait_for, lambda: in_sync(ns, [1], leader=1), 30, "replica 1 elected")
                # sent while replica 0 is paused: it reads them first thing on waking
                calls = [asyncio.ensure_future(client.update_offset(r0.address, "GID_FENCE", TOPIC, 1, 0, "c1")),
                         asyncio.ensure_future(client.lock_queues(r0.address, "GID_FENCE", "c1", [(TOPIC, 2)]))]
                await asyncio.sleep(0.5)
            finally:
                os.kill(r0.proc.pid, signal.SIGCONT)
            return list(await asyncio.gather(*calls, return_exceptions=True))
        finally:
            await client.close()

    answers = asyncio.run(main())
    assert [type(a) for a in answers] == [NotLeaderError, NotLeaderError], answers
