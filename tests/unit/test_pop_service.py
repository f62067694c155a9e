"""PopService on a real store in a temporary directory: receive, ack, expiry, dead letters, FIFO, restart."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from graymq.broker_ext.groups.offset_manager import ConsumerOffsetManager
from graymq.broker_ext.pop.receipt import InvalidReceiptHandle, ReceiptSigner
from graymq.broker_ext.pop.service import PopRequest, PopService, StaleReceiptHandle
from graymq.broker_ext.processors.pull_hold import PullRequestHoldService
from graymq.broker_ext.store import MessageStore, PutMessage, StoreConfig
from graymq.protocol.record import MessageExt, make_properties

pytestmark = pytest.mark.unit

TOPIC, GROUP = "T", "G"


class Broker:
    """The collaborators PopService uses, real, with a clock the test moves."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.store = MessageStore(StoreConfig(store_dir=root / "store", segment_size=1 << 20, cq_units_per_file=64))
        self.store.load()
        self.offsets = ConsumerOffsetManager(root)
        self.holds = PullRequestHoldService()
        self.now = 0.0
        self.dead: list[tuple[str, str, int]] = []
        self.leases: dict[int, str] = {}
        self.pop = self.open()

    def open(self) -> PopService:
        pop = PopService(self.store, self.offsets, self.holds, ReceiptSigner(b"k" * 32),
                         lambda group, msg, attempts: self.dead.append((group, msg.body.decode(), attempts)),
                         lambda group, topic, queue_id: self.leases.get(queue_id), clock=lambda: self.now)
        pop.open_journal(self.root / "acks")
        return pop

    def put(self, queue_id: int, *bodies: str, tags: str = "") -> None:
        self.store.put_messages([PutMessage(TOPIC, queue_id, b.encode(), make_properties(tags=tags, msg_id=b))
                                 for b in bodies])
        self.holds.notify(TOPIC, queue_id)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path)
    yield b
    asyncio.run(b.store.stop())


def request(batch: int = 8, queues: tuple[int, ...] = (0, 1), **kw: object) -> PopRequest:
    return PopRequest(GROUP, TOPIC, queues, batch, invisible_ms=10_000, **kw)  # type: ignore[arg-type]


def bodies(popped: list) -> list[str]:  # type: ignore[type-arg]
    return sorted(p.message.body.decode() for p in popped)


def test_received_messages_acked_move_the_committed_offset_and_are_not_received_again(broker: Broker) -> None:
    broker.put(0, "a", "b", "c")

    async def run() -> None:
        popped = await broker.pop.receive(request())
        assert bodies(popped) == ["a", "b", "c"] and {p.attempt for p in popped} == {1}
        assert broker.pop.in_flight(GROUP, TOPIC, 0) == 3
        await broker.pop.ack(GROUP, TOPIC, popped[1].receipt_handle)
        assert broker.offsets.query(GROUP, TOPIC, 0) == 0  # "a" is not acked yet
        for p in (popped[0], popped[2]):
            await broker.pop.ack(GROUP, TOPIC, p.receipt_handle)
        assert broker.offsets.query(GROUP, TOPIC, 0) == 3 and broker.pop.in_flight(GROUP, TOPIC, 0) == 0
        assert await broker.pop.receive(request()) == []
        with pytest.raises(StaleReceiptHandle):
            await broker.pop.ack(GROUP, TOPIC, popped[0].receipt_handle)

    asyncio.run(run())


def test_an_expired_message_comes_again_with_the_next_attempt_and_then_goes_to_the_dead_letter_queue(
        broker: Broker) -> None:
    broker.put(1, "x")

    async def run() -> None:
        first = await broker.pop.receive(request(max_attempts=2))
        broker.now = 11.0
        second = await broker.pop.receive(request(max_attempts=2))
        assert [p.attempt for p in second] == [2]
        with pytest.raises(StaleReceiptHandle):  # the first delivery's handle
            await broker.pop.ack(GROUP, TOPIC, first[0].receipt_handle)
        broker.now = 22.0
        assert await broker.pop.receive(request(max_attempts=2)) == []
        assert broker.dead == [(GROUP, "x", 2)]
        assert broker.offsets.query(GROUP, TOPIC, 1) == 1  # dead-lettered counts as acked

    asyncio.run(run())


def test_change_invisible_duration_gives_a_new_handle_and_makes_the_old_one_stale(broker: Broker) -> None:
    broker.put(0, "slow")

    async def run() -> None:
        (popped,) = await broker.pop.receive(request())
        renewed = broker.pop.change_invisible(GROUP, TOPIC, popped.receipt_handle, 60_000)
        broker.now = 30.0  # past the first invisible time, within the new one
        assert await broker.pop.receive(request()) == []
        with pytest.raises(StaleReceiptHandle):
            await broker.pop.ack(GROUP, TOPIC, popped.receipt_handle)
        await broker.pop.ack(GROUP, TOPIC, renewed)
        assert broker.offsets.query(GROUP, TOPIC, 0) == 1

    asyncio.run(run())


def test_a_forged_handle_or_one_of_another_group_is_refused(broker: Broker) -> None:
    broker.put(0, "m")

    async def run() -> None:
        (popped,) = await broker.pop.receive(request())
        for group, handle in ((GROUP, "forged.handle"), (GROUP, popped.receipt_handle[:-2] + "AA"),
                              ("OTHER", popped.receipt_handle)):
            with pytest.raises(InvalidReceiptHandle):
                await broker.pop.ack(group, TOPIC, handle)
        assert broker.pop.in_flight(GROUP, TOPIC, 0) == 1

    asyncio.run(run())


def test_a_fifo_group_has_one_message_in_flight_per_queue_in_order(broker: Broker) -> None:
    broker.put(0, "o-1", "o-2")
    broker.put(1, "p-1")

    async def run() -> None:
        first = await broker.pop.receive(request(fifo=True))
        assert bodies(first) == ["o-1", "p-1"]
        assert await broker.pop.receive(request(fifo=True)) == []
        broker.now = 11.0  # both expire: the same messages again, before anything newer
        again = await broker.pop.receive(request(fifo=True))
        assert bodies(again) == ["o-1", "p-1"] and {p.attempt for p in again} == {2}
        await broker.pop.ack(GROUP, TOPIC, next(p for p in again if p.message.queue_id == 0).receipt_handle)
        assert bodies(await broker.pop.receive(request(fifo=True))) == ["o-2"]

    asyncio.run(run())


def test_a_queue_leased_by_a_push_consumer_is_skipped_and_a_queue_in_use_is_busy(broker: Broker) -> None:
    broker.put(0, "leased")
    broker.put(1, "free")
    broker.leases[0] = "push-client"

    async def run() -> None:
        assert bodies(await broker.pop.receive(request())) == ["free"]
        assert broker.pop.busy(GROUP, TOPIC, 1) and not broker.pop.busy(GROUP, TOPIC, 0)

    asyncio.run(run())


def test_a_long_poll_ends_when_a_message_arrives(broker: Broker) -> None:
    broker.now = 0.0

    async def run() -> list[str]:
        broker.pop = broker.open()
        broker.pop._clock = lambda: asyncio.get_running_loop().time()  # noqa: SLF001 - real time for the wait
        waiting = asyncio.ensure_future(broker.pop.receive(request(timeout_s=30.0)))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        broker.put(1, "late")
        return bodies(await asyncio.wait_for(waiting, 10))

    assert asyncio.run(run()) == ["late"]


def test_after_a_restart_acked_messages_stay_acked_and_unacked_ones_come_again(broker: Broker) -> None:
    broker.put(0, *(f"m{i}" for i in range(6)))

    async def run() -> list[MessageExt]:
        popped = await broker.pop.receive(request())
        for p in popped:
            if p.message.body in (b"m0", b"m2", b"m5"):
                await broker.pop.ack(GROUP, TOPIC, p.receipt_handle)
        # a crash: nothing of the old PopService survives but its journal; the offsets file was not written
        broker.offsets = ConsumerOffsetManager(broker.root)
        broker.offsets.load()
        broker.pop = broker.open()
        again = await broker.pop.receive(request())
        assert broker.offsets.query(GROUP, TOPIC, 0) == 1
        return [p.message for p in again]

    assert sorted(m.body.decode() for m in asyncio.run(run())) == ["m1", "m3", "m4"]


def test_a_receive_that_may_use_no_queue_answers_empty_at_once(broker: Broker) -> None:
    broker.put(0, "elsewhere")

    async def run() -> list[str]:
        return bodies(await asyncio.wait_for(broker.pop.receive(request(queues=(), timeout_s=30.0)), 5))

    assert asyncio.run(run()) == []


def test_acks_survive_a_restart_after_the_journal_was_compacted(broker: Broker) -> None:
    broker.put(0, *(f"c{i}" for i in range(40)))

    async def run() -> list[str]:
        assert broker.pop.journal is not None
        broker.pop.journal.compact_bytes = 256  # compacts every few acks
        popped = await broker.pop.receive(request(batch=40))
        for p in popped:
            if p.message.body != b"c7":  # one stays in flight below the rest
                await broker.pop.ack(GROUP, TOPIC, p.receipt_handle)
        await broker.pop.close()
        broker.offsets = ConsumerOffsetManager(broker.root)  # never written: the journal alone says what is acked
        broker.pop = broker.open()
        return bodies(await broker.pop.receive(request(batch=40)))

    assert asyncio.run(run()) == ["c7"]
    assert '"floor":7' in (broker.root / "acks").read_text()  # compacted: c0..c6 are a floor
