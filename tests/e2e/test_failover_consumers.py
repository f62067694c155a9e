"""A consumer reading a broker set goes on within seconds of its leader's kill -9, with the default leases (replica
lease 4 s, queue lease 30 s): the followers copied the queue leases, so the new leader lets their holder re-lock at
once instead of granting nothing for a whole queue lease; every acknowledged message is consumed."""

from __future__ import annotations

import os
import shutil
import signal
import time

import pytest

from graymq.devkit.processes import GraymqProcess
from tests.e2e.test_replication import NAME, TOPIC, in_sync, sent_ok, store_of
from tests.support.cli import json_lines, start_consumer, wait_for

pytestmark = pytest.mark.e2e


def _replica(cluster, replica: int) -> GraymqProcess:
    from tests.support.cluster import FAST_ENV

    return cluster._start("broker", "--name", NAME, "--replica-id", str(replica), "--replication", "sync",
                          "--port", "0", "--store", str(store_of(cluster, replica)), "--nameserver", cluster.ns_url,
                          "--segment-size", str(1 << 20), env=FAST_ENV)


def test_a_consumer_resumes_within_seconds_of_its_leaders_kill(graymq_process, fresh_pg_url, tmp_path) -> None:
    from tests.support.cluster import Cluster

    cluster = Cluster(graymq_process, fresh_pg_url, tmp_path)
    cluster.start_nameserver()  # the default replica lease
    ns = cluster.ns_url
    r0 = _replica(cluster, 0)
    wait_for(lambda: in_sync(ns, [0], leader=0), 30, "replica 0 leading")
    _replica(cluster, 1)
    wait_for(lambda: in_sync(ns, [0, 1]), 30, "replica 1 in sync")
    cluster.create_topic(TOPIC, 4, 0)
    reader = start_consumer(graymq_process, ns, "GID_FAILOVER", "reader", TOPIC, "*", "--from", "first")
    producer = graymq_process("produce", TOPIC, "--count", "2500", "--size", "64", "--interval", "0.01", "--json",
                              "--nameserver", ns, wait=False)
    wait_for(lambda: len(json_lines(reader)) > 200, 60, "the consumer reading the set")
    os.kill(r0.proc.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    r0.proc.wait(10)
    shutil.rmtree(store_of(cluster, 0))
    at_kill = len(json_lines(reader))
    # the queue lease is 30 s: before the leases were copied, nothing came for about that long
    wait_for(lambda: len(json_lines(reader)) > at_kill + 50, 25, "the consumer reading the new leader", 0.05)
    resumed_s = time.monotonic() - killed_at
    producer.proc.wait(180)
    acked = sent_ok(producer)
    wait_for(lambda: set(acked) <= {m["msg_id"] for m in json_lines(reader)}, 60, "every acked message consumed")
    assert reader.terminate() == 0
    print(f"consumer failover: leader killed (store deleted), consumer reading again {resumed_s:.2f} s later "
          f"(replica lease 4 s, queue lease 30 s); {len(acked)} acked, all consumed")
