"""Two lanes in one consumer group under load, on PostgreSQL: lane v2 is promoted while v3 keeps consuming, then v3
is rolled back (drain); nothing is lost or consumed twice, no message of a lane reaches a consumer of another lane or
of base while its lane had a consumer, and the lanes give their slots back (docs/lanes.md). A second group on the
topic takes part in no lane: its base consumer adopts both lanes' queues and consumes every message once, and relays
each to another topic in the lane of the message it handles. A third lane finds no free slot."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest

from graymq.client import Message, Producer, PushConsumer
from graymq.runbooks.cutover import CutoverRunner
from graymq.runbooks.policy import CutoverPolicy
from tests.support.cluster import Cluster

pytestmark = pytest.mark.e2e
GROUP, PRODUCERS, TOPIC = "GID_LANES", "PID_LANES", "TOPIC_LANES"
OTHER, RELAYED = "GID_OTHER", "TOPIC_RELAYED"
SENDS, PACE_S = 240, 0.01


@dataclass
class Deliveries:
    """Every delivery: (consumer, the consumer's lane then, msg id, queue id, queue offset, when)."""

    events: list[tuple[str, str | None, str, int, int, float]] = field(default_factory=list)

    def listener(self, consumer: list[PushConsumer]):  # type: ignore[no-untyped-def]
        async def on_messages(messages):  # type: ignore[no-untyped-def]
            c = consumer[0]
            for m in messages:
                self.events.append((c.client_id, c.lane, m.msg_id, m.queue_id, m.queue_offset, time.monotonic()))
        return on_messages


def consumer(ns: str, client_id: str, deliveries: Deliveries, lane: str | None = None,
             group: str = GROUP) -> PushConsumer:
    holder: list[PushConsumer] = []
    c = PushConsumer(group, ns, client_id=client_id, listener=deliveries.listener(holder), lane=lane,
                     nameserver_interval_s=0.5, drain_poll_s=0.05)
    holder.append(c)
    c.subscribe(TOPIC, "*")
    return c


async def send_all(producer: Producer, sent: dict[str, str | None]) -> None:
    for i in range(SENDS):
        result = await producer.send(Message(TOPIC, f"{producer.client_id}:{i}".encode()))
        sent[result.msg_id] = result.lane if result.gray else None
        await asyncio.sleep(PACE_S)


def relay(ns: str, relayed: list[tuple[str, str | None]]) -> tuple[PushConsumer, Producer]:
    """The other group's consumer: records what it handles and sends each on to ``RELAYED`` (the lane inherited)."""
    producer = Producer("PID_RELAY", ns, client_id="relay-out", heartbeat_interval_s=0.5)

    async def on_messages(messages):  # type: ignore[no-untyped-def]
        for m in messages:
            result = await producer.send(Message(RELAYED, m.body))
            relayed.append((m.msg_id, result.lane if result.gray else None))

    c = PushConsumer(OTHER, ns, client_id="o1", listener=on_messages, nameserver_interval_s=0.5)
    c.subscribe(TOPIC, "*")
    return c, producer


async def settled(consumers: list[PushConsumer]) -> None:
    """Each lane's consumer holds its lane's slot, the base consumers the base queues."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        held = {c.client_id: sorted(mq.queue_id for mq in c.assigned()) for c in consumers}
        if held.get("v2a") and held.get("v3a") and held.get("b1") and held.get("b2"):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the lanes never settled: {held}")


async def scenario(cluster: Cluster) -> dict:
    ns, admin = cluster.ns_url, cluster.admin()
    deliveries, sent, relayed = Deliveries(), {}, []
    consumers = [consumer(ns, "b1", deliveries), consumer(ns, "b2", deliveries),
                 consumer(ns, "v2a", deliveries, "v2"), consumer(ns, "v3a", deliveries, "v3")]
    other, relay_out = relay(ns, relayed)
    producers = [Producer(PRODUCERS, ns, client_id=cid, lane=lane, heartbeat_interval_s=0.5)
                 for cid, lane in (("p-base", None), ("p-v2", "v2"), ("p-v3", "v3"), ("p-v4", "v4"))]
    try:
        for c in [*consumers, other]:
            await c.start()
        for p in [*producers, relay_out]:
            await p.start()
        await settled(consumers)
        v4 = producers.pop()
        third_lane = await asyncio.gather(v4.send(Message(TOPIC, b"v4")), return_exceptions=True)
        await v4.stop()  # it would take the first slot given back
        sending = [asyncio.create_task(send_all(p, sent)) for p in producers]
        await asyncio.sleep(0.8)
        policy = CutoverPolicy(producer_groups=(PRODUCERS,), timeout_s=120)
        started = time.monotonic()
        promoted = await CutoverRunner(admin, GROUP, policy, lane="v2").promote()
        promote_window = (started, time.monotonic())
        await asyncio.gather(*sending)
        rolled_back = await CutoverRunner(admin, GROUP, policy, lane="v3").rollback()
        await consumers[3].stop()
        freed_v3 = await admin.free_lane_slot(TOPIC, "v3", "the test's lane v3 ended")
        deadline = time.monotonic() + 60
        while (set(sent) - {e[2] for e in deliveries.events} or set(sent) - {m for m, _ in relayed}) \
                and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        route = await admin.get_route(TOPIC)
        return {"sent": sent, "events": deliveries.events, "promoted": promoted, "rolled_back": rolled_back,
                "promote_window": promote_window, "freed_v3": freed_v3, "route": route, "relayed": relayed,
                "third_lane": third_lane[0]}
    finally:
        for p in [*producers, relay_out]:
            await p.stop()
        for c in [*consumers, other]:
            await c.stop()
        await admin.close()


def test_a_lane_is_promoted_while_another_consumes_on_then_rolled_back_losing_nothing(cluster: Cluster) -> None:
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 6, 2, lanes=2)
    cluster.create_topic(RELAYED, 6, 2, lanes=2)
    out = asyncio.run(scenario(cluster))
    assert "topic TOPIC_LANES has no free lane slot (2 of 2 held by v2, v3)" in str(out["third_lane"])
    relayed = Counter(m for m, _ in out["relayed"])
    assert set(relayed) == set(out["sent"]) and max(relayed.values()) == 1, "the other group lost or doubled some"
    start = out["promote_window"][0]
    early = {e[2] for e in out["events"] if e[5] < start}  # relayed before any lane ended: in the message's lane
    assert all(lane == out["sent"][m] for m, lane in out["relayed"] if m in early)
    sent, events = out["sent"], out["events"]
    counts = Counter(e[2] for e in events)
    lost = set(sent) - set(counts)
    print(f"lanes e2e: {len(sent)} sent ({Counter(sent.values())}), {len(lost)} lost, "
          f"{sum(n - 1 for n in counts.values())} consumed twice, {len(out['relayed'])} relayed")
    assert not lost, f"{len(lost)} of {len(sent)} messages lost"
    assert not [m for m, n in counts.items() if n > 1], "a message consumed twice on planned hand-overs"
    assert {lane for lane in sent.values()} == {None, "v2", "v3"}
    for client_id, lane_then, msg_id, *_ in events:  # a lane's messages only to its consumer (both stayed to drain)
        assert lane_then == sent[msg_id], f"{client_id} (lane {lane_then}) consumed a message of lane {sent[msg_id]}"
    by_queue: dict[tuple[str, int], list[int]] = {}
    for client_id, _, _, queue_id, offset, _ in events:
        by_queue.setdefault((client_id, queue_id), []).append(offset)
    assert all(offsets == sorted(offsets) for offsets in by_queue.values()), "order per queue broken"
    start, end = out["promote_window"]
    assert any(e[0] == "v3a" and start <= e[5] <= end for e in events), "v3 paused while v2 was promoted"
    assert str(out["promoted"].state) == "SUCCEEDED" and str(out["rolled_back"].state) == "SUCCEEDED"
    assert sorted(out["promoted"].slots_freed) == [f"%RETRY%{GROUP}", TOPIC], out["promoted"].slots_kept
    assert out["route"].lanes in ((), None) or not dict(out["route"].lanes), "slots not given back"
