"""A real broker process: send/pull, long polling, restart, tags, retry/DLQ, gray tables, isolation, metrics."""

from __future__ import annotations

import asyncio

import pytest

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import (
    BadRequestError,
    GrayIsolationError,
    SubscriptionNotExistError,
    TopicNotExistError,
    UnknownMethodError,
)
from graymq.protocol.record import iter_records
from tests.support.broker import create_topic, heartbeat, message, pull_request, run, send
from tests.support.metrics import scrape

pytestmark = pytest.mark.integration


@pytest.fixture
def start_broker(graymq_process, tmp_path):
    def start(name: str = "broker-a", *extra: str, store=None, env=None):
        store = store or tmp_path / name
        return graymq_process("broker", "--name", name, "--port", "0", "--store", str(store), "--metrics-port", "0",
                              "--segment-size", str(1 << 20), *extra, env=env)

    return start


async def pull_all(client: BrokerClient, address: str, topic: str, queue_id: int, group: str = "g") -> list:
    out, offset = [], 0
    while True:
        request = pull_request(group, "c", topic, queue_id, offset, max_nums=500, expression="*")
        resp = await client.pull(address, request)
        out.extend(iter_records(resp.records))
        if resp.status != pb.FOUND and resp.next_begin_offset == offset:
            return out
        offset = resp.next_begin_offset


def test_ten_thousand_messages_round_trip(start_broker):
    broker = start_broker()

    async def scenario(client: BrokerClient):
        await create_topic(client, broker.address, "T", 4)
        sent = []
        for batch in range(100):
            msgs = [message("T", f"{batch}-{i}".encode(), tags="a") for i in range(100)]
            resp = await client.send_batch(broker.address, pb.SendBatchRequest(
                producer_group="pg", topic="T", queue_id=batch % 4, messages=msgs))
            assert resp.status == pb.SEND_OK and len(resp.msg_ids) == 100
            sent.extend(m.body for m in msgs)
        got = []
        for q in range(4):
            records = await pull_all(client, broker.address, "T", q)
            assert [m.queue_offset for m in records] == list(range(len(records)))
            got.extend(m.body for m in records)
        assert sorted(got) == sorted(sent) and len(got) == 10_000

    run(scenario)


def test_long_poll_is_woken_by_a_send(start_broker):
    broker = start_broker()

    async def scenario(client: BrokerClient):
        await create_topic(client, broker.address, "LP", 1)
        req = pull_request("g", "c", "LP", 0, suspend_ms=30_000, expression="*")
        pending = asyncio.ensure_future(client.pull(broker.address, req))
        await asyncio.sleep(0.3)
        assert not pending.done()
        await send(client, broker.address, "LP", 0, b"wake")
        resp = await asyncio.wait_for(pending, 25)
        assert resp.status == pb.FOUND  # a timed-out long poll would answer NO_NEW_MSG
        assert [m.body for m in iter_records(resp.records)] == [b"wake"]

    run(scenario)


def test_offsets_and_topics_survive_restart(start_broker, tmp_path):
    store = tmp_path / "restart"
    broker = start_broker("b", store=store)

    async def first(client: BrokerClient):
        await create_topic(client, broker.address, "R", 2, 0)
        for i in range(10):
            await send(client, broker.address, "R", i % 2, str(i).encode())
        await client.update_offset(broker.address, "g", "R", 1, 3)

    run(first)
    assert broker.terminate() == 0
    broker = start_broker("b", store=store)

    async def second(client: BrokerClient):
        assert (await client.call(broker.address, pb.GET_TOPIC, pb.GetTopicRequest(topic="R"),
                                  pb.TopicConfig)).queue_nums == 2
        assert await client.query_offset(broker.address, "g", "R", 1) == 3
        assert await client.max_offset(broker.address, "R", 0) == 5
        assert len(await pull_all(client, broker.address, "R", 1)) == 5

    run(second)


def test_tag_filtering_skips_but_advances(start_broker):
    broker = start_broker()

    async def scenario(client: BrokerClient):
        await create_topic(client, broker.address, "TAGS", 1)
        for i, tag in enumerate(["a", "b", "a", "c", "b"]):
            await send(client, broker.address, "TAGS", 0, str(i).encode(), tags=tag)
        resp = await client.pull(broker.address, pull_request("g", "c", "TAGS", 0, expression="b || c"))
        assert [m.body for m in iter_records(resp.records)] == [b"1", b"3", b"4"]
        assert resp.next_begin_offset == 5
        resp = await client.pull(broker.address, pull_request("g", "c", "TAGS", 0, 4, expression="a"))
        assert resp.status == pb.NO_MATCHED_MSG and resp.next_begin_offset == 5

    run(scenario)


def test_send_back_retries_then_dead_letters(start_broker):
    broker = start_broker("b", env={"GRAYMQ_BROKER_DELAY_LEVELS_S": "0.05,0.05,0.05,0.05"})

    async def scenario(client: BrokerClient):
        await create_topic(client, broker.address, "RT", 1)
        await heartbeat(client, broker.address, "c1", "G", {"RT": "*"}, gray=False, switch=False)
        sent = await send(client, broker.address, "RT", 0, b"poison", msg_id="M1")
        offset, topic = sent.commit_log_offset, "RT"
        retry_offsets = {}
        for attempt in range(1, 3):
            await client.send_back(broker.address, pb.SendBackRequest(
                consumer_group="G", commit_log_offset=offset, max_reconsume_times=2, origin_topic="RT"))
            found = None
            for _ in range(200):  # poll with a deadline until the delayed message lands in a retry queue
                for q in range(4):
                    resp = await client.pull(broker.address, pull_request(
                        "G", "c1", "%RETRY%G", q, retry_offsets.get(q, 0), expression="*"))
                    records = list(iter_records(resp.records))
                    if records:
                        retry_offsets[q] = resp.next_begin_offset
                        found = records[0]
                if found:
                    break
                await asyncio.sleep(0.05)
            assert found is not None and found.msg_id == "M1" and found.reconsume_times == attempt
            assert found.properties["RETRY_TOPIC"] == topic
            offset = found.commit_log_offset
        await client.send_back(broker.address, pb.SendBackRequest(
            consumer_group="G", commit_log_offset=offset, max_reconsume_times=2, origin_topic="RT"))
        dlq = await pull_all(client, broker.address, "%DLQ%G", 0, "G")
        assert [m.msg_id for m in dlq] == ["M1"] and dlq[0].body == b"poison"

    run(scenario)


def test_gray_and_normal_subscription_tables_filter_each_side(start_broker):
    broker = start_broker()
    pushes: list[str] = []

    async def scenario(client: BrokerClient):
        address = broker.address
        await create_topic(client, address, "TOPIC_A", 6, 2)
        await create_topic(client, address, "TOPIC_B", 6, 2)
        await heartbeat(client, address, "v1", "G", {"TOPIC_A": "v1"}, gray=False)
        await heartbeat(client, address, "v2", "G", {"TOPIC_A": "v2", "TOPIC_B": "v2"}, gray=True)
        listing = await client.consumer_list(address, "G")
        assert {(c.client_id, c.gray_flag, tuple(c.topics)) for c in listing.clients} == {
            ("v1", False, ("TOPIC_A",)), ("v2", True, ("TOPIC_A", "TOPIC_B"))}
        assert {(s.topic, s.sub_string) for s in listing.subscriptions} == {("TOPIC_A", "v1")}
        assert {(s.topic, s.sub_string) for s in listing.gray_subscriptions} == {("TOPIC_A", "v2"),
                                                                                  ("TOPIC_B", "v2")}
        for q, tag in [(0, "v2"), (0, "v1"), (2, "v1"), (2, "v2")]:
            await send(client, address, "TOPIC_A", q, f"{q}{tag}".encode(), tags=tag)
        gray_pull = await client.pull(address, pull_request("G", "v2", "TOPIC_A", 0, gray=True))
        assert [m.body for m in iter_records(gray_pull.records)] == [b"0v2"]
        normal_pull = await client.pull(address, pull_request("G", "v1", "TOPIC_A", 2))
        assert [m.body for m in iter_records(normal_pull.records)] == [b"2v1"]
        with pytest.raises(GrayIsolationError):
            await client.pull(address, pull_request("G", "v1", "TOPIC_A", 0))
        with pytest.raises(GrayIsolationError):
            await client.pull(address, pull_request("G", "v2", "TOPIC_A", 2, gray=True))
        adopted = await client.pull(address, pull_request("G", "v1", "TOPIC_A", 0, adopted=True))
        assert [m.body for m in iter_records(adopted.records)] == [b"0v1"]  # normal table: tag v1
        with pytest.raises(SubscriptionNotExistError):  # v1's table has no TOPIC_B
            await client.pull(address, pull_request("G", "v1", "TOPIC_B", 2))
        # switch off: no isolation
        await heartbeat(client, address, "v1", "G", {"TOPIC_A": "v1"}, gray=False, switch=False)
        await client.pull(address, pull_request("G", "v1", "TOPIC_A", 0))

    run(scenario, on_group_changed=pushes.append)
    assert "G" in pushes  # membership changes were pushed to the group's clients


def test_bad_requests_get_clear_errors(start_broker):
    broker = start_broker()

    async def scenario(client: BrokerClient):
        with pytest.raises(TopicNotExistError, match="NOPE"):
            await send(client, broker.address, "NOPE", 0, b"x")
        conn = await client.connection(broker.address)
        with pytest.raises(UnknownMethodError):
            await conn.request(999, pb.Empty())
        with pytest.raises(Exception, match="undecodable|BAD_REQUEST|decode"):
            await client.call(broker.address, pb.SEND_MESSAGE, _RawBody(b"\xff\xff\xff"), pb.SendResponse)
        await create_topic(client, broker.address, "OK", 1)
        assert (await send(client, broker.address, "OK", 0, b"still fine")).status == pb.SEND_OK
        # a SEND_BATCH is read from its wire bytes: a body that does not parse, or a message naming another topic,
        # is refused whole and stores nothing; the connection goes on
        with pytest.raises(BadRequestError, match="undecodable SendBatchRequest"):
            await client.call(broker.address, pb.SEND_BATCH, _RawBody(b"\x22\x05\x0a"), pb.SendBatchResponse)
        with pytest.raises(BadRequestError, match="batch for topic OK contains a message for ELSE"):
            await client.send_batch(broker.address, pb.SendBatchRequest(producer_group="pg", topic="OK", messages=[
                message("OK", b"first"), message("ELSE", b"second")]))
        assert [m.body for m in await pull_all(client, broker.address, "OK", 0)] == [b"still fine"]

    run(scenario)


class _RawBody:
    """Something that serializes to arbitrary bytes, to send an undecodable body."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def SerializeToString(self) -> bytes:  # noqa: N802 - protobuf's name
        return self.data


@pytest.mark.parametrize(("payload", "logged"), [
    (b"\x00garbage\xff" * 10, "bad frame token"),
    (b"\xff\x7f\xf4\xfe" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01" + (2**31 - 1).to_bytes(4, "big"),
     "exceeds the limit"),
    (b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "bad frame token"),
], ids=["garbage", "2GiB-length", "http"])
def test_malformed_input_closes_only_that_connection(start_broker, payload, logged):
    broker = start_broker()
    host, port = broker.address.rsplit(":", 1)

    async def scenario(client: BrokerClient):
        await create_topic(client, broker.address, "W", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(payload)
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed by the broker
        writer.close()
        for i in range(5):
            assert (await send(client, broker.address, "W", 0, str(i).encode())).status == pb.SEND_OK

    run(scenario)
    assert broker.proc.poll() is None
    assert logged in broker.wait_for_line("closing connection")


def test_metrics_endpoint_counts_puts_and_backlog(start_broker):
    broker = start_broker()

    async def scenario(client: BrokerClient):
        await create_topic(client, broker.address, "M", 6, 2)
        await send(client, broker.address, "M", 0, b"g", gray=True)
        await send(client, broker.address, "M", 1, b"n")
        await client.update_offset(broker.address, "G", "M", 1, 0)

    run(scenario)
    metrics = scrape(f"http://{broker.ready_info['metrics']}/metrics")
    assert metrics.value("graymq_broker_put_messages_total", topic="M", gray="true", lane="gray") == 1
    assert metrics.value("graymq_broker_put_messages_total", topic="M", gray="false", lane="base") == 1
    assert metrics.value("graymq_broker_consumer_backlog", group="G", topic="M", queue="1", gray="false",
                         lane="base", side="normal") == 1


def test_broker_serves_while_every_name_server_is_down(start_broker):
    broker = start_broker("lonely", "--nameserver", "http://127.0.0.1:9,http://127.0.0.1:10")

    async def scenario(client: BrokerClient):
        await create_topic(client, broker.address, "ALONE", 1)
        assert (await send(client, broker.address, "ALONE", 0, b"still here")).status == pb.SEND_OK

    run(scenario)
    assert "registering with name server http://127.0.0.1:9 failed" in broker.wait_for_line("registering")
