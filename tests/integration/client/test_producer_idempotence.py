"""Producer retries on real processes: a send the broker stored but whose answer the producer never got is retried
to the same queue under the same sequence, answered with the first result, and stored exactly once.

The answer is lost by the test: the first attempt's request reaches the broker, which stores it and answers, and
the attempt then fails as a timed-out one does (a 1 µs timeout raced the answer: a request now leaves at once,
and a fast broker could answer before the deadline's timer ran)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from graymq.client import Message, PullConsumer
from graymq.client.message import MessageQueue
from graymq.client.producer import Producer
from graymq.protocol.errors import RequestTimeoutError
from tests.support.clients import run_scenario
from tests.support.cluster import Cluster, one_broker_cluster

pytestmark = pytest.mark.integration
TOPIC = "TOPIC_IDEM"


@pytest.fixture(scope="module")
def shared(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with one_broker_cluster(pg_url, tmp_path_factory.mktemp("idempotence"), TOPIC, 4, 0) as cluster:
        yield cluster


class LoseFirstAnswer:
    """The answer to the producer's first request (send or batch) is lost after the broker stored it; every attempt
    and the answers the producer got are recorded."""

    def __init__(self, producer: Producer) -> None:
        self.attempts: list[tuple[str, int, int, int]] = []  # address, queue id, producer id, sequence
        self.answers: list[Any] = []
        brokers = producer.brokers
        for name in ("send", "send_batch"):
            setattr(brokers, name, self._spy(getattr(brokers, name)))

    def _spy(self, call: Any) -> Any:
        async def spy(address: str, req: Any, timeout_s: float | None = None) -> Any:
            self.attempts.append((address, req.queue_id, req.producer_id, req.sequence))
            answer = await call(address, req, timeout_s)
            if len(self.attempts) == 1:
                raise RequestTimeoutError(f"the answer of {address} was lost (test)")
            self.answers.append(answer)
            return answer

        return spy


async def stored_ids(ns_url: str, queue: MessageQueue) -> list[str]:
    reader = PullConsumer("GID_IDEM_READER", ns_url, register=False)
    try:
        pulled = await reader.pull(queue, 0, max_nums=100)
        return [m.msg_id for m in pulled.messages]
    finally:
        await reader.stop()


def with_lost_answer(ns_url: str, send: Any, **kw: Any) -> tuple[list[Any], LoseFirstAnswer, list[str]]:
    out: dict[str, Any] = {}

    async def scenario() -> None:
        producer = Producer("P_IDEM", ns_url, **kw)
        await producer.start()
        spy = LoseFirstAnswer(producer)
        try:
            results = await send(producer)
            out.update(results=results, spy=spy, stored=await stored_ids(ns_url, results[0].queue))
        finally:
            await producer.stop()

    run_scenario(scenario, 60)
    return out["results"], out["spy"], out["stored"]


def test_a_send_whose_answer_is_lost_is_stored_once_and_gets_its_first_result(shared: Cluster) -> None:
    async def send(producer: Producer) -> list[Any]:
        return [await producer.send(Message(TOPIC, b"once"))]

    (result,), spy, stored = with_lost_answer(shared.ns_url, send, auto_batch=False)
    assert len(spy.attempts) == 2 and spy.attempts[1] == spy.attempts[0]  # same broker, queue, producer, sequence
    (answer,) = spy.answers
    assert answer.duplicate and (result.queue_offset, result.commit_log_offset) == (answer.queue_offset,
                                                                                    answer.commit_log_offset)
    assert stored.count(result.msg_id) == 1
    assert stored.index(result.msg_id) == result.queue_offset


def test_an_auto_batch_whose_answer_is_lost_is_stored_once(shared: Cluster) -> None:
    async def send(producer: Producer) -> list[Any]:
        return list(await asyncio.gather(*(producer.send(Message(TOPIC, f"b{i}".encode())) for i in range(5))))

    results, spy, stored = with_lost_answer(shared.ns_url, send, auto_batch=True)
    assert len(spy.attempts) == 2 and spy.attempts[1] == spy.attempts[0]
    assert spy.answers[0].duplicate
    assert len({r.queue for r in results}) == 1
    for result in results:
        assert stored.count(result.msg_id) == 1 and stored.index(result.msg_id) == result.queue_offset
