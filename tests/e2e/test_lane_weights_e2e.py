"""Two weighted lanes in one consumer group with real processes on PostgreSQL (docs/lanes.md, "Weights and rollouts
per lane"): v2 and v3 each take their own share of the base queues, then ``graymq gray rollout GROUP --lane v2``
steps v2's weight, checks it against base and promotes v2 while v3 keeps consuming with its weight untouched;
nothing is lost or consumed twice and no base queue is held by two lanes."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest

from graymq.client import Message, Producer, PushConsumer
from graymq.core.queue_layout import lane_weight_shares
from tests.support.cli import graymq
from tests.support.cluster import Cluster

pytestmark = pytest.mark.e2e
GROUP, PRODUCERS, TOPIC = "GID_LANE_WEIGHTS", "PID_LANE_WEIGHTS", "TOPIC_LANE_WEIGHTS"
BASE_IDS = {1, 2, 3, 4, 5, 6}  # 8 queues, 2 per lane slot: slot 0 is 0 7, slot 1 is 8 9 (10 queues in all)
PACE_S = 0.01


@dataclass
class Deliveries:
    """Every delivery: (consumer, its lane then, msg id, queue id, when)."""

    events: list[tuple[str, str | None, str, int, float]] = field(default_factory=list)

    def consumer(self, ns: str, client_id: str, lane: str | None = None) -> PushConsumer:
        holder: list[PushConsumer] = []

        async def on_messages(messages):  # type: ignore[no-untyped-def]
            c = holder[0]
            self.events.extend((c.client_id, c.lane, m.msg_id, m.queue_id, time.monotonic()) for m in messages)

        c = PushConsumer(GROUP, ns, client_id=client_id, listener=on_messages, lane=lane, nameserver_interval_s=0.5,
                         drain_poll_s=0.05)
        holder.append(c)
        c.subscribe(TOPIC, "*")
        return c


async def send_until(producer: Producer, sent: dict[str, str | None], stop: asyncio.Event) -> None:
    i = 0
    while not stop.is_set():
        result = await producer.send(Message(TOPIC, f"{producer.client_id}:{i}".encode()))
        sent[result.msg_id] = result.lane if result.gray else None
        i += 1
        await asyncio.sleep(PACE_S)


def base_held(consumers: list[PushConsumer]) -> dict[str, set[int]]:
    return {c.client_id: {mq.queue_id for mq in c.assigned() if mq.topic == TOPIC} & BASE_IDS for c in consumers}


async def until(predicate, what, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    """Wait for ``predicate``; ``what`` (text, or a callable giving it) says what was awaited when it times out."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")
        await asyncio.sleep(0.1)


async def scenario(cluster: Cluster) -> dict:
    ns, admin = cluster.ns_url, cluster.admin()
    deliveries, sent, stop = Deliveries(), {}, asyncio.Event()
    consumers = [deliveries.consumer(ns, "b1"), deliveries.consumer(ns, "b2"),
                 deliveries.consumer(ns, "v2a", "v2"), deliveries.consumer(ns, "v3a", "v3")]
    producers = [Producer(PRODUCERS, ns, client_id=cid, lane=lane, heartbeat_interval_s=0.5)
                 for cid, lane in (("p-base", None), ("p-v2", "v2"), ("p-v3", "v3"))]
    try:
        for c in consumers:
            await c.start()
        for p in producers:
            await p.start()
        await admin.set_lane_weight(GROUP, "v2", 20, "the test's v2 share")
        await admin.set_lane_weight(GROUP, "v3", 20, "the test's v3 share")
        # base 1..6: v2 20% takes one (4), v3 one of the five left (3); the base consumers the other four
        await until(lambda: base_held(consumers) == {"b1": {1, 2}, "b2": {5, 6}, "v2a": {4}, "v3a": {3}},
                    lambda: f"each lane holding its share: {base_held(consumers)}")
        sending = [asyncio.create_task(send_until(p, sent, stop)) for p in producers]
        await asyncio.sleep(0.5)
        started = time.monotonic()
        rollout = await asyncio.to_thread(
            graymq, ns, "gray", "rollout", GROUP, "--lane", "v2", "--steps", "20,50", "--step-seconds", "1",
            "--min-messages", "5", "--producer-group", PRODUCERS, "--timeout", "60", "--json", check=False)
        window = (started, time.monotonic())
        await until(lambda: base_held(consumers)["v3a"] == {4}, lambda: f"v3's share after: {base_held(consumers)}")
        v3_after = base_held(consumers)["v3a"]
        await asyncio.sleep(0.5)  # v3 keeps consuming after the rollout, on its share
        stop.set()
        await asyncio.gather(*sending)
        await until(lambda: set(sent) <= {e[2] for e in deliveries.events}, "every message consumed", 30)
        lanes = {lane.lane: lane.weight for lane in await admin.group_lanes(GROUP)}
        return {"sent": sent, "events": deliveries.events, "rollout": rollout, "window": window, "lanes": lanes,
                "v3_after": v3_after, "history": graymq(ns, "gray", "history", GROUP, "--lane", "v2").stdout}
    finally:
        stop.set()
        for p in producers:
            await p.stop()
        for c in consumers:
            await c.stop()
        await admin.close()


def test_a_weighted_lane_is_rolled_out_and_promoted_while_another_weighted_lane_consumes(cluster: Cluster) -> None:
    cluster.add_broker("broker-a")
    cluster.create_topic(TOPIC, 8, 2, lanes=2)
    out = asyncio.run(scenario(cluster))
    rollout = out["rollout"]
    assert rollout.returncode == 0, f"{rollout.stdout}\n{rollout.stderr}"
    report = json.loads(rollout.stdout)
    assert (report["lane"], report["outcome"]) == ("v2", "PROMOTED")
    assert [(c["weight"], c["verdict"]) for c in report["checks"]] == [(20, "pass"), (50, "pass")]
    sent, events = out["sent"], out["events"]
    counts = Counter(e[2] for e in events)
    lost, twice = set(sent) - set(counts), [m for m, n in counts.items() if n > 1]
    start, end = out["window"]
    by_v3 = sum(1 for e in events if e[0] == "v3a" and start <= e[4] <= end)
    print(f"lane weights e2e: {len(sent)} sent ({Counter(sent.values())}), {len(lost)} lost, {len(twice)} consumed "
          f"twice; v3 consumed {by_v3} during the {end - start:.1f} s rollout of v2")
    assert not lost, f"{len(lost)} of {len(sent)} lost"
    assert not twice, f"{len(twice)} consumed twice"
    assert by_v3 > 0, "v3 paused while v2 was rolled out"
    assert out["lanes"].get("v3") == 20 and out["lanes"].get("v2", 0) == 0, out["lanes"]
    # v2's weight back to 0: v3, the next lane by name, takes its one queue from every base queue now (docs/lanes.md)
    assert out["v3_after"] == set(lane_weight_shares(10, 2, 2, (("v3", 20),))) == {4}, out["v3_after"]
    for client_id, lane_then, msg_id, *_ in events:  # a lane's messages to its own consumers only
        assert sent[msg_id] in (None, lane_then), f"{client_id} ({lane_then}) consumed a {sent[msg_id]} message"
    assert "rollout of lane v2" in out["history"]
