"""Stock clients in lanes, decided on the broker from the name server's answers (no network): a consumer receives
its lane's slot only and drains that slot alone before it leaves the lane; a producer sends in its lane, or in the
lane its message marks while marks are honoured; a lane's first stock send to a topic takes a slot; a producer
reports a lane while a send of it is under way."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from graymq.broker_ext.grpc_endpoint.budgets import BudgetLimits, Budgets
from graymq.broker_ext.grpc_endpoint.consumer_sides import BrokerView, ConsumerSides, lane_backlog
from graymq.broker_ext.grpc_endpoint.credentials import Caller
from graymq.broker_ext.grpc_endpoint.nameserver_session import NameServerSession
from graymq.broker_ext.grpc_endpoint.producer_sides import ProducerSides
from graymq.broker_ext.grpc_endpoint.registrations import NameServerSessions
from graymq.broker_ext.grpc_endpoint.send import SendService
from graymq.broker_ext.security.principals import DEV_PRINCIPAL
from graymq.broker_ext.topic_config import TopicConfig, lane_pairs
from graymq.core.queue_layout import slot_queue_ids
from graymq.nameserver_api.client import ConflictError
from graymq.nameserver_api.lane_records import TopicLanes
from graymq.nameserver_api.records import HeartbeatAnswer
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.remoting import response_envelope
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s
from tests.support.records import heartbeat_answer

pytestmark = pytest.mark.unit

TOPIC, GROUP = "ORDERS", "GID_ORDERS"
NEVER_S = 1e6  # the heartbeat interval: every beat seen here is a first one or a change
# 10 queues, 3 slots of 2: slot 0 is 0 5 (no lane holds it), v2 holds slot 1 (6 7), v3 slot 2 (8 9); base 1-4
LANES = {"v2": 1, "v3": 2}
BASE = {1, 2, 3, 4}
V2, V3 = {6, 7}, {8, 9}


def in_lane(lane: str | None, **fields: Any) -> dict[str, Any]:
    """A name server's answer putting a client in ``lane``, with the topic's lane map."""
    topics = {TOPIC: {"queue_nums": 10, "gray_queue_nums": 2, "lane_slots": 3, "lanes": LANES}}
    return {"desired_gray": lane is not None, "desired_lane": lane, "topics": topics, **fields}


class FakeLink:
    """A name-server session answering each client as ``answers`` says, recording every heartbeat body and every
    lane slot taken (``nameserver``: itself)."""

    def __init__(self, lanes: dict[str, int] | None = None) -> None:
        self.answers: dict[str, dict[str, Any]] = {}
        self.beats: list[dict[str, Any]] = []
        self.lanes = dict(lanes or {})
        self.taken: list[tuple[str, str]] = []
        self.nameserver = self

    async def client_heartbeat(self, body: dict[str, Any]) -> HeartbeatAnswer:
        self.beats.append(body)
        return heartbeat_answer(**{"role": body["role"], **self.answers.get(body["client_id"], {})})

    async def take_lane_slot(self, topic: str, lane: str) -> TopicLanes:
        self.taken.append((topic, lane))
        if len(self.lanes) == 2 and lane not in self.lanes:
            raise ConflictError(f"POST /v1/topics/{topic}/lanes/{lane}: CONFLICT: topic {topic} has no free lane slot")
        self.lanes.setdefault(lane, min(set(range(1, 3)) - set(self.lanes.values())))
        return TopicLanes(topic, 3, dict(self.lanes))

    async def unregister_client(self, group: str, client_id: str, role: str) -> None:
        pass

    def watch(self, membership: Any) -> None:
        pass

    def unwatch(self, membership: Any) -> None:
        pass

    async def close(self) -> None:
        pass

    def last_report(self, client_id: str) -> dict[str, Any]:
        return [b for b in self.beats if b["client_id"] == client_id][-1]


class Sessions(NameServerSessions):
    def __init__(self, link: FakeLink) -> None:
        super().__init__([], NEVER_S)
        self.link = link

    def _open(self, token: str | None) -> NameServerSession:
        return self.link  # type: ignore[return-value]


class FakeBroker:
    """The broker's topic table (a lane map heard is kept), a backlog per queue and messages in flight."""

    def __init__(self, lanes: dict[str, int] | None = None) -> None:
        self.config = TopicConfig(TOPIC, 10, 2, lane_slots=3, lanes=lane_pairs(lanes))
        self.max_offsets = {q: 0 for q in range(10)}
        self.in_flight: dict[int, int] = {}

    def heard(self, topic: str, lanes: Any) -> None:
        assert topic == TOPIC
        self.config = replace(self.config, lanes=lane_pairs(lanes))

    def backlog(self, group: str, topic: str) -> list[pb.QueueBacklog]:
        if topic != TOPIC:
            return []
        return [pb.QueueBacklog(topic=topic, queue_id=q, gray=(lane := self.config.lane_of(q)) is not None,
                                lane=lane or "", consumer_offset=0, max_offset=self.max_offsets[q], min_offset=0)
                for q in range(10)]

    def view(self) -> BrokerView:
        return BrokerView(lambda topic: self.config if topic == TOPIC else None, self.backlog,
                          lambda group: frozenset(), lambda group, topic, queue_id: self.in_flight.get(queue_id, 0),
                          lanes_heard=self.heard)


def consumer_sides(broker: FakeBroker, link: FakeLink) -> ConsumerSides:
    return ConsumerSides(["http://127.0.0.1:1"], broker.view(), broker_name="broker-a", claim=lambda caller: None,
                         interval_s=NEVER_S, expiry_s=60.0, sessions=Sessions(link))


def caller(name: str) -> Caller:
    return Caller(DEV_PRINCIPAL, None, f"{name}@1@0@x")


def test_stock_consumers_of_two_lanes_receive_their_lanes_slot_and_base_the_base_queues() -> None:
    async def scenario() -> None:
        broker, link = FakeBroker(), FakeLink()  # the broker has heard of no lane yet: the answers bring the map
        table = consumer_sides(broker, link)
        v1, v2, v3 = caller("orders-v1"), caller("orders-v2"), caller("orders-v3")
        link.answers = {v1.client_id: in_lane(None), v2.client_id: in_lane("v2"), v3.client_id: in_lane("v3")}
        for consumer in (v1, v2, v3):
            await table.register(consumer, GROUP, [TOPIC])
        assert broker.config.lanes == lane_pairs(LANES)
        assert [await table.queues(c, GROUP, TOPIC) for c in (v1, v2, v3)] == [BASE, V2, V3]
        reports = [link.last_report(c.client_id) for c in (v1, v2, v3)]
        assert [(r["lane"], r["state"]) for r in reports] == [(None, "NORMAL"), ("v2", "GRAY"), ("v3", "GRAY")]
        assert sorted(reports[1]["queues"]) == [f"broker-a:{TOPIC}:{q}" for q in sorted(V2)]
        await table.stop()

    asyncio.run(scenario())


def test_an_orphan_lane_is_adopted_by_base_consumers_when_its_policy_says_so() -> None:
    async def scenario() -> None:
        broker, link = FakeBroker(LANES), FakeLink()
        table = consumer_sides(broker, link)
        v1 = caller("orders-v1")
        link.answers = {v1.client_id: in_lane(None, lanes={"v2": {"orphan_policy": "adopt"}})}
        await table.register(v1, GROUP, [TOPIC])
        assert await table.queues(v1, GROUP, TOPIC) == BASE | V2  # v3 is held for its consumers
        await table.stop()

    asyncio.run(scenario())


async def settled(table: ConsumerSides, client: Caller) -> None:
    while table.registrations.items[(client.client_id, GROUP)].drain is not None:
        await asyncio.sleep(0.02)


def test_a_promote_of_v2_waits_for_v2s_slot_only_its_unacked_and_in_flight_messages_then_the_consumer_is_base(
        ) -> None:
    async def scenario() -> None:
        broker, link = FakeBroker(LANES), FakeLink()
        table = consumer_sides(broker, link)
        v2 = caller("orders-v2")
        link.answers = {v2.client_id: in_lane("v2")}
        await table.register(v2, GROUP, [TOPIC])
        consumer = table.registrations.items[(v2.client_id, GROUP)]
        broker.max_offsets.update({6: 3, 8: 50})  # 3 unacked in v2's slot, 50 in v3's (not v2's to drain)
        assert lane_backlog(broker.view(), GROUP, [TOPIC], "v2") == 3
        link.answers[v2.client_id] = in_lane(None)  # the promote: base is wanted
        await table._apply(consumer, heartbeat_answer(**link.answers[v2.client_id]))
        await asyncio.sleep(0.3)
        assert consumer.state.value == "DRAINING" and await table.queues(v2, GROUP, TOPIC) == V2
        assert link.last_report(v2.client_id)["lane"] == "v2"  # the promote sees it still in v2
        broker.max_offsets[6] = 0
        broker.in_flight[7] = 1  # everything acked but one message received and not acked yet
        await asyncio.sleep(0.3)
        assert consumer.state.value == "DRAINING"
        broker.in_flight.clear()
        await asyncio.wait_for(settled(table, v2), 5)
        assert (consumer.state.value, consumer.lane) == ("NORMAL", None)
        assert await table.queues(v2, GROUP, TOPIC) == BASE
        assert (link.last_report(v2.client_id)["lane"], link.last_report(v2.client_id)["gray"]) == (None, False)
        await table.stop()

    asyncio.run(scenario())


def producer_sides(link: FakeLink, broker: FakeBroker) -> ProducerSides:
    sides = ProducerSides(["http://127.0.0.1:1"], interval_s=NEVER_S, expiry_s=60.0, budgets=Budgets(BudgetLimits()),
                          lanes_heard=broker.heard)
    sides.registrations.sessions = Sessions(link)
    return sides


@pytest.mark.parametrize(("producer", "mark", "marks_honoured", "expected"), [
    (None, None, True, None),
    ("v3", None, True, "v3"),
    (None, "v2", True, "v2"),  # a base producer's marked message
    ("v3", "v2", True, "v2"),  # the mark wins while marks are honoured
    ("v3", "v2", False, "v3"),  # during a promote of its producer group: its own lane
    (None, "v2", False, None),
])
def test_a_stock_sends_lane_is_the_producers_or_while_marks_are_honoured_the_messages_mark(
        producer: str | None, mark: str | None, marks_honoured: bool, expected: str | None) -> None:
    async def scenario() -> str | None:
        broker, link = FakeBroker(LANES), FakeLink()
        sides = producer_sides(link, broker)
        client = caller("orders")
        link.answers = {client.client_id: in_lane(producer, role="producer", gray_marks=marks_honoured)}
        side = await sides.side(client, TOPIC, mark)
        assert link.last_report(client.client_id)["lane"] == producer
        await sides.stop()
        return side.lane

    assert asyncio.run(scenario()) == expected


@pytest.mark.parametrize(("mark", "expected"), [("v2", "v3"), ("v4", "v4")])
def test_a_lanes_promote_freezes_that_lanes_marks_of_a_stock_producer_only(mark: str, expected: str) -> None:
    async def scenario() -> str | None:
        broker, link = FakeBroker(LANES), FakeLink()
        sides = producer_sides(link, broker)
        client = caller("orders")
        link.answers = {client.client_id: in_lane("v3", role="producer", gray_marks=False, lane_marks=True,
                                                  frozen_lanes=["v2"])}
        side = await sides.side(client, TOPIC, mark)
        assert link.last_report(client.client_id)["frozen_lanes"] == ["v2"]
        await sides.stop()
        return side.lane

    assert asyncio.run(scenario()) == expected


class Stored:
    """The broker's send: records each request and answers it stored."""

    def __init__(self) -> None:
        self.requests: list[pb.SendRequest] = []
        self.release = asyncio.Event()
        self.release.set()

    async def send(self, request: pb.SendRequest) -> bytes:
        self.requests.append(request)
        await self.release.wait()
        return response_envelope(pb.SEND_MESSAGE, pb.SendResponse(msg_id=request.message.msg_id, queue_offset=0))


def message(body: str, **properties: str) -> v2.Message:
    props = v2.SystemProperties(message_id=body, message_type=v2.NORMAL)
    return v2.Message(topic=v2.Resource(name=TOPIC), body=body.encode(), system_properties=props,
                      user_properties=properties)


def send_service(broker: FakeBroker, sides: ProducerSides, stored: Stored) -> SendService:
    return SendService("broker-a", stored.send, lambda topic: broker.config if topic == TOPIC else None, sides,
                       max_body_size=1 << 20)


def test_stock_sends_go_to_their_lanes_queues_and_a_lanes_first_send_takes_a_slot() -> None:
    async def scenario() -> None:
        broker, link = FakeBroker({"v2": 1}), FakeLink({"v2": 1})  # v3 holds no slot of the topic yet
        sides = producer_sides(link, broker)
        stored = Stored()
        service = send_service(broker, sides, stored)
        v1, v3 = caller("orders-v1"), caller("orders-v3")
        link.answers = {v1.client_id: in_lane(None, role="producer"), v3.client_id: in_lane("v3", role="producer")}
        link.answers[v3.client_id]["topics"][TOPIC]["lanes"] = {"v2": 1}
        request = v2s.SendMessageRequest(messages=[message(f"v3-{i}") for i in range(4)])
        answer = await service.send_message(request, v3)
        assert answer.status.code == v2.OK and link.taken == [(TOPIC, "v3")]
        assert broker.config.lanes == lane_pairs({"v2": 1, "v3": 2})
        await service.send_message(v2s.SendMessageRequest(messages=[
            message("baggage", baggage="tenant=acme, graymq.lane=v2"), message("property", **{"graymq.lane": "v2"}),
            message("plain")]), v1)
        placed = {r.message.msg_id: (r.queue_id, r.message.gray) for r in stored.requests}
        assert {placed[f"v3-{i}"][0] for i in range(4)} == V3 == set(slot_queue_ids(10, 2, 3, 2))
        assert placed["baggage"][0] in V2 and placed["property"][0] in V2 and placed["plain"][0] in BASE
        assert all(gray for msg_id, (_, gray) in placed.items() if msg_id != "plain")
        assert link.taken == [(TOPIC, "v3")]  # v2 held its slot already
        await sides.stop()

    asyncio.run(scenario())


def test_a_mark_naming_no_lane_is_refused_with_bad_request() -> None:
    async def scenario() -> v2s.SendMessageResponse:
        broker, link = FakeBroker(LANES), FakeLink()
        sides = producer_sides(link, broker)
        answer = await send_service(broker, sides, Stored()).send_message(
            v2s.SendMessageRequest(messages=[message("m", baggage="graymq.lane=v3%20canary")]), caller("orders"))
        await sides.stop()
        return answer

    answer = asyncio.run(scenario())
    assert answer.status.code == v2.BAD_REQUEST
    assert "baggage entry 'graymq.lane' does not name a lane" in answer.status.message


def test_a_producer_flipped_to_base_reports_its_lane_until_its_lane_send_under_way_is_answered() -> None:
    async def scenario() -> None:
        broker, link = FakeBroker(LANES), FakeLink()
        sides = producer_sides(link, broker)
        stored = Stored()
        v3 = caller("orders-v3")
        link.answers = {v3.client_id: in_lane("v3", role="producer")}
        stored.release.clear()
        sending = asyncio.ensure_future(send_service(broker, sides, stored).send_message(
            v2s.SendMessageRequest(messages=[message("late")]), v3))
        while not stored.requests:
            await asyncio.sleep(0.01)
        registration = sides.registrations.items[(v3.client_id, TOPIC)]
        link.answers[v3.client_id] = in_lane(None, role="producer")  # a promote flips it
        await registration.apply(heartbeat_answer(**link.answers[v3.client_id]))
        assert registration.report()["lane"] == "v3"  # its send chosen in v3 may still be stored
        stored.release.set()
        assert (await sending).status.code == v2.OK
        async with asyncio.timeout(5):
            while link.last_report(v3.client_id)["lane"] is not None:  # reported base at once, not at the interval
                await asyncio.sleep(0.01)
        await sides.stop()

    asyncio.run(scenario())


def test_a_consumer_moved_from_v2_to_v3_drains_v2s_slot_first_then_receives_v3s() -> None:
    async def scenario() -> None:
        broker, link = FakeBroker(LANES), FakeLink()
        table = consumer_sides(broker, link)
        moved = caller("orders-x")
        link.answers = {moved.client_id: in_lane("v2")}
        await table.register(moved, GROUP, [TOPIC])
        consumer = table.registrations.items[(moved.client_id, GROUP)]
        broker.max_offsets[6] = 2  # v2's slot holds two unacked messages
        link.answers[moved.client_id] = in_lane("v3")  # a flag moves it to v3
        await table._apply(consumer, heartbeat_answer(**link.answers[moved.client_id]))
        await asyncio.sleep(0.3)
        assert (consumer.state.value, consumer.lane) == ("DRAINING", "v2")
        assert await table.queues(moved, GROUP, TOPIC) == V2  # never v2's and v3's at once
        broker.max_offsets[6] = 0
        async with asyncio.timeout(5):
            while consumer.lane != "v3":
                await asyncio.sleep(0.02)
        assert consumer.state.value == "GRAY" and await table.queues(moved, GROUP, TOPIC) == V3
        await table.stop()

    asyncio.run(scenario())


def test_a_lanes_stock_send_to_a_topic_without_a_free_slot_is_refused_with_the_name_servers_line() -> None:
    async def scenario() -> v2s.SendMessageResponse:
        broker, link = FakeBroker(LANES), FakeLink(LANES)  # v2 and v3 hold both slots the name server gives
        sides = producer_sides(link, broker)
        v4 = caller("orders-v4")
        link.answers = {v4.client_id: in_lane("v4", role="producer")}
        answer = await send_service(broker, sides, Stored()).send_message(
            v2s.SendMessageRequest(messages=[message("m")]), v4)
        await sides.stop()
        return answer

    answer = asyncio.run(scenario())
    assert answer.status.code == v2.BAD_REQUEST and "topic ORDERS has no free lane slot" in answer.status.message
