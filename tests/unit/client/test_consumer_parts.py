"""A push consumer's parts, each alone on fakes (no socket): the assignment table, the fetcher (pull, dispatch,
send-back, commit) and the rebalancer (group view, allocation, leases, hand-over)."""

from __future__ import annotations

import asyncio
import doctest
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest

from graymq.client.consumer import assignment as assignment_module
from graymq.client.consumer.assignment import Assignment
from graymq.client.consumer.broker_heartbeats import BrokerHeartbeats
from graymq.client.consumer.consume_service import ListenerRunner
from graymq.client.consumer.fetcher import Fetcher
from graymq.client.consumer.process_queue import ProcessQueue
from graymq.client.consumer.queue_leases import QueueLeases
from graymq.client.consumer.rebalancer import Rebalancer
from graymq.client.consumer.runtime import ConsumerRuntime
from graymq.client.consumer.settings import ConsumerSettings
from graymq.client.message import ConsumeStatus, MessageExt, MessageQueue
from graymq.core.allocate import AllocateMessageQueueAveragely
from graymq.core.gray_flip import GrayFlip
from graymq.core.group_gray import GroupGray
from graymq.core.route import BrokerData, TopicRoute
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import ConnectFailedError, GrayMQError, NotLeaderError, QueueLockedError
from graymq.protocol.record import encode_properties, encode_record, make_properties
from graymq.protocol.supervisor import Supervisor

pytestmark = pytest.mark.unit
TOPIC, ADDRESS = "T", "127.0.0.1:1"
ROUTE = TopicRoute(TOPIC, (BrokerData("b", ADDRESS, queue_nums=6, gray_queue_nums=2),))


def run(test: Callable[[], Awaitable[None]]) -> Callable[[], None]:
    @functools.wraps(test)
    def sync() -> None:
        asyncio.run(asyncio.wait_for(test(), 30))
    return sync


async def until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.002)


def record(offset: int) -> bytes:
    properties = encode_properties(make_properties(tags="A", msg_id=f"M{offset}"))
    return encode_record(topic=TOPIC.encode(), body=f"body-{offset}".encode(), properties=properties, queue_id=1,
                         queue_offset=offset, physical_offset=offset * 500)


class FakeRoutes:
    def __init__(self) -> None:
        self.invalidated: list[str] = []

    def cached(self, topic: str) -> TopicRoute | None:
        return ROUTE

    def invalidate(self, topic: str) -> None:
        self.invalidated.append(topic)

    async def get(self, topic: str, *, refresh: bool = False) -> TopicRoute:
        return ROUTE


class FakeBrokers:
    """One queue's records (offsets 0..n-1) served once, then nothing new; the group's listing; queue leases
    granted unless ``held_by`` names another client; every call recorded."""

    def __init__(self, records: int = 0, clients: tuple[tuple[str, bool], ...] = (),
                 held_by: dict[int, str] | None = None, pull_error: GrayMQError | None = None) -> None:
        self.records, self.clients, self.held_by, self.pull_error = records, clients, held_by or {}, pull_error
        self.sent_back: list[int] = []
        self.unlocked: list[tuple[str, int, int]] = []
        self.calls: list[str] = []

    async def pull(self, address: str, request: pb.PullRequest) -> pb.PullResponse:
        if self.pull_error is not None:
            raise self.pull_error
        if request.queue_offset < self.records:
            return pb.PullResponse(status=pb.FOUND, next_begin_offset=self.records,
                                   records=b"".join(record(o) for o in range(request.queue_offset, self.records)))
        await asyncio.sleep(0.01)  # a long poll that finds nothing
        return pb.PullResponse(status=pb.NO_NEW_MSG, next_begin_offset=request.queue_offset)

    async def send_back(self, address: str, request: pb.SendBackRequest) -> None:
        self.sent_back.append(request.commit_log_offset)

    async def consumer_list(self, address: str, group: str) -> pb.ConsumerListResponse:
        return pb.ConsumerListResponse(clients=[pb.ClientInfo(client_id=c, gray_flag=g, last_heartbeat_ms=1,
                                                              topics=[TOPIC]) for c, g in self.clients])

    async def lock_queues(self, address: str, group: str, client_id: str,
                          queues: list[tuple[str, int]]) -> pb.LockQueuesResponse:
        return pb.LockQueuesResponse(
            locked=[pb.QueueRef(topic=t, queue_id=q) for t, q in queues if q not in self.held_by],
            held=[pb.QueueOwner(topic=t, queue_id=q, client_id=self.held_by[q]) for t, q in queues
                  if q in self.held_by])

    async def unlock_queues(self, address: str, group: str, client_id: str,
                            queues: list[tuple[str, int, int]]) -> None:
        self.unlocked.extend(queues)

    async def heartbeat(self, address: str, request: pb.HeartbeatRequest) -> pb.HeartbeatResponse:
        self.calls.append(f"heartbeat gray={request.consumers[0].gray_flag}")
        return pb.HeartbeatResponse()

    async def unregister(self, address: str, client_id: str, group: str) -> None:
        self.calls.append("unregister")


class FakeOffsetStore:
    def __init__(self, error: GrayMQError | None = None) -> None:
        self.written: dict[MessageQueue, int] = {}
        self.error = error

    async def write(self, mq: MessageQueue, address: str, offset: int) -> None:
        if self.error is not None:
            raise self.error
        self.written[mq] = offset

    async def flush(self) -> None:
        pass


def runtime(brokers: FakeBrokers, gray: bool = False, **settings: Any) -> ConsumerRuntime:
    failures: list[GrayMQError] = []

    def fail(exc: GrayMQError, where: str) -> None:
        failures.append(exc)

    flip = GrayFlip(gray, drain_timeout_s=60, drain_poll_s=0.01)
    rt = ConsumerRuntime("G", "c1", False, ConsumerSettings(**settings), cast(Any, brokers), cast(Any, FakeRoutes()),
                         flip, Supervisor("c1", fail), fail, subscriptions={TOPIC: "*"})
    return rt


# -- the assignment table ----------------------------------------------------------------------
def test_assignment_docstring_example() -> None:
    assert doctest.testmod(assignment_module).failed == 0


def test_the_table_says_which_queues_are_stale_which_are_new_and_where_a_queue_resumes() -> None:
    table = Assignment()
    q0, q1, q2 = (MessageQueue(TOPIC, "b", i) for i in range(3))
    held = ProcessQueue(q0, ADDRESS, 10)
    adopted = ProcessQueue(q1, ADDRESS, 0, adopted=True)
    table.add(held)
    table.add(adopted)
    wanted = {q0: (ADDRESS, False), q1: (ADDRESS, False), q2: (ADDRESS, False)}
    assert table.stale(wanted) == [adopted]  # wanted now as its own, not by adoption: handed over and taken again
    assert table.new(wanted) == [(q2, ADDRESS, False)]
    table.drop(held)
    assert held.dropped and table.assigned() == [q1]


# -- the fetcher ---------------------------------------------------------------------------------
def fetcher(rt: ConsumerRuntime, store: FakeOffsetStore, status: ConsumeStatus,
            lost: list[ProcessQueue] | None = None, listener_s: float = 0.0) -> tuple[Fetcher, list[int]]:
    seen: list[int] = []

    async def listener(messages: list[MessageExt]) -> ConsumeStatus:
        await asyncio.sleep(listener_s)
        seen.extend(m.queue_offset for m in messages)
        return status

    async def rejoin() -> None:
        pass

    part = Fetcher(rt, Assignment(), cast(Any, store), ListenerRunner(listener, 2, "GID"), orderly=False,
                   on_lost=lambda pq, exc: (lost if lost is not None else []).append(pq), rejoin=rejoin)
    return part, seen


@run
async def test_the_fetcher_pulls_hands_the_listener_every_message_and_commits_past_them() -> None:
    rt, store = runtime(FakeBrokers(records=5)), FakeOffsetStore()
    part, seen = fetcher(rt, store, ConsumeStatus.CONSUME_SUCCESS)
    pq = ProcessQueue(MessageQueue(TOPIC, "b", 1), ADDRESS, 0)
    part.assignment.add(pq)
    part.fetch(pq)
    await until(lambda: part.consumed == 5, "5 messages consumed")
    await part.persist_offsets()
    assert sorted(seen) == [0, 1, 2, 3, 4] and store.written == {pq.mq: 5} and pq.committed == 5
    await rt.tasks.cancel([pq.task] if pq.task else [])


@run
async def test_the_persist_loop_commits_what_moved_retries_a_failed_commit_and_then_sleeps_until_an_offset_moves(
        ) -> None:
    rt, store = runtime(FakeBrokers(records=5), persist_interval_s=0.01), FakeOffsetStore(error=ConnectFailedError("x"))
    part, _ = fetcher(rt, store, ConsumeStatus.CONSUME_SUCCESS)
    persisted = [0]
    persist = part.persist_offsets

    async def counted() -> None:
        persisted[0] += 1
        await persist()

    part.persist_offsets = counted  # type: ignore[method-assign]
    pq = ProcessQueue(MessageQueue(TOPIC, "b", 1), ADDRESS, 0)
    part.assignment.add(pq)
    loop = asyncio.ensure_future(part.persist_loop())
    part.fetch(pq)
    await until(lambda: part.consumed == 5 and persisted[0] >= 3, "5 consumed, their commit failing")
    store.error = None
    await until(lambda: store.written == {pq.mq: 5}, "the commit tried again")
    settled = persisted[0]
    await asyncio.sleep(0.3)  # idle long polls: nothing moves
    assert persisted[0] - settled <= 1 and not part.moved.is_set()
    loop.cancel()
    await rt.tasks.cancel([pq.task] if pq.task else [])


@run
async def test_a_batch_finishing_after_the_last_persist_is_committed_though_no_pull_moves_anything() -> None:
    rt, store = runtime(FakeBrokers(records=5), persist_interval_s=0.01), FakeOffsetStore()
    part, _ = fetcher(rt, store, ConsumeStatus.CONSUME_SUCCESS, listener_s=0.2)
    pq = ProcessQueue(MessageQueue(TOPIC, "b", 1), ADDRESS, 0)
    part.assignment.add(pq)
    loop = asyncio.ensure_future(part.persist_loop())
    part.fetch(pq)
    # the commit at the pull (offset 0, the messages in the listener) is the last one a pull moves
    await until(lambda: store.written == {pq.mq: 5}, "the end committed once the listener finished")
    loop.cancel()
    await rt.tasks.cancel([pq.task] if pq.task else [])


@run
async def test_the_fetcher_sends_failed_messages_back_and_then_counts_them_consumed() -> None:
    brokers = FakeBrokers(records=2)
    rt, store = runtime(brokers), FakeOffsetStore()
    part, _ = fetcher(rt, store, ConsumeStatus.RECONSUME_LATER)
    pq = ProcessQueue(MessageQueue(TOPIC, "b", 1), ADDRESS, 0)
    part.assignment.add(pq)
    part.fetch(pq)
    await until(lambda: part.consumed == 2, "2 messages sent back")
    assert sorted(brokers.sent_back) == [0, 500] and pq.commit_offset() == 2
    await rt.tasks.cancel([pq.task] if pq.task else [])


@run
async def test_a_commit_refused_because_another_client_holds_the_queue_reports_it_lost() -> None:
    rt, lost = runtime(FakeBrokers()), []
    part, _ = fetcher(rt, FakeOffsetStore(error=QueueLockedError("held by c2")), ConsumeStatus.CONSUME_SUCCESS, lost)
    pq = ProcessQueue(MessageQueue(TOPIC, "b", 1), ADDRESS, 3)
    await part.commit(pq)
    assert lost == [pq] and pq.committed == -1


@run
async def test_a_pull_refused_by_the_queue_lease_ends_that_queue_loop_and_reports_it_lost() -> None:
    rt, lost = runtime(FakeBrokers(pull_error=QueueLockedError("held by c2"))), []
    part, _ = fetcher(rt, FakeOffsetStore(), ConsumeStatus.CONSUME_SUCCESS, lost)
    pq = ProcessQueue(MessageQueue(TOPIC, "b", 1), ADDRESS, 0)
    part.fetch(pq)
    await until(lambda: lost == [pq], "the queue reported lost")
    assert pq.task is not None
    await asyncio.wait_for(pq.task, 5)


@run
async def test_a_pull_refused_by_a_deposed_leader_reads_the_route_again_and_rebalances() -> None:
    """A leader cut off from the name servers is deposed while its consumers still reach it: it answers NOT_LEADER,
    and the consumer must look for the new leader at once, not at the route's next refresh (30 s later)."""
    rt = runtime(FakeBrokers(pull_error=NotLeaderError("replica 0 follows replica 1 at epoch 2")))
    part, _ = fetcher(rt, FakeOffsetStore(), ConsumeStatus.CONSUME_SUCCESS)
    pq = ProcessQueue(MessageQueue(TOPIC, "b", 1), ADDRESS, 0)
    part.fetch(pq)
    await until(lambda: rt.rebalance_now.is_set(), "a rebalance asked for")
    assert TOPIC in cast(FakeRoutes, rt.routes).invalidated
    await rt.tasks.cancel([pq.task] if pq.task else [])


# -- the rebalancer ------------------------------------------------------------------------------
class FakeFetcher:
    def __init__(self) -> None:
        self.fetched: list[MessageQueue] = []

    def fetch(self, pq: ProcessQueue) -> None:
        self.fetched.append(pq.mq)

    async def commit(self, pq: ProcessQueue) -> None:
        pass


class FakeStartOffsets:
    async def plan(self, queues: list[Any], addresses: Any) -> dict[MessageQueue, int]:
        return {q.mq: 0 for q in queues}


class FakeHeartbeats:
    async def route(self, topic: str) -> TopicRoute:
        return ROUTE

    async def meet_new_brokers(self) -> None:
        pass


def rebalancer(brokers: FakeBrokers, gray: bool = False) -> tuple[Rebalancer, FakeFetcher, list[int]]:
    rt, part, changes = runtime(brokers, gray=gray), FakeFetcher(), []
    leases = QueueLeases(cast(Any, brokers), "G", "c1")
    return Rebalancer(rt, Assignment(), cast(Any, part), leases=leases, start_offsets=cast(Any, FakeStartOffsets()),
                      heartbeats=cast(Any, FakeHeartbeats()), base_strategy=AllocateMessageQueueAveragely(),
                      on_queues_changed=lambda: changes.append(1)), part, changes


def queue_ids(queues: list[MessageQueue]) -> list[int]:
    return sorted(mq.queue_id for mq in queues)


@run
async def test_normal_consumers_split_the_normal_queues_and_leave_the_gray_ones() -> None:
    brokers = FakeBrokers(clients=(("c0", False), ("c1", False)))
    part, fetch, changes = rebalancer(brokers)
    await part.rebalance()
    mine = part.assignment.assigned()
    assert len(mine) == 2 and not {0, 5} & set(queue_ids(mine))  # 6 queues, gray 0 and 5, two normal clients
    assert queue_ids(fetch.fetched) == queue_ids(mine) and changes == [1]
    assert set(part.leases.held) == set(mine)


@run
async def test_a_gray_consumer_takes_the_gray_queues() -> None:
    part, _, _ = rebalancer(FakeBrokers(clients=(("c0", False),)), gray=True)
    await part.rebalance()
    assert queue_ids(part.assignment.assigned()) == [0, 5]


@run
async def test_a_queue_another_client_still_holds_is_not_taken_and_is_asked_for_again() -> None:
    part, _, _ = rebalancer(FakeBrokers(clients=(("c1", False),), held_by={2: "c9"}))
    await part.rebalance()
    assert queue_ids(part.assignment.assigned()) == [1, 3, 4]
    assert part.leases.waiting == {MessageQueue(TOPIC, "b", 2): "c9"}
    await until(part.runtime.rebalance_now.is_set, "a rebalance asked for again")


@run
async def test_a_queue_no_longer_wanted_is_handed_over_with_its_final_offset() -> None:
    brokers = FakeBrokers(clients=(("c1", False),))
    part, _, _ = rebalancer(brokers)
    await part.rebalance()
    pq = part.assignment.queues[MessageQueue(TOPIC, "b", 1)]
    pq.add([0, 1, 2], 3, 100)
    pq.done([0, 1], 100)
    brokers.clients = (("c0", False), ("c1", False))
    await part.rebalance()
    assert pq.dropped and (TOPIC, 1, 2) in brokers.unlocked and pq.committed == 2
    assert len(part.assignment.assigned()) == 2


# -- the broker heartbeats -----------------------------------------------------------------------
@run
async def test_heartbeats_carry_the_flag_and_a_retired_consumer_leaves_the_brokers_once_its_queues_are_back() -> None:
    brokers = FakeBrokers()
    rt = runtime(brokers, gray=True)
    beats = BrokerHeartbeats(rt, "last")
    await beats.beat()
    rt.group_gray = GroupGray(retired=True)
    await beats.beat()  # retired, still handing its queues back: leaving now would drop its leases uncommitted
    await beats.leave()
    await beats.beat()
    rt.group_gray = GroupGray()
    await beats.beat()
    rt.group_gray = GroupGray(retired=True)
    await beats.beat()  # retired again: it stays until it has handed back again
    assert brokers.calls == ["heartbeat gray=True", "heartbeat gray=True", "unregister", "heartbeat gray=True",
                             "heartbeat gray=True"]


@run
async def test_a_broker_of_its_topics_that_took_no_heartbeat_of_the_consumer_gets_one_before_it_rebalances() -> None:
    rt = runtime(FakeBrokers(), gray=True)
    beats = BrokerHeartbeats(rt, "last")
    routes = cast(FakeRoutes, rt.routes)

    def leader_at(port: int) -> None:
        route = TopicRoute(TOPIC, (BrokerData("b", f"127.0.0.1:{port}", queue_nums=6, gray_queue_nums=2),))
        routes.cached = lambda topic: route  # type: ignore[method-assign]

    await beats.meet_new_brokers()
    await beats.meet_new_brokers()  # met
    leader_at(2)  # a new leader at another address
    await beats.meet_new_brokers()
    await beats.meet_new_brokers()
    rt.group_gray = GroupGray(retired=True)
    leader_at(3)
    await beats.meet_new_brokers()  # retired: it leaves the group rather than meets brokers
    assert cast(FakeBrokers, rt.brokers).calls == ["heartbeat gray=True", "heartbeat gray=True"]


@run
async def test_an_idle_consumer_beats_the_same_data_and_a_subscription_changed_gets_a_newer_version() -> None:
    rt = runtime(FakeBrokers())
    beats = BrokerHeartbeats(rt, "last")
    first = beats.data()
    assert beats.data() is first, "nothing changed: the same data"
    version = first.subscriptions[0].sub_version
    rt.group_gray = GroupGray(switch=False, lane_weights={"v2": 10})
    data = beats.data()
    assert data is not first and (data.gray_switch, dict(data.lane_weights)) == (False, {"v2": 10})
    assert data.subscriptions[0].sub_version == version, "the subscription itself did not change"
    time.sleep(0.002)
    rt.subscriptions.update({TOPIC: "TagA", "U": "*"})
    subscriptions = {s.topic: (s.sub_string, s.sub_version) for s in beats.data().subscriptions}
    assert subscriptions[TOPIC][0] == "TagA" and subscriptions[TOPIC][1] > version
    assert subscriptions["U"][1] == subscriptions[TOPIC][1]
    time.sleep(0.002)
    rt.subscriptions.update({"U": "TagB"})
    again = {s.topic: (s.sub_string, s.sub_version) for s in beats.data().subscriptions}
    assert again[TOPIC] == subscriptions[TOPIC] and again["U"][1] > subscriptions["U"][1]


# -- a queue moving to a new leader --------------------------------------------------------------
class ReplicaSet(FakeBrokers):
    """One queue (id 1) on a broker set whose replicas hold their own logs (msg ids by queue offset): only the leader
    serves pulls and leases, the others answer NOT_LEADER; the route names the leader."""

    def __init__(self, logs: dict[str, list[str]], leader: str) -> None:
        super().__init__(clients=(("c1", False),))
        self.logs, self.leader = logs, leader

    def route(self) -> TopicRoute:
        return TopicRoute(TOPIC, (BrokerData("b", self.leader, queue_nums=2, gray_queue_nums=0),))

    def _lead(self, address: str) -> None:
        if address != self.leader:
            raise NotLeaderError(f"{address} follows {self.leader}")

    async def pull(self, address: str, request: pb.PullRequest) -> pb.PullResponse:
        self._lead(address)
        log, start = self.logs[address], request.queue_offset
        if request.queue_id != 1 or start >= len(log):
            await asyncio.sleep(0.01)
            return pb.PullResponse(status=pb.NO_NEW_MSG, next_begin_offset=start)
        end = min(len(log), start + (request.max_msg_nums or 32))
        return pb.PullResponse(status=pb.FOUND, next_begin_offset=end, records=b"".join(
            encode_record(topic=TOPIC.encode(), body=b"x", queue_id=1, queue_offset=o, physical_offset=o * 500,
                          properties=encode_properties(make_properties(msg_id=log[o]))) for o in range(start, end)))

    async def lock_queues(self, address: str, group: str, client_id: str,
                          queues: list[tuple[str, int]]) -> pb.LockQueuesResponse:
        self._lead(address)
        return await super().lock_queues(address, group, client_id, queues)

    async def unlock_queues(self, address: str, group: str, client_id: str,
                            queues: list[tuple[str, int, int]]) -> None:
        self._lead(address)
        await super().unlock_queues(address, group, client_id, queues)


async def consume_across_an_election(old: list[str], new: list[str], committed: int) -> list[str]:
    """What a consumer of queue 1 is given: all of ``old`` read from leader A, then B elected (its log ``new``,
    ``committed`` the offset its copy of the group's commits says)."""
    brokers = ReplicaSet({"A:1": old, "B:1": new[: len(old)]}, "A:1")
    rt, seen = runtime(brokers), []

    class Routes:
        async def route(self, topic: str) -> TopicRoute:
            return brokers.route()

        async def meet_new_brokers(self) -> None:
            pass

    class Starts:
        async def plan(self, queues: list[Any], addresses: Any) -> dict[MessageQueue, int]:
            return {q.mq: committed if q.address == "B:1" else 0 for q in queues}

    async def listener(messages: list[MessageExt]) -> ConsumeStatus:
        seen.extend(m.msg_id for m in messages if m.queue_id == 1)
        return ConsumeStatus.CONSUME_SUCCESS

    async def rejoin() -> None:
        pass

    table = Assignment()
    fetch = Fetcher(rt, table, cast(Any, FakeOffsetStore()), ListenerRunner(listener, 2, "GID"), orderly=False,
                    on_lost=lambda pq, exc: None, rejoin=rejoin)
    part = Rebalancer(rt, table, fetch, leases=QueueLeases(cast(Any, brokers), "G", "c1"),
                      start_offsets=cast(Any, Starts()), heartbeats=cast(Any, Routes()),
                      base_strategy=AllocateMessageQueueAveragely(), on_queues_changed=lambda: None)
    await part.rebalance()
    await until(lambda: len(seen) == len(old), "the old leader's messages consumed")
    brokers.logs["B:1"], brokers.leader = new, "B:1"  # elected; it stores new messages at its next offsets
    await until(rt.rebalance_now.is_set, "the consumer told NOT_LEADER by A")
    await part.rebalance()
    await until(lambda: set(new) <= set(old) | set(seen), "the new leader's messages consumed")
    await part.release_queues(keep_adopted=False)
    return seen


@run
async def test_a_new_leader_storing_other_messages_at_offsets_read_from_the_old_one_has_them_delivered() -> None:
    """Async replication: A acknowledged o5..o9 alone and the consumer read them; B, elected with o0..o4, stores n5..n9
    at those offsets. Resuming where the consumer stopped on A (10) would skip every one of them: it resumes at B's
    committed offset instead, since B does not hold o9 at 9."""
    old = [f"o{i}" for i in range(10)]
    new = old[:5] + [f"n{i}" for i in range(5, 10)]
    seen = await consume_across_an_election(old, new, committed=3)
    assert seen[:10] == old and {f"n{i}" for i in range(5, 10)} <= set(seen[10:]), seen


@run
async def test_a_new_leader_holding_what_was_read_from_the_old_one_resumes_where_the_consumer_stopped() -> None:
    """Sync replication (or a pause): B holds o0..o9 as A did, its copy of the commits behind (3): the consumer
    resumes at 10, where it stopped, and gets nothing twice."""
    old = [f"o{i}" for i in range(10)]
    seen = await consume_across_an_election(old, old + ["n10", "n11"], committed=3)
    assert seen == old + ["n10", "n11"], seen


@run
async def test_a_new_leader_holding_the_last_message_read_but_another_one_below_it_has_that_one_delivered() -> None:
    """Under sync replication a send stored by the cut leader but not copied is answered TIMEOUT and sent again: the
    new leader may store it elsewhere, and the last message read may even sit at the same offset there while another
    sits below it. Every message consumed since the committed offset is compared, not only the last one."""
    old = [f"o{i}" for i in range(10)]
    new = old[:5] + ["x5"] + old[6:] + ["o5"]
    seen = await consume_across_an_election(old, new, committed=3)
    assert "x5" in seen[10:] and seen[:10] == old, seen

