"""A promote that flips a producer while one of its gray sends is under way waits for that send: the message lands
on its gray queue before the gray consumer drains, and the promote succeeds with no gray backlog left.

A retry of a send lost with a broker set's leader waits for the new leader, seconds after the promote may have
flipped its producer; here the test holds one gray send between the producer and the broker (real name server,
broker, consumers and promote runner) and lets it go once the name server has heard the producer's first report
after the flip: while that report says gray (the promote waits for the producer), or, had it said normal, once the
gray consumer has drained and flipped — the message would then be stranded on a gray queue no consumer holds, and
the promote would end FAILED with a gray backlog of 1 (or SUCCEEDED just before the message lands).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from graymq.client import Message, Producer
from graymq.runbooks.cutover import CutoverRunner
from graymq.runbooks.policy import CutoverPolicy
from tests.support.clients import Recorder, consumer, run_scenario, wait_until

pytestmark = pytest.mark.integration
TOPIC = "TOPIC_HELD"
GROUP = "GID_HELD"
V2 = {"version": "v2"}


class HeldSend:
    """The producer's brokers, its next SEND_MESSAGE held (before it reaches the broker) until ``release``."""

    def __init__(self, brokers: Any) -> None:
        self.brokers = brokers
        self.held = asyncio.Event()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.brokers, name)

    async def send(self, address: str, req: Any, timeout_s: float | None = None) -> Any:
        if not self.held.is_set():
            self.held.set()
            await self.release.wait()
        return await self.brokers.send(address, req, timeout_s)


class Beats:
    """Counts the producer's name-server heartbeats begun and answered."""

    def __init__(self, producer: Producer) -> None:
        self.begun = self.answered = 0
        beat = producer.membership.beat

        async def counted() -> dict[str, Any] | None:
            self.begun += 1
            response = await beat()
            self.answered += 1
            return response

        producer.membership.beat = counted  # type: ignore[method-assign]


async def release_after_the_flip_is_reported(producer: Producer, beats: Beats, gray_consumer: Any,
                                             admin: Any, held: HeldSend) -> bool:
    """Release the held send once the producer's first report after its flip was heard and says gray, or else once
    the gray consumer flipped normal; returns what that report said."""
    await wait_until(lambda: not producer.gray, 30, "the producer flipped normal")
    begun = beats.begun
    await wait_until(lambda: beats.answered > begun, 30, "a heartbeat begun after the flip answered")
    listed = (await admin.group_clients(GROUP, "producer")).clients
    reported_gray = any(c.client_id == "producer-v2" and c.gray for c in listed)
    if not reported_gray:
        await wait_until(lambda: not gray_consumer.gray, 30, "the gray consumer drained and flipped")
    held.release.set()
    return reported_gray


def test_a_promote_waits_for_a_gray_send_under_way_at_the_producers_flip(cluster) -> None:
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 4, 2)
    ns = cluster.ns_url
    cluster.ns_call(lambda c: c.add_rule(GROUP, V2, True))
    recorder = Recorder()
    out: dict[str, Any] = {}

    async def scenario() -> None:
        v1 = consumer(recorder, ns, GROUP, "v1", {TOPIC: "*"}, labels={"version": "v1"})
        v2 = consumer(recorder, ns, GROUP, "v2", {TOPIC: "*"}, labels=V2)
        producer = Producer(GROUP, ns, client_id="producer-v2", labels=V2, heartbeat_interval_s=0.3)
        admin = cluster.admin()
        for client in (v1, v2, producer):
            await client.start()
        try:
            await wait_until(lambda: producer.gray and v2.gray and not v1.gray, 30, "the release in place")
            assert (await producer.send(Message(TOPIC, b"before"))).gray
            beats, held = Beats(producer), HeldSend(producer.brokers)
            producer.brokers = held  # type: ignore[assignment]
            sending = asyncio.create_task(producer.send(Message(TOPIC, b"held"), timeout_s=120))
            await held.held.wait()
            runner = CutoverRunner(admin, GROUP, CutoverPolicy(timeout_s=30))
            promoting = asyncio.create_task(runner.promote())
            out["reported_gray"] = await release_after_the_flip_is_reported(producer, beats, v2, admin, held)
            out["held"] = await sending
            out["report"] = (await asyncio.gather(promoting, return_exceptions=True))[0]
            out["backlog_after"] = (await runner.inspector.status(GROUP)).gray_backlog  # the held send answered
            await runner.close()
        finally:
            for client in (producer, v2, v1):
                await client.stop()
            await admin.close()

    run_scenario(scenario, 120)
    report, held_msg = out["report"], out["held"]
    assert held_msg.gray and out["backlog_after"] == 0, "a gray message stranded after the gray consumer flipped"
    assert [e.client_id for e in recorder.events if e.msg_id == held_msg.msg_id] == ["v2"]  # drained before the flip
    assert not isinstance(report, BaseException), getattr(report, "report", report)
    assert (report.state, report.gray_backlog, report.gray_consumers_left) == ("SUCCEEDED", 0, [])
    assert out["reported_gray"]  # the promote waited: the producer reported gray until its gray send was answered
