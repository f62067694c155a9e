"""Producer(auto_batch=True) on real processes: what leaves as one SEND_BATCH, and what every sender gets back.

Requests are observed at the producer's BrokerClient (which call, which queue, how many messages) and
checked against the broker: offsets are read back with a PullConsumer, so a result pointing at the
wrong message fails the test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from graymq.client import Message, PullConsumer, SendResult
from graymq.client.producer import Producer
from graymq.protocol.errors import BadRequestError, GrayMQError
from tests.support.clients import run_scenario
from tests.support.cluster import Cluster, one_broker_cluster

pytestmark = pytest.mark.integration
TOPIC = "TOPIC_AB"
GRAY_QUEUES = {0, 5}  # 6 queues, 2 gray


@pytest.fixture(scope="module")
def shared(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One name server and one broker for the module's tests (each test sends to TOPIC_AB on its own)."""
    with one_broker_cluster(pg_url, tmp_path_factory.mktemp("auto_batch"), TOPIC, 6, 2) as cluster:
        yield cluster


class Requests:
    """Spy on a producer's broker calls: ``(kind, broker address, queue id, messages)`` per request; each batch
    is held ``batch_delay_s`` before it goes out (a slow broker)."""

    def __init__(self, producer: Producer, batch_delay_s: float = 0.0) -> None:
        self.calls: list[tuple[str, str, int, int]] = []
        brokers = producer.brokers
        send, send_batch = brokers.send, brokers.send_batch

        async def spy_send(address: str, req: Any, timeout_s: float | None = None) -> Any:
            self.calls.append(("send", address, req.queue_id, 1))
            return await send(address, req, timeout_s)

        async def spy_send_batch(address: str, req: Any, timeout_s: float | None = None) -> Any:
            self.calls.append(("batch", address, req.queue_id, len(req.messages)))
            if batch_delay_s:
                await asyncio.sleep(batch_delay_s)
            return await send_batch(address, req, timeout_s)

        brokers.send = spy_send  # type: ignore[method-assign]
        brokers.send_batch = spy_send_batch  # type: ignore[method-assign]

    def kinds(self) -> list[tuple[str, int]]:
        return [(kind, n) for kind, _, _, n in self.calls]


async def stored_bodies(ns_url: str, results: list[SendResult]) -> list[bytes]:
    """The body the broker holds at each result's (queue, offset)."""
    readers = {gray: PullConsumer("GID_AB_READER", ns_url, gray=gray, register=False) for gray in (False, True)}
    try:
        bodies = []
        for r in results:
            pulled = await readers[r.gray].pull(r.queue, r.queue_offset, max_nums=1)
            assert pulled.messages, f"nothing stored at {r.queue} offset {r.queue_offset}"
            message = pulled.messages[0]
            assert message.msg_id == r.msg_id and message.gray == r.gray
            bodies.append(message.body)
        return bodies
    finally:
        for reader in readers.values():
            await reader.stop()


def with_producer(ns_url: str, body: Callable[[Producer, Requests], Any], **kw: Any) -> None:
    async def scenario() -> None:
        producer = Producer("P_AB", ns_url, auto_batch=True, **kw)
        await producer.start()
        requests = Requests(producer)
        try:
            await body(producer, requests)
        finally:
            await producer.stop()

    run_scenario(scenario, 60)


def bodies(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i:03d}".encode() for i in range(n)]


def test_sends_of_one_loop_turn_leave_as_one_batch_and_each_gets_its_own_offset(shared: Cluster) -> None:
    async def body(producer: Producer, requests: Requests) -> None:
        sent = bodies("turn", 10)
        results = await asyncio.gather(*(producer.send(Message(TOPIC, b)) for b in sent))
        assert requests.kinds() == [("batch", 10)]
        assert len({r.queue for r in results}) == 1 and results[0].queue.queue_id not in GRAY_QUEUES
        first = results[0].queue_offset
        assert [r.queue_offset for r in results] == list(range(first, first + 10))
        assert len({r.msg_id for r in results}) == 10
        assert await stored_bodies(shared.ns_url, results) == sent

    with_producer(shared.ns_url, body)


def test_a_lone_send_is_a_plain_send(shared: Cluster) -> None:
    async def body(producer: Producer, requests: Requests) -> None:
        first = await producer.send(Message(TOPIC, b"alone-1"))
        second = await producer.send(Message(TOPIC, b"alone-2"))  # awaited one after the other: never together
        assert requests.kinds() == [("send", 1), ("send", 1)]
        assert first.commit_log_offset >= 0 and second.commit_log_offset > first.commit_log_offset
        assert await stored_bodies(shared.ns_url, [first, second]) == [b"alone-1", b"alone-2"]

    with_producer(shared.ns_url, body)


def test_gray_and_normal_sends_of_one_turn_batch_apart_each_on_its_side(shared: Cluster) -> None:
    async def body(producer: Producer, requests: Requests) -> None:
        messages = [Message(TOPIC, f"{'g' if i % 2 else 'n'}-{i}".encode(), gray=bool(i % 2)) for i in range(16)]
        results = await asyncio.gather(*(producer.send(m) for m in messages))
        assert sorted(requests.kinds()) == [("batch", 8), ("batch", 8)]
        for message, result in zip(messages, results, strict=True):
            assert result.gray == message.gray
            assert (result.queue.queue_id in GRAY_QUEUES) == message.gray
        assert await stored_bodies(shared.ns_url, results) == [m.body for m in messages]

    with_producer(shared.ns_url, body)


def test_a_sharding_key_keeps_its_queue_and_order_across_batches(shared: Cluster) -> None:
    async def body(producer: Producer, requests: Requests) -> None:
        results: dict[str, list[SendResult]] = {"k1": [], "k2": []}
        for turn in range(3):
            keys = ["k1", "k2"] * 4
            sent = await asyncio.gather(*(producer.send(Message(TOPIC, f"{k}-{turn}-{i}".encode(), sharding_key=k))
                                          for i, k in enumerate(keys)))
            for key, result in zip(keys, sent, strict=True):
                results[key].append(result)
        assert requests.kinds() == [("batch", 4)] * 6  # one batch per key per turn
        for key_results in results.values():
            assert len({r.queue for r in key_results}) == 1
            offsets = [r.queue_offset for r in key_results]
            assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
        k1 = await stored_bodies(shared.ns_url, results["k1"])
        assert k1 == [f"k1-{turn}-{i}".encode() for turn in range(3) for i in range(0, 8, 2)]

    with_producer(shared.ns_url, body)


def test_batch_max_messages_splits_a_turn(shared: Cluster) -> None:
    async def body(producer: Producer, requests: Requests) -> None:
        sent = bodies("count", 10)
        results = await asyncio.gather(*(producer.send(Message(TOPIC, b)) for b in sent))
        assert sorted(requests.kinds()) == [("batch", 2), ("batch", 4), ("batch", 4)]  # in any order
        assert await stored_bodies(shared.ns_url, results) == sent

    with_producer(shared.ns_url, body, batch_max_messages=4)


def test_batch_max_bytes_splits_a_turn_and_a_lone_rest_is_a_plain_send(shared: Cluster) -> None:
    async def body(producer: Producer, requests: Requests) -> None:
        sent = [bytes([65 + i]) * 1024 for i in range(7)]
        results = await asyncio.gather(*(producer.send(Message(TOPIC, b)) for b in sent))
        assert sorted(requests.kinds()) == [("batch", 3), ("batch", 3), ("send", 1)]
        assert await stored_bodies(shared.ns_url, results) == sent

    with_producer(shared.ns_url, body, batch_max_bytes=3000)


def test_a_batch_refused_as_a_whole_is_resent_one_by_one_so_only_the_bad_message_fails(shared: Cluster) -> None:
    async def body(producer: Producer, requests: Requests) -> None:
        messages = [Message(TOPIC, f"ok-{i}".encode()) for i in range(5)]
        messages[2] = Message(TOPIC, b"bad", properties={"note": "a\x01b"})  # a reserved separator: refused
        outcomes = await asyncio.gather(*(producer.send(m) for m in messages), return_exceptions=True)
        assert requests.kinds() == [("batch", 5)] + [("send", 1)] * 5
        assert isinstance(outcomes[2], BadRequestError) and "separator" in outcomes[2].message
        good = [o for i, o in enumerate(outcomes) if i != 2]
        assert all(isinstance(o, SendResult) for o in good)
        assert await stored_bodies(shared.ns_url, good) == [m.body for i, m in enumerate(messages) if i != 2]

    with_producer(shared.ns_url, body)


def test_stop_sends_the_open_batches_before_closing(shared: Cluster) -> None:
    async def scenario() -> None:
        producer = Producer("P_AB", shared.ns_url, auto_batch=True)
        await producer.start()
        requests = Requests(producer, batch_delay_s=0.5)  # still in flight when stop() would close the connection
        sent = bodies("stop", 5)
        futures = [producer.send_async(Message(TOPIC, b)) for b in sent]
        await producer.stop()  # the batch is still open: stop must send it, not drop it
        assert all(f.done() for f in futures)
        assert requests.kinds() == [("batch", 5)]
        assert await stored_bodies(shared.ns_url, [f.result() for f in futures]) == sent

    run_scenario(scenario, 60)


def test_batches_move_to_the_live_broker_and_fail_clearly_when_none_is_left(cluster: Cluster) -> None:
    for name in ("broker-a", "broker-b"):
        cluster.add_broker(name)
    cluster.create_topic(TOPIC, 6, 2)

    async def body(producer: Producer, requests: Requests) -> None:
        before = [await asyncio.gather(*(producer.send(Message(TOPIC, b)) for b in bodies("x", 4))) for _ in range(8)]
        assert {r.queue.broker_name for batch in before for r in batch} == {"broker-a", "broker-b"}
        cluster.brokers["broker-a"].kill()
        after = [await asyncio.gather(*(producer.send(Message(TOPIC, b)) for b in bodies("y", 4))) for _ in range(8)]
        assert {r.queue.broker_name for batch in after for r in batch} == {"broker-b"}
        cluster.brokers["broker-b"].kill()
        outcomes = await asyncio.gather(*(producer.send(Message(TOPIC, b)) for b in bodies("z", 4)),
                                        return_exceptions=True)
        assert all(isinstance(o, GrayMQError) and o.retriable for o in outcomes), outcomes
        assert requests.kinds()[-1] == ("batch", 4)  # the last try was still one batch, not one by one

    with_producer(cluster.ns_url, body, retry_times=2, send_timeout_s=5.0)


def test_the_others_of_a_batch_still_leave_when_the_send_that_opened_it_is_cancelled(shared: Cluster) -> None:
    async def body(producer: Producer, requests: Requests) -> None:
        first = asyncio.ensure_future(producer.send(Message(TOPIC, b"opener")))

        async def cancel_first_then_send(body: bytes) -> SendResult:
            first.cancel()  # the opener is waiting for the end of the turn, the others have joined
            return await producer.send(Message(TOPIC, body))

        sent = bodies("joined", 4)
        others = [asyncio.ensure_future(producer.send(Message(TOPIC, b))) for b in sent[:3]]
        others.append(asyncio.ensure_future(cancel_first_then_send(sent[3])))
        results = await asyncio.gather(*others)
        assert first.cancelled()
        assert requests.kinds() == [("batch", 5)]  # the opener's message had joined: it leaves with them
        assert await stored_bodies(shared.ns_url, results) == sent

    with_producer(shared.ns_url, body)


def _route_lookups(ns_url: str) -> int:
    """How many route lookups the name server has answered (its request counters: one topic's, or several's)."""
    import httpx

    text = httpx.get(f"{ns_url}/metrics", timeout=10).text
    prefixes = ['graymq_nameserver_http_requests_total{method="GET",route="/v1/topics/{topic}/route",status="200"} ',
                'graymq_nameserver_http_requests_total{method="POST",route="/v1/topic-routes",status="200"} ']
    return sum(int(float(line[len(prefix):])) for line in text.splitlines() for prefix in prefixes
               if line.startswith(prefix))


def test_concurrent_first_sends_share_one_route_lookup(shared: Cluster) -> None:
    """32 sends starting together with no route cached (each alone: a timeout opts out of batching) wait for
    one name-server lookup, not 32; every send still lands."""

    async def scenario() -> None:
        producer = Producer("g_route_once", shared.ns_url)
        await producer.start()
        try:
            before = _route_lookups(shared.ns_url)
            results = await asyncio.gather(*(producer.send(Message(TOPIC, b"r%d" % i), timeout_s=10)
                                             for i in range(32)))
            assert _route_lookups(shared.ns_url) - before == 1
            assert len({r.msg_id for r in results}) == 32
        finally:
            await producer.stop()

    run_scenario(scenario)
