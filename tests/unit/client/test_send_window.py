"""The send window: a producer keeps its unresolved sequences of a queue within the SEQUENCES_KEPT a broker keeps,
so a late resend is never answered as a forgotten duplicate. Slots are held from the first attempt until the send
ends or moves to another queue; a full queue is skipped when the send may choose, else waited for."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from graymq.client.message import Message, MessageQueue
from graymq.client.producer import Producer
from graymq.client.send_window import BlockingSendWindow, SendWindow, WindowState, queue_key, select_with_room
from graymq.core.route import BrokerData, TopicRoute
from graymq.core.selector import GrayQueueSelector
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.constants import SEQUENCES_KEPT
from graymq.protocol.errors import BadRequestError, ConnectFailedError, GrayMQError, RequestTimeoutError
from tests.support.offline_producer import run_offline

pytestmark = pytest.mark.unit

ONE_QUEUE = TopicRoute("T", (BrokerData("broker-a", "127.0.0.1:1", 1, 0),))
TWO_BROKERS = TopicRoute("T", (BrokerData("broker-a", "127.0.0.1:1", 2, 0),
                               BrokerData("broker-b", "127.0.0.1:2", 2, 0)))
KEY_A0 = ("broker-a", "T", 0)


class GatedBrokers:
    """Each attempt is recorded (address, queue, sequence), fails with the next of ``errors``, else waits for
    ``gate`` (open by default) and is answered."""

    def __init__(self, *errors: GrayMQError) -> None:
        self.errors = list(errors)
        self.attempts: list[tuple[str, int, int]] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def send(self, address: str, req: pb.SendRequest, timeout_s: float) -> pb.SendResponse:
        self.attempts.append((address, req.queue_id, req.sequence))
        if self.errors:
            raise self.errors.pop(0)
        await self.gate.wait()
        return pb.SendResponse(msg_id=req.message.msg_id, queue_id=req.queue_id, queue_offset=7)

    async def close(self) -> None:
        pass


def run(route: TopicRoute, brokers: GatedBrokers, body: Any) -> Producer:
    return run_offline(route, brokers, body, retry_times=2, auto_batch=False)


async def until(condition: Any) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition not reached")


def test_the_window_bounds_the_span_from_the_oldest_unresolved_sequence_not_just_their_count() -> None:
    w = WindowState()
    assert [w.take_now(KEY_A0) for _ in range(SEQUENCES_KEPT)] == list(range(SEQUENCES_KEPT))
    assert w.take_now(KEY_A0) is None
    for sequence in range(1, SEQUENCES_KEPT):  # all but the oldest answered: it may still be resent
        w.release(KEY_A0, sequence)
    assert w.unresolved(KEY_A0) == 1 and w.take_now(KEY_A0) is None
    w.release(KEY_A0, 0)
    assert w.take_now(KEY_A0) == SEQUENCES_KEPT
    assert w.take_now(("broker-a", "T", 1)) == 0  # each queue numbers its own


def test_a_pinned_sequence_is_held_within_the_span_of_the_others() -> None:
    w = WindowState()
    assert w.take_now(KEY_A0, 10) == 10
    assert w.take_now(KEY_A0, 10) is None  # the same request twice at once
    assert w.take_now(KEY_A0, 15) is None and w.take_now(KEY_A0, 14) == 14
    w.release(KEY_A0, 10)
    assert w.take_now(KEY_A0, 15) == 15


def test_a_slot_is_held_while_a_send_is_in_flight_and_released_when_it_is_answered() -> None:
    brokers = GatedBrokers()
    brokers.gate.clear()

    async def body(p: Producer) -> None:
        sending = asyncio.ensure_future(p.send(Message("T", b"x"), timeout_s=5.0))
        await until(lambda: brokers.attempts)
        assert p.window.unresolved(KEY_A0) == 1
        brokers.gate.set()
        await sending
        assert p.window.unresolved(KEY_A0) == 0

    run(ONE_QUEUE, brokers, body)


def test_a_slot_is_released_when_the_send_stops() -> None:
    async def body(p: Producer) -> None:
        with pytest.raises(BadRequestError):
            await p.send(Message("T", b"x"), timeout_s=5.0)
        assert p.window.unresolved(KEY_A0) == 0

    run(ONE_QUEUE, GatedBrokers(BadRequestError("refused for good")), body)


def test_a_send_moved_to_another_queue_releases_the_first_and_holds_the_new_one() -> None:
    brokers = GatedBrokers(ConnectFailedError("refused"))
    brokers.gate.clear()

    async def body(p: Producer) -> None:
        sending = asyncio.ensure_future(p.send(Message("T", b"x"), timeout_s=5.0))
        await until(lambda: len(brokers.attempts) == 2)
        (first_address, first_queue, _), (address, queue_id, sequence) = brokers.attempts
        first_key = ("broker-a" if first_address.endswith(":1") else "broker-b", "T", first_queue)
        key = ("broker-a" if address.endswith(":1") else "broker-b", "T", queue_id)
        assert key[0] != first_key[0] and sequence == 0
        assert p.window.unresolved(first_key) == 0 and p.window.unresolved(key) == 1
        brokers.gate.set()
        await sending
        assert p.window.unresolved(key) == 0

    run(TWO_BROKERS, brokers, body)


def test_sends_beyond_the_window_wait_for_a_slot_and_time_out_without_one() -> None:
    brokers = GatedBrokers()
    brokers.gate.clear()

    async def body(p: Producer) -> None:
        sends = [asyncio.ensure_future(p.send(Message("T", b"x"), timeout_s=5.0)) for _ in range(SEQUENCES_KEPT + 2)]
        await until(lambda: len(brokers.attempts) == SEQUENCES_KEPT)
        await asyncio.sleep(0.05)
        assert [sequence for _, _, sequence in brokers.attempts] == list(range(SEQUENCES_KEPT))  # two wait
        with pytest.raises(RequestTimeoutError, match="waiting for one of the 5 sends in flight"):
            await p.send(Message("T", b"late"), timeout_s=0.05)
        brokers.gate.set()
        await asyncio.gather(*sends)
        assert [sequence for _, _, sequence in brokers.attempts] == list(range(SEQUENCES_KEPT + 2))
        assert p.window.unresolved(KEY_A0) == 0

    run(ONE_QUEUE, brokers, body)


def test_a_send_free_to_choose_skips_a_full_queue_and_an_ordered_one_keeps_its_own() -> None:
    selector, window = GrayQueueSelector(), SendWindow()
    full = MessageQueue("T", "broker-a", 0)
    for _ in range(SEQUENCES_KEPT):
        window.take_now(queue_key(full))
    chosen = [select_with_room(selector, window, TWO_BROKERS, False, False, None, None) for _ in range(8)]
    assert full not in chosen and len(set(chosen)) == 3
    keyed = {select_with_room(selector, window, TWO_BROKERS, False, False, None, f"k{i}") for i in range(40)}
    assert full in keyed  # ordered: its queue, waited for
    assert select_with_room(selector, window, ONE_QUEUE, False, False, None, None).queue_id == 0  # none free


def test_the_blocking_window_wakes_a_waiting_thread_when_a_slot_is_released() -> None:
    window = BlockingSendWindow()
    for _ in range(SEQUENCES_KEPT):
        window.take_now(KEY_A0)
    taken: list[int] = []
    waiter = threading.Thread(target=lambda: taken.append(window.take(KEY_A0, time.monotonic() + 10)))
    waiter.start()
    waiter.join(0.1)
    assert waiter.is_alive() and not taken
    window.release(KEY_A0, 0)
    waiter.join(10)
    assert taken == [SEQUENCES_KEPT]
    with pytest.raises(RequestTimeoutError):
        window.take(KEY_A0, time.monotonic() + 0.05)


def test_waiting_senders_go_in_arrival_order_once_the_oldest_sequence_is_resolved() -> None:
    async def body() -> None:
        window = SendWindow()
        for _ in range(SEQUENCES_KEPT):
            window.take_now(KEY_A0)
        order: list[tuple[str, int]] = []

        async def waiter(name: str) -> None:
            order.append((name, await window.take(KEY_A0, time.monotonic() + 5)))

        waiting = [asyncio.ensure_future(waiter(name)) for name in "abc"]
        await asyncio.sleep(0.01)
        assert window.take_now(KEY_A0) is None  # a newcomer queues behind them
        for sequence in range(1, SEQUENCES_KEPT):  # above the oldest: no room yet
            window.release(KEY_A0, sequence)
        await asyncio.sleep(0.01)
        assert order == []
        window.release(KEY_A0, 0)  # room for all three: each passes the turn on
        await asyncio.wait_for(asyncio.gather(*waiting), 5)
        assert order == [("a", 5), ("b", 6), ("c", 7)]

    asyncio.run(body())
