"""A producer flipped normal while one of its gray sends is under way reports gray until that send is answered.

A promote reads a producer's "normal" as "no gray message is stored after this". A send chosen gray before the
flip whose first attempt was lost with the leader (outcome unknown) is retried to the same gray queue at the new
leader, maybe seconds later: reported normal at the flip, the gray consumer could drain and flip before it
lands, and the message would be stranded on a gray queue no consumer holds. Both producers are checked, the
async one on each of its paths (alone, auto-batched, an async send in an open batch).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from graymq.client.blocking_producer import BlockingProducer
from graymq.client.message import Message
from graymq.client.producer import Producer
from graymq.client.send_wire import SendReply
from graymq.core.route import BrokerData, TopicRoute
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import ConnectionClosedError
from tests.support.offline_producer import run_offline
from tests.support.records import heartbeat_answer

pytestmark = pytest.mark.unit

ROUTE = TopicRoute("T", (BrokerData("broker-a", "127.0.0.1:1", 4, 2, replicas=2),))
FLIPPED = heartbeat_answer(role="producer", desired_gray=False, gray_marks=False)  # a promote's producer step


class LeaderLost:
    """The first attempt fails as a connection lost with the leader does (stored or not: unknown); the retry waits
    for ``elected``. Records each attempt's queue and sequence."""

    def __init__(self) -> None:
        self.attempts: list[tuple[int, int]] = []
        self.retried = asyncio.Event()
        self.elected = asyncio.Event()

    async def _attempt(self, req: Any) -> None:
        self.attempts.append((req.queue_id, req.sequence))
        if len(self.attempts) == 1:
            raise ConnectionClosedError("connection reset by peer (the leader was killed)")
        self.retried.set()
        await self.elected.wait()

    async def send(self, address: str, req: pb.SendRequest, timeout_s: float) -> pb.SendResponse:
        await self._attempt(req)
        return pb.SendResponse(msg_id=req.message.msg_id, queue_id=req.queue_id, queue_offset=7)

    async def send_batch(self, address: str, req: pb.SendBatchRequest, timeout_s: float) -> pb.SendBatchResponse:
        await self._attempt(req)
        return pb.SendBatchResponse(msg_ids=[m.msg_id for m in req.messages], queue_id=req.queue_id,
                                    first_queue_offset=7)

    async def close(self) -> None:
        pass


def reported_gray(producer: Producer | BlockingProducer) -> bool:
    return bool(producer._report()["gray"])


@pytest.mark.parametrize("auto_batch", [False, True], ids=["alone", "auto-batch"])
def test_a_gray_send_retried_across_the_flip_keeps_the_producer_reporting_gray_until_it_is_answered(auto_batch
                                                                                                     ) -> None:
    brokers = LeaderLost()
    seen: dict[str, Any] = {}

    async def body(p: Producer) -> None:
        sending = asyncio.create_task(p.send(Message("T", b"x"), timeout_s=30))
        await brokers.retried.wait()  # the first attempt is lost; the retry waits for the new leader
        await p._on_update(FLIPPED)
        seen["flag"], seen["during"] = p.gray, reported_gray(p)
        brokers.elected.set()
        seen["result"] = await sending
        seen["after"] = reported_gray(p)

    run_offline(ROUTE, brokers, body, gray=True, auto_batch=auto_batch)
    queue_id, sequence = brokers.attempts[0]
    assert brokers.attempts == [(queue_id, sequence)] * 2 and queue_id in (0, 3)  # a gray queue, retried there
    assert seen["result"].gray
    assert seen["flag"] is False and seen["during"] is True and seen["after"] is False


def test_gray_messages_in_an_open_auto_batch_keep_the_producer_reporting_gray() -> None:
    brokers = LeaderLost()
    brokers.attempts.append((-1, -1))  # no lost attempt here: the first one waits for ``elected``
    seen: dict[str, bool] = {}

    async def body(p: Producer) -> None:
        futures = [p.send_async(Message("T", b"x")) for _ in range(3)]  # one batch, open until this turn ends
        await p._on_update(FLIPPED)
        seen["open"] = reported_gray(p)
        await brokers.retried.wait()
        seen["sent"] = reported_gray(p)
        brokers.elected.set()
        assert all(r.gray for r in await asyncio.gather(*futures))
        await asyncio.sleep(0)  # the batch's task is done: its done callback runs
        seen["answered"] = reported_gray(p)

    run_offline(ROUTE, brokers, body, gray=True, auto_batch=True)
    assert seen == {"open": True, "sent": True, "answered": False}


class BlockingLeaderLost:
    """``LeaderLost`` for a ``BlockingProducer``'s sockets: the retry waits for ``elected`` in the sender's thread."""

    def __init__(self) -> None:
        self.attempts = 0
        self.retried = threading.Event()
        self.elected = threading.Event()

    def send_message(self, address: str, envelope: bytes, timeout_s: float) -> SendReply:
        self.attempts += 1
        if self.attempts == 1:
            raise ConnectionClosedError("connection reset by peer (the leader was killed)")
        self.retried.set()
        assert self.elected.wait(30)
        return 0, "MSG", 7, 700

    def close(self) -> None:
        pass


class OneRoute:
    """The route cache of a ``BlockingProducer`` that knows ``ROUTE`` and never asks its loop for it."""

    def fresh(self, topic: str) -> TopicRoute:
        return ROUTE

    cached = fresh

    def invalidate(self, topic: str) -> None:
        pass

    def topics(self) -> list[str]:
        return ["T"]


def test_a_blocking_producers_gray_send_keeps_it_reporting_gray_across_the_flip() -> None:
    p = BlockingProducer("P", "http://127.0.0.1:1", gray=True)
    brokers = p.brokers = BlockingLeaderLost()  # type: ignore[assignment]
    p.routes = OneRoute()  # type: ignore[assignment]
    p.started = True
    results: list[Any] = []
    sender = threading.Thread(target=lambda: results.append(p.send(Message("T", b"x"), timeout_s=30)))
    sender.start()
    assert brokers.retried.wait(30)
    asyncio.run(p._on_update(FLIPPED))
    during = reported_gray(p)
    brokers.elected.set()
    sender.join(30)
    assert not p.gray and during and results[0].gray and not reported_gray(p)
