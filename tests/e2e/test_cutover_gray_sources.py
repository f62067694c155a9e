"""Promote and rollback keep their promise with every source of gray under load (core/gray_side.py).

Three producers send to the release's topic in producer group GID_ORDER: a normal one (v1), one that
marks every message gray itself (``graymq produce --gray``) and a relay that sends while handling gray
messages of another topic (the propagated mark). Once the operation has told them to be normal nothing
they send lands in the gray queues, so the gray consumers drain a backlog that stops growing.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from graymq.client import ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from graymq.devkit.processes import GraymqProcess
from tests.e2e.test_cutover import (  # noqa: F401  (release: the shared fixture)
    GRAY_QUEUES,
    GROUP,
    TOPIC,
    consumed,
    release,
    sent_messages,
    start_producer,
    stop_all,
)
from tests.support.cli import graymq, wait_for
from tests.support.clients import FAST, run_scenario, wait_until

pytestmark = pytest.mark.e2e
SOURCE_TOPIC = "TOPIC_V_SOURCE"
RELAY_GROUP = "GID_RELAY"
SOURCE_COUNT = 1500


def start_marking_producer(graymq_process, ns: str, count: int) -> GraymqProcess:
    """``graymq produce --gray``: every message marked gray by the producer itself."""
    return graymq_process("produce", TOPIC, "--group", GROUP, "--gray", "--count", str(count), "--size", "64",
                          "--interval", "0.004", "--json", "--client-id", "producer-marks", "--nameserver", ns,
                          wait=False)


class Relay:
    """A gray consumer of SOURCE_TOPIC whose listener sends each message on to TOPIC (producer group GID_ORDER):
    its sends carry the handled message's gray mark while the release honours it."""

    def __init__(self, ns: str) -> None:
        self.sent: list[dict[str, Any]] = []
        self.producer = Producer(GROUP, ns, client_id="relay", heartbeat_interval_s=0.5)
        self.consumer = PushConsumer(RELAY_GROUP, ns, listener=self.on_messages, client_id="relay-in", gray=True,
                                     consume_from="first", **FAST)  # type: ignore[arg-type]
        self.consumer.subscribe(SOURCE_TOPIC, "*")

    async def on_messages(self, messages: list[MessageExt]) -> ConsumeStatus:
        for m in messages:
            r = await self.producer.send(Message(TOPIC, m.body))
            self.sent.append({"msg_id": r.msg_id, "queue_id": r.queue.queue_id, "gray": r.gray,
                              "handled_gray": m.gray, "status": r.status.value})
        return ConsumeStatus.CONSUME_SUCCESS

    async def __aenter__(self) -> Relay:
        await self.producer.start()
        await self.consumer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.consumer.stop()
        await self.producer.stop()


def run_operation(cluster, graymq_process, consumers: dict[str, GraymqProcess], *operation: str) -> None:
    ns = cluster.ns_url
    cluster.create_topic(SOURCE_TOPIC, 4, 2)
    source = graymq_process("produce", SOURCE_TOPIC, "--group", "GID_SOURCE", "--gray", "--count", str(SOURCE_COUNT),
                            "--size", "32", "--interval", "0.01", "--json", "--nameserver", ns, wait=False)
    producers = [start_producer(graymq_process, ns, "v1", 2000), start_marking_producer(graymq_process, ns, 2000)]

    async def scenario() -> None:
        async with Relay(ns) as relay:
            await wait_until(lambda: sum(s["gray"] for s in relay.sent) > 20
                             and len(sent_messages(*producers)) > 300, 60, "load from the three producers")
            result = await asyncio.to_thread(graymq, ns, "gray", *operation, GROUP, "--timeout", "90", "--json",
                                             timeout=120)
            report = json.loads(result.stdout.strip().splitlines()[-1])
            assert report["state"] == "SUCCEEDED" and report["gray_backlog"] == 0, report
            flipped = " ".join(report["producers_flipped"])
            assert all(p in flipped for p in ("producer-v1", "producer-marks", "relay")), flipped
            after = len(relay.sent)
            await asyncio.to_thread(source.proc.wait, 120)
            for p in producers:
                await asyncio.to_thread(p.proc.wait, 120)
            await wait_until(lambda: len(relay.sent) >= after + 20 or len(relay.sent) >= SOURCE_COUNT, 60,
                             "the relay to send after the operation")
            later = relay.sent[after:]
            assert later and not any(s["gray"] for s in later), "the relay sent gray after the operation"
            assert any(s["handled_gray"] for s in later)  # it still handled gray messages: the mark was refused
            await wait_until(lambda: len(relay.sent) == SOURCE_COUNT, 90, "the relay to pass every source message on")
            relayed = relay.sent

        sent = {**sent_messages(*producers), **{s["msg_id"]: s for s in relayed}}
        marked = sent_messages(producers[1])
        assert any(s["gray"] for s in marked.values()) and not all(s["gray"] for s in marked.values())
        for s in sent.values():
            assert s["gray"] == (s["queue_id"] in GRAY_QUEUES), s  # the reported side is the side it took
        await asyncio.to_thread(wait_for, lambda: set(sent) <= {m["msg_id"] for m in consumed(consumers)}, 90,
                                "every message consumed")
        status = json.loads((await asyncio.to_thread(graymq, ns, "gray", "status", GROUP, "--json")).stdout)
        assert status["gray_backlog"] == 0, status
        check_gray_queues_went_to_v2(sent, consumers, status, operation[0])
        print(f"{operation[0]} with every gray source: sent {len(sent)} ({sum(s['gray'] for s in sent.values())} "
              f"gray), relayed {len(relayed)}, timings {report['timings_s']}")

    run_scenario(scenario, timeout=280)
    stop_all(consumers)  # rollback: the gray consumers hold only empty gray queues and can go
    status = json.loads(graymq(ns, "gray", "status", GROUP, "--json").stdout)
    assert status["gray_backlog"] == 0 and not any(c["gray"] for c in status["clients"]), status


def check_gray_queues_went_to_v2(sent: dict[str, dict], consumers: dict[str, GraymqProcess], status: dict,
                                 kind: str) -> None:
    events = consumed(consumers)
    by_id = {m["msg_id"]: m for m in events}
    assert not set(sent) - set(by_id), "messages lost"
    for m in events:
        if m["client_id"].startswith("v1"):
            assert m["queue_id"] not in GRAY_QUEUES, f"v1 consumed a gray queue: {m}"
    for msg_id, s in sent.items():
        if s["gray"]:
            assert by_id[msg_id]["client_id"].startswith("v2"), f"a gray message not consumed by v2: {by_id[msg_id]}"
    assert not any(c["gray"] for c in status["clients"] if c["role"] == "producer" or kind == "promote"), status


def test_promote_with_every_gray_source_strands_nothing(release, graymq_process):  # noqa: F811
    cluster, consumers = release
    run_operation(cluster, graymq_process, consumers, "promote")


def test_rollback_with_every_gray_source_strands_nothing(release, graymq_process):  # noqa: F811
    cluster, consumers = release
    run_operation(cluster, graymq_process, consumers, "rollback", "--drain")
