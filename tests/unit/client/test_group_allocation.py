"""The consumers of one process rebalancing the same group: the group's listing is asked for once per broker (not a
request begun before a notice a consumer has seen), the group allocated once, and each consumer holds what its own
computation gave (its own entry added to the view)."""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from typing import Any, cast

import pytest

from graymq.client.config import ClientConfig
from graymq.client.consumer.assignment import Assignment
from graymq.client.consumer.group_allocation import listed_as_is
from graymq.client.consumer.process_queue import ProcessQueue
from graymq.client.consumer.queue_leases import QueueLeases
from graymq.client.consumer.rebalancer import Rebalancer
from graymq.client.consumer.runtime import ConsumerRuntime
from graymq.client.consumer.settings import ConsumerSettings
from graymq.client.group_listings import GroupListings
from graymq.client.instance import ClientInstance
from graymq.core.allocate import AllocateMessageQueueAveragely, AllocateMessageQueueGray, ConsumerView
from graymq.core.gray_flip import GrayFlip
from graymq.core.gray_side import Mark
from graymq.core.message_queue import MessageQueue
from graymq.core.route import BrokerData, TopicRoute
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import GrayMQError, NoPermissionError, RequestTimeoutError
from graymq.protocol.supervisor import Supervisor

pytestmark = pytest.mark.unit
TOPIC = "T"
ROUTE = TopicRoute(TOPIC, (BrokerData("a", "127.0.0.1:1", 8, 2), BrokerData("b", "127.0.0.1:2", 8, 2)))
ADDRESSES = ("127.0.0.1:1", "127.0.0.1:2")


def run(test: Any) -> Any:
    @functools.wraps(test)
    def sync() -> None:
        asyncio.run(asyncio.wait_for(test(), 30))
    return sync


class Brokers:
    """The group's listing (client id -> side), answered once ``gate`` opens (or ``error`` raised); queue leases
    granted; the listing requests counted per broker."""

    def __init__(self, listed: dict[str, Mark], error: GrayMQError | None = None) -> None:
        self.listed, self.error = listed, error
        self.gate = asyncio.Event()
        self.lists: Counter[str] = Counter()

    async def consumer_list(self, address: str, group: str) -> pb.ConsumerListResponse:
        self.lists[address] += 1
        await self.gate.wait()
        if self.error is not None:
            raise self.error
        return pb.ConsumerListResponse(clients=[
            pb.ClientInfo(client_id=c, gray_flag=bool(side), lane=side if isinstance(side, str) else "",
                          last_heartbeat_ms=1, topics=[TOPIC]) for c, side in self.listed.items()])

    async def lock_queues(self, address: str, group: str, client_id: str,
                          queues: list[tuple[str, int]]) -> pb.LockQueuesResponse:
        return pb.LockQueuesResponse(locked=[pb.QueueRef(topic=t, queue_id=q) for t, q in queues])

    async def unlock_queues(self, address: str, group: str, client_id: str, queues: list[Any]) -> None:
        pass


class Routes:
    def cached(self, topic: str) -> TopicRoute:
        return ROUTE

    async def route(self, topic: str) -> TopicRoute:
        return ROUTE

    async def meet_new_brokers(self) -> None:
        pass


class Parts:
    def fetch(self, pq: ProcessQueue) -> None:
        pass

    async def plan(self, queues: list[Any], addresses: Any) -> dict[MessageQueue, int]:
        return {q.mq: 0 for q in queues}


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Averagely's work: each client allocated alone, and each whole group ("*")."""
    noted: list[str] = []
    alone, whole = AllocateMessageQueueAveragely.allocate, AllocateMessageQueueAveragely.allocate_all

    def allocate(self: Any, group: str, client_id: str, *args: Any) -> list[MessageQueue]:
        noted.append(client_id)
        return alone(self, group, client_id, *args)

    def allocate_all(self: Any, *args: Any) -> dict[str, list[MessageQueue]]:
        noted.append("*")
        return whole(self, *args)

    monkeypatch.setattr(AllocateMessageQueueAveragely, "allocate", allocate)
    monkeypatch.setattr(AllocateMessageQueueAveragely, "allocate_all", allocate_all)
    return noted


def consumer(brokers: Brokers, listings: GroupListings, group: str, client_id: str, lane: Mark,
             base: AllocateMessageQueueAveragely, failures: list[GrayMQError]) -> Rebalancer:
    def fail(exc: GrayMQError, where: str) -> None:
        failures.append(exc)

    rt = ConsumerRuntime(group, client_id, False, ConsumerSettings(), cast(Any, brokers), cast(Any, Routes()),
                         GrayFlip(lane, drain_timeout_s=60, drain_poll_s=0.01), Supervisor(client_id, fail), fail,
                         subscriptions={TOPIC: "*"})
    parts = Parts()
    return Rebalancer(rt, Assignment(), cast(Any, parts), leases=QueueLeases(cast(Any, brokers), group, client_id),
                      start_offsets=cast(Any, parts), heartbeats=cast(Any, Routes()), base_strategy=base,
                      on_queues_changed=lambda: None, listings=listings)


def own_computation(listed: dict[str, Mark], client_id: str, lane: Mark) -> set[MessageQueue]:
    """What a consumer alone computes: the listed clients and itself as it is, allocated by the gray strategy."""
    sides = {**listed, client_id: lane}
    clients = [ConsumerView(c, bool(side), side if isinstance(side, str) else None) for c, side in sides.items()]
    strategy = AllocateMessageQueueGray(ROUTE.is_gray, AllocateMessageQueueAveragely(), lane_of=ROUTE.lane_of,
                                        weighted_lane=functools.partial(ROUTE.weighted_lane, weights=()))
    return set(strategy.allocate("G", client_id, ROUTE.queues(readable=True), clients))


LISTED: dict[str, Mark] = {"c0": False, "c1": True, "c2": False, "c4": False, "x0": False, "x1": True, "x2": False}
# c2 is gray already but listed normal (its heartbeat on the way), c3 not listed yet: their own entry counts
IN_PROCESS: dict[str, Mark] = {"c0": False, "c1": True, "c2": True, "c3": False, "c4": False}


def test_the_consumers_of_a_process_share_one_listing_per_broker_and_one_allocation_of_the_group(
        calls: list[str]) -> None:
    async def scenario() -> None:
        brokers, failures = Brokers(LISTED), []
        listings = GroupListings(cast(Any, brokers))
        listings.changed("G1")  # the notice that woke them
        parts = {c: consumer(brokers, listings, "G1", c, lane, AllocateMessageQueueAveragely(), failures)
                 for c, lane in IN_PROCESS.items()}  # each its own strategy, as each push consumer builds one
        rebalances = asyncio.gather(*(part.rebalance() for part in parts.values()))
        await asyncio.sleep(0.01)
        brokers.gate.set()
        await rebalances
        assert brokers.lists == {address: 1 for address in ADDRESSES} and not failures
        assert sorted(calls) == ["*", "*", "c2", "c3"]  # the group once (each side once), the others alone
        for client_id, part in parts.items():
            assert set(part.assignment.assigned()) == own_computation(LISTED, client_id, IN_PROCESS[client_id])

    asyncio.run(asyncio.wait_for(scenario(), 30))


@run
async def test_a_consumer_that_heard_a_newer_notice_than_the_request_in_flight_asks_again() -> None:
    brokers = Brokers(LISTED)
    listings = GroupListings(cast(Any, brokers))
    before = asyncio.ensure_future(listings.fetch(ADDRESSES[0], "G", listings.notices("G")))
    await asyncio.sleep(0)
    listings.changed("G")
    after = [asyncio.ensure_future(listings.fetch(ADDRESSES[0], "G", listings.notices("G"))) for _ in range(3)]
    late = asyncio.ensure_future(listings.fetch(ADDRESSES[0], "G", 0))  # seen no notice: joins the latest
    await asyncio.sleep(0.01)
    assert brokers.lists[ADDRESSES[0]] == 2
    brokers.gate.set()
    answers = await asyncio.gather(before, *after, late)
    assert all(answer.clients for answer in answers) and brokers.lists[ADDRESSES[0]] == 2


@run
async def test_a_listing_read_a_moment_ago_serves_the_next_periodic_rebalances_until_a_notice_or_its_age_says_otherwise(
        ) -> None:
    brokers = Brokers(LISTED)
    brokers.gate.set()
    listings = GroupListings(cast(Any, brokers), fresh_s=3600.0)
    first = await listings.fetch(ADDRESSES[0], "G", listings.notices("G"), reuse=True)
    again = [await listings.fetch(ADDRESSES[0], "G", listings.notices("G"), reuse=True) for _ in range(5)]
    assert brokers.lists[ADDRESSES[0]] == 1 and all(listing is first for listing in again)
    assert await listings.fetch(ADDRESSES[0], "G", listings.notices("G")) is not first  # asked for: afresh
    assert brokers.lists[ADDRESSES[0]] == 2
    listings.changed("G")  # the group changed: read afresh by those who heard it
    fresh = await listings.fetch(ADDRESSES[0], "G", listings.notices("G"), reuse=True)
    assert brokers.lists[ADDRESSES[0]] == 3
    listings.fresh_s = 0.0  # too old: read afresh
    assert await listings.fetch(ADDRESSES[0], "G", listings.notices("G"), reuse=True) is not fresh
    assert brokers.lists[ADDRESSES[0]] == 4


@pytest.mark.parametrize(("error", "fails"), [(NoPermissionError("no"), True), (RequestTimeoutError("slow"), False)])
def test_a_shared_listing_request_that_failed_fails_each_consumer_as_its_own_did(error: GrayMQError,
                                                                                  fails: bool) -> None:
    async def scenario() -> None:
        brokers, failures = Brokers(LISTED, error), []
        brokers.gate.set()
        listings = GroupListings(cast(Any, brokers))
        parts = [consumer(brokers, listings, "G2", c, False, AllocateMessageQueueAveragely(), failures)
                 for c in ("c0", "c4")]
        await asyncio.gather(*(part.rebalance() for part in parts))
        assert brokers.lists == {address: 1 for address in ADDRESSES}
        assert len(failures) == (4 if fails else 0)  # each consumer, for each broker

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_the_instance_counts_each_group_changed_notice() -> None:
    instance = ClientInstance(ClientConfig(nameserver=("http://127.0.0.1:1",)))
    instance._group_changed("G")
    instance._group_changed("G")
    instance._group_changed("H")
    assert (instance.group_listings.notices("G"), instance.group_listings.notices("H")) == (2, 1)


@pytest.mark.parametrize(("listed", "lane", "switch", "shared"), [
    ((False, frozenset({TOPIC})), None, True, True),
    ((True, frozenset({TOPIC})), "gray", True, True),  # listed True is the lane gray
    (("v2", None), "v2", True, True),  # topics unknown: counted in every topic
    ((False, frozenset({TOPIC})), "gray", True, False),  # flipped, its heartbeat on the way
    ((False, frozenset({TOPIC})), "gray", False, True),  # with the switch off no side counts
    ((False, frozenset({"U"})), None, False, False),  # not subscribed to the topic yet
])
def test_a_consumer_takes_the_shared_shares_only_when_the_view_shows_it_as_it_is(
        listed: tuple[Mark, frozenset[str] | None], lane: str | None, switch: bool, shared: bool) -> None:
    assert listed_as_is({"c": listed}, TOPIC, "c", lane, switch) is shared
    assert not listed_as_is({}, TOPIC, "c", lane, switch)
