"""Where a producer's retry goes: an attempt that may have been stored is repeated to the same broker and queue
under the same sequence; one that certainly was not goes to another broker under that queue's own sequence."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from graymq.client.message import Message
from graymq.client.producer import Producer
from graymq.core.route import BrokerData, TopicRoute
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import (
    ConnectFailedError,
    ConnectionClosedError,
    FlushTimeoutError,
    GrayMQError,
    RequestTimeoutError,
    SystemBusyError,
)
from tests.support.offline_producer import run_offline

pytestmark = pytest.mark.unit

ROUTE = TopicRoute("T", (BrokerData("broker-a", "127.0.0.1:1", 4, 0), BrokerData("broker-b", "127.0.0.1:2", 4, 0)))


class FakeBrokers:
    """Fails the first attempts with ``errors`` and records every attempt's (address, queue, producer, sequence)."""

    def __init__(self, *errors: GrayMQError) -> None:
        self.errors = list(errors)
        self.attempts: list[tuple[str, int, int, int]] = []

    def _attempt(self, address: str, req: Any) -> None:
        self.attempts.append((address, req.queue_id, req.producer_id, req.sequence))
        if self.errors:
            raise self.errors.pop(0)

    async def send(self, address: str, req: pb.SendRequest, timeout_s: float) -> pb.SendResponse:
        self._attempt(address, req)
        return pb.SendResponse(msg_id=req.message.msg_id, queue_id=req.queue_id, queue_offset=7)

    async def send_batch(self, address: str, req: pb.SendBatchRequest, timeout_s: float) -> pb.SendBatchResponse:
        self._attempt(address, req)
        return pb.SendBatchResponse(msg_ids=[m.msg_id for m in req.messages], queue_id=req.queue_id,
                                    first_queue_offset=7)

    async def close(self) -> None:
        pass


def scenario(brokers: FakeBrokers, body: Any, *, auto_batch: bool = False, retry_times: int = 2) -> Producer:
    return run_offline(ROUTE, brokers, body, retry_times=retry_times, auto_batch=auto_batch)


async def send_one(p: Producer) -> None:
    await p.send(Message("T", b"x"), timeout_s=5.0)


@pytest.mark.parametrize("error", [
    RequestTimeoutError("no response"), ConnectionClosedError("connection lost"), FlushTimeoutError("flush"),
], ids=["timeout", "connection-lost", "flush-timeout"])
def test_an_attempt_that_may_have_been_stored_is_retried_to_the_same_queue_under_the_same_sequence(error) -> None:
    brokers = FakeBrokers(error)
    p = scenario(brokers, send_one)
    assert len(brokers.attempts) == 2
    assert brokers.attempts[1] == brokers.attempts[0]
    assert brokers.attempts[0][2] == p.producer_id != 0


@pytest.mark.parametrize("error", [ConnectFailedError("refused"), SystemBusyError("busy")],
                         ids=["connect-refused", "broker-refusal"])
def test_an_attempt_that_stored_nothing_goes_to_another_broker_under_that_queues_sequence(error) -> None:
    brokers = FakeBrokers(error)
    scenario(brokers, send_one)
    (first_address, _, producer_id, first_sequence), (address, _, same_producer, sequence) = brokers.attempts
    assert address != first_address and same_producer == producer_id
    assert (first_sequence, sequence) == (0, 0)  # each queue numbers its own requests


def test_a_retry_whose_connection_is_refused_moves_on_to_another_broker() -> None:
    """A timeout keeps the queue; when the retry then finds the broker gone, the request moves."""
    brokers = FakeBrokers(RequestTimeoutError("no response"), ConnectFailedError("refused"))
    scenario(brokers, send_one)
    first, second, third = brokers.attempts
    assert second == first and third[0] != first[0]


def test_sequences_count_up_per_queue() -> None:
    brokers = FakeBrokers()

    async def body(p: Producer) -> None:
        for _ in range(16):  # round robin over 8 queues: twice each
            await send_one(p)

    scenario(brokers, body)
    per_queue: dict[tuple[str, int], list[int]] = {}
    for address, queue_id, _, sequence in brokers.attempts:
        per_queue.setdefault((address, queue_id), []).append(sequence)
    assert len(per_queue) == 8 and all(sequences == [0, 1] for sequences in per_queue.values())


def test_an_auto_batch_whose_answer_is_lost_is_retried_to_the_same_queue_under_the_same_sequence() -> None:
    brokers = FakeBrokers(RequestTimeoutError("no response"))
    results = []

    async def body(p: Producer) -> None:
        futures = [p.send_async(Message("T", f"m{i}".encode())) for i in range(3)]  # one loop turn: one batch
        results.extend(await asyncio.gather(*futures))

    scenario(brokers, body, auto_batch=True)
    assert len(brokers.attempts) == 2 and brokers.attempts[1] == brokers.attempts[0]
    assert [r.queue_offset for r in results] == [7, 8, 9]


def test_unknown_outcomes_still_count_against_retry_times() -> None:
    brokers = FakeBrokers(*(RequestTimeoutError("no response") for _ in range(5)))
    with pytest.raises(RequestTimeoutError):
        scenario(brokers, send_one, retry_times=1)
    assert len(brokers.attempts) == 2
