"""Stock consumers' sides without a network: which queues each side receives from, the gray backlog a drain waits
for, and the flip a name server answer starts — normal -> gray at once, gray -> normal only once the gray queues
hold nothing unacked and nothing in flight."""

from __future__ import annotations

import asyncio
import doctest
import time
from dataclasses import replace
from typing import Any

import pytest

from graymq.broker_ext.grpc_endpoint import assignment
from graymq.broker_ext.grpc_endpoint.assignment import Side, receivable_queue_ids
from graymq.broker_ext.grpc_endpoint.consumer_sides import BrokerView, ConsumerSides, StockConsumer, lane_backlog
from graymq.broker_ext.grpc_endpoint.credentials import Caller
from graymq.broker_ext.grpc_endpoint.registrations import Registrations
from graymq.broker_ext.security.principals import DEV_PRINCIPAL
from graymq.broker_ext.topic_config import TopicConfig
from graymq.core.group_gray import GroupGray
from graymq.core.queue_layout import GRAY_LANE, gray_queue_ids
from graymq.protocol import graymq_pb2 as pb
from tests.support.records import heartbeat_answer

pytestmark = pytest.mark.unit

TOPIC, GROUP = "ORDERS", "GID_ORDERS"
GRAY = frozenset({GRAY_LANE})  # the lanes with a consumer in the group


def test_doctests() -> None:
    assert doctest.testmod(assignment).failed == 0


@pytest.mark.parametrize(("queues", "gray"), [(6, 2), (8, 2), (4, 1), (16, 3), (4, 0)])
@pytest.mark.parametrize("weight", [0, 25, 50, 100])
def test_with_a_gray_consumer_the_two_sides_split_every_queue_and_the_gray_side_holds_the_gray_ones(
        queues: int, gray: int, weight: int) -> None:
    group = GroupGray(weight=weight)
    gray_side = receivable_queue_ids(queues, gray, Side(GRAY_LANE, False, GRAY), group)
    normal_side = receivable_queue_ids(queues, gray, Side(None, False, GRAY), group)
    assert gray_side | normal_side == set(range(queues)) and not gray_side & normal_side
    assert gray_side >= set(gray_queue_ids(queues, gray))
    assert (gray_side == set(gray_queue_ids(queues, gray))) == (weight == 0 or gray == queues)


@pytest.mark.parametrize(("policy", "expected"), [("hold", {1, 2, 3, 4}), ("adopt", {0, 1, 2, 3, 4, 5})])
def test_without_a_gray_consumer_the_orphan_policy_says_whether_normal_ones_take_the_gray_queues(
        policy: Any, expected: set[int]) -> None:
    assert receivable_queue_ids(6, 2, Side(None, False), GroupGray(orphan_policy=policy)) == expected


def test_with_the_switch_off_every_consumer_receives_from_every_queue_and_a_retired_gray_one_from_none() -> None:
    off = GroupGray(switch=False)
    assert receivable_queue_ids(6, 2, Side(GRAY_LANE, False, GRAY), off) == set(range(6))
    assert receivable_queue_ids(6, 2, Side(None, False, GRAY), off) == set(range(6))
    assert receivable_queue_ids(6, 2, Side(GRAY_LANE, True, GRAY), GroupGray(retired=True)) == set()


class FakeBroker:
    """A broker's view with a settable backlog per queue and messages in flight."""

    def __init__(self) -> None:
        self.config = TopicConfig(TOPIC, queue_nums=6, gray_queue_nums=2)
        self.max_offsets = {q: 10 for q in range(6)}
        self.committed = {q: -1 for q in range(6)}
        self.in_flight: dict[tuple[str, int], int] = {}

    def backlog(self, group: str, topic: str) -> list[pb.QueueBacklog]:
        if topic != TOPIC:
            return []
        gray = set(gray_queue_ids(6, 2))
        return [pb.QueueBacklog(topic=topic, queue_id=q, gray=q in gray, consumer_offset=self.committed[q],
                                max_offset=self.max_offsets[q], min_offset=2) for q in range(6)]

    def view(self) -> BrokerView:
        return BrokerView(lambda topic: self.config if topic == TOPIC else None, self.backlog,
                          lambda group: frozenset(),
                          lambda group, topic, queue_id: self.in_flight.get((topic, queue_id), 0))


def test_the_lane_backlog_counts_the_gray_queues_unacked_messages_and_those_in_flight() -> None:
    broker = FakeBroker()
    assert lane_backlog(broker.view(), GROUP, [TOPIC]) == 2 * 8  # never committed: from the min offset
    broker.committed.update({0: 10, 5: 7, 1: 0})
    assert lane_backlog(broker.view(), GROUP, [TOPIC]) == 3  # queue 1 is normal: not counted
    broker.committed[5] = 10
    broker.in_flight[(TOPIC, 0)] = 1
    assert lane_backlog(broker.view(), GROUP, [TOPIC]) == 1


class FakeMembership:
    """What the sides use of a membership: every beat is heard, every change counted."""

    def __init__(self) -> None:
        self.changes = 0
        self.beats = 0

    async def beat(self) -> dict[str, Any]:
        self.beats += 1
        return {}

    def changed(self) -> None:
        self.changes += 1

    def poke(self) -> None:
        self.changes += 1


def sides(broker: FakeBroker) -> ConsumerSides:
    return ConsumerSides(["http://127.0.0.1:1"], broker.view(), broker_name="broker-a", claim=lambda caller: None,
                         interval_s=1.0, expiry_s=60.0)


def stock_consumer(table: ConsumerSides, client_id: str) -> StockConsumer:
    consumer = StockConsumer(GROUP, client_id, nameserver=None, topics={TOPIC})  # type: ignore[arg-type]
    consumer.membership = FakeMembership()  # type: ignore[assignment]
    consumer.flip.follow_changes()
    consumer.ready.set()
    table.registrations.items[(client_id, GROUP)] = consumer
    return consumer


def test_a_gray_consumer_told_normal_keeps_the_gray_queues_until_they_are_drained_then_reports_normal() -> None:
    async def scenario() -> None:
        broker = FakeBroker()
        table = sides(broker)
        v2 = stock_consumer(table, "orders-v2-a@1@0@x")
        caller = Caller(DEV_PRINCIPAL, None, v2.client_id)
        await table._apply(v2, heartbeat_answer(desired_gray=True, gray_switch=True))
        assert await table.queues(caller, GROUP, TOPIC) == {0, 5}

        await table._apply(v2, heartbeat_answer(desired_gray=False, gray_switch=True))  # a promote
        await asyncio.sleep(0.3)
        assert v2.state.value == "DRAINING" and await table.queues(caller, GROUP, TOPIC) == {0, 5}
        broker.committed.update({0: 10, 5: 10})
        broker.in_flight[(TOPIC, 5)] = 1  # acked up to the max but one message still out: not drained
        await asyncio.sleep(0.3)
        assert v2.state.value == "DRAINING"
        broker.in_flight.clear()
        await asyncio.wait_for(_settled(v2), 5)
        assert v2.state.value == "NORMAL" and v2.membership.beats == 1  # type: ignore[union-attr]
        assert await table.queues(caller, GROUP, TOPIC) == {1, 2, 3, 4}

    asyncio.run(scenario())


async def _settled(consumer: StockConsumer) -> None:
    while consumer.drain is not None:
        await asyncio.sleep(0.05)


def test_gray_wanted_again_during_a_drain_cancels_it_and_the_consumer_stays_gray() -> None:
    async def scenario() -> None:
        table = sides(FakeBroker())
        v2 = stock_consumer(table, "orders-v2-b@1@0@x")
        await table._apply(v2, heartbeat_answer(desired_gray=True))
        await table._apply(v2, heartbeat_answer(desired_gray=False))
        await asyncio.sleep(0.2)
        assert v2.state.value == "DRAINING"
        await table._apply(v2, heartbeat_answer(desired_gray=True))
        await asyncio.wait_for(_settled(v2), 5)
        assert v2.state.value == "GRAY"

    asyncio.run(scenario())


def test_a_rolled_back_gray_side_receives_nothing_and_normal_consumers_adopting_take_the_gray_queues() -> None:
    async def scenario() -> None:
        table = sides(FakeBroker())
        v1, v2 = stock_consumer(table, "orders-v1-a@1@0@x"), stock_consumer(table, "orders-v2-a@1@0@x")
        await table._apply(v1, heartbeat_answer(desired_gray=False, orphan_policy='hold'))
        await table._apply(v2, heartbeat_answer(desired_gray=True))
        assert await table.queues(Caller(DEV_PRINCIPAL, None, v1.client_id), GROUP, TOPIC) == {1, 2, 3, 4}

        rolled_back = heartbeat_answer(desired_gray=True, gray_retired=True, orphan_policy="adopt")
        await table._apply(v2, rolled_back)
        await table._apply(v1, heartbeat_answer(desired_gray=False, gray_retired=True, orphan_policy='adopt'))
        assert v2.state.value == "RETIRED"
        assert await table.queues(Caller(DEV_PRINCIPAL, None, v2.client_id), GROUP, TOPIC) == set()
        assert await table.queues(Caller(DEV_PRINCIPAL, None, v1.client_id), GROUP, TOPIC) == set(range(6))

    asyncio.run(scenario())


def test_a_stock_normal_consumer_leaves_alone_the_base_queues_another_lane_holds_by_its_weight() -> None:
    async def scenario() -> None:
        broker = FakeBroker()
        shares = {GROUP: frozenset({2})}  # graymq consumers of lane v3 hold base queue 2 by v3's weight
        broker_view = replace(broker.view(), lane_shares=lambda group, config: shares.get(group, frozenset()))
        table = ConsumerSides(["http://127.0.0.1:1"], broker_view, broker_name="broker-a",
                              claim=lambda caller: None, interval_s=1.0, expiry_s=60.0)
        v1 = stock_consumer(table, "orders-v1-a@1@0@x")
        await table._apply(v1, heartbeat_answer(desired_gray=False, orphan_policy="hold"))
        assert await table.queues(Caller(DEV_PRINCIPAL, None, v1.client_id), GROUP, TOPIC) == {1, 3, 4}
        shares.clear()  # v3 without a consumer in the group (or at weight 0): its share is base again
        assert await table.queues(Caller(DEV_PRINCIPAL, None, v1.client_id), GROUP, TOPIC) == {1, 2, 3, 4}

    asyncio.run(scenario())


class Closing:
    """A registration that records its close."""

    def __init__(self, used_at: float) -> None:
        self.used_at = used_at
        self.closed = False

    async def close(self) -> None:
        self.closed = True


def test_registrations_go_with_the_last_stream_or_when_idle_without_one() -> None:
    async def scenario() -> None:
        gone: list[str] = []
        table: Registrations[Closing] = Registrations("consumer", expiry_s=0.2, gone=gone.append)
        streamed, idle, busy = Closing(time.monotonic()), Closing(0.0), Closing(time.monotonic() + 60)
        table.items.update({("a", GROUP): streamed, ("b", GROUP): idle, ("c", GROUP): busy})
        table.stream_opened("a")
        table.stream_opened("a")
        table.start()
        try:
            await asyncio.sleep(0.5)
            assert (idle.closed, streamed.closed, busy.closed) == (True, False, False)  # "a" has streams: kept
            await table.stream_closed("a")
            assert not streamed.closed
            await table.stream_closed("a")
            assert streamed.closed and gone == ["b", "a"]
        finally:
            await table.stop()
        assert busy.closed  # stopping closes what is left

    asyncio.run(scenario())
