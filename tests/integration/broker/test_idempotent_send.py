"""A real broker process and idempotent sends: a request repeated with its producer id and sequence is stored once
and answered with its first result, also after kill -9 and a restart; requests without a producer id are stored
every time, as before. The repeat and the restart are checked on the compiled hot path and on the pure one (a broker
started with ``GRAYMQ_PURE=1``)."""

from __future__ import annotations

import pytest

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import BadRequestError
from graymq.protocol.record import iter_records
from tests.support.broker import create_topic, message, pull_request, run
from tests.support.hot_path import HOT_PATHS, assert_runs, path_env

pytestmark = pytest.mark.integration
PID = 0x5EED_0000_0000_0001


@pytest.fixture
def start_broker(graymq_process, tmp_path):
    def start(*extra: str, hot_path: str = "compiled"):
        broker = graymq_process("broker", "--name", "idem", "--port", "0", "--store", str(tmp_path / "store"),
                                "--segment-size", str(1 << 20), *extra, env=path_env(hot_path))
        assert_runs(broker, hot_path)
        return broker

    return start


async def stored_ids(client: BrokerClient, address: str, topic: str, queue_id: int) -> list[str]:
    ids, offset = [], 0
    while True:
        resp = await client.pull(address, pull_request("g", "c", topic, queue_id, offset, max_nums=500,
                                                       expression="*"))
        ids.extend(m.msg_id for m in iter_records(resp.records))
        if resp.next_begin_offset == offset:
            return ids
        offset = resp.next_begin_offset


def single(queue_id: int, sequence: int, msg_id: str, producer_id: int = PID) -> pb.SendRequest:
    return pb.SendRequest(producer_group="pg", queue_id=queue_id, producer_id=producer_id, sequence=sequence,
                          message=message("T", msg_id.encode(), msg_id=msg_id))


def batch(queue_id: int, sequence: int, prefix: str, n: int = 3) -> pb.SendBatchRequest:
    return pb.SendBatchRequest(producer_group="pg", topic="T", queue_id=queue_id, producer_id=PID, sequence=sequence,
                               messages=[message("T", b"b", msg_id=f"{prefix}{i}") for i in range(n)])


def first_result(resp: pb.SendResponse) -> tuple[int, int, str]:
    return resp.queue_offset, resp.commit_log_offset, resp.msg_id


@pytest.mark.parametrize("hot_path", HOT_PATHS)
@pytest.mark.parametrize("flush", ["async", "sync"])
def test_a_repeated_request_is_stored_once_and_answered_with_its_first_result(start_broker, flush, hot_path):
    broker = start_broker("--flush", flush, hot_path=hot_path)

    async def scenario(client: BrokerClient) -> None:
        address = broker.address
        await create_topic(client, address, "T", 2)
        await client.send(address, single(0, 0, "BEFORE"))
        first = await client.send(address, single(0, 1, "ONE"))
        again = await client.send(address, single(0, 1, "ONE"))
        assert not first.duplicate and again.duplicate and again.status == pb.SEND_OK
        assert first_result(again) == first_result(first) == (1, first.commit_log_offset, "ONE")
        first_batch = await client.send_batch(address, batch(1, 0, "B"))
        batch_again = await client.send_batch(address, batch(1, 0, "B"))
        assert batch_again.duplicate and batch_again.first_queue_offset == first_batch.first_queue_offset == 0
        assert list(batch_again.msg_ids) == list(first_batch.msg_ids) == ["B0", "B1", "B2"]
        after = await client.send(address, single(0, 2, "TWO"))  # the next sequence is stored as usual
        assert not after.duplicate and after.queue_offset == 2
        assert await stored_ids(client, address, "T", 0) == ["BEFORE", "ONE", "TWO"]
        assert await stored_ids(client, address, "T", 1) == ["B0", "B1", "B2"]

    run(scenario)


def test_requests_without_a_producer_id_are_stored_every_time(start_broker):
    broker = start_broker()

    async def scenario(client: BrokerClient) -> None:
        await create_topic(client, broker.address, "T", 1)
        for _ in range(2):
            resp = await client.send(broker.address, single(0, 0, "OLD", producer_id=0))
            assert not resp.duplicate
        assert await stored_ids(client, broker.address, "T", 0) == ["OLD", "OLD"]

    run(scenario)


def test_a_sequence_older_than_the_broker_keeps_is_a_duplicate_without_offsets(start_broker):
    broker = start_broker()

    async def scenario(client: BrokerClient) -> None:
        await create_topic(client, broker.address, "T", 1)
        for sequence in range(8):
            await client.send(broker.address, single(0, sequence, f"M{sequence}"))
        old = await client.send(broker.address, single(0, 0, "M0"))
        assert old.duplicate and old.status == pb.SEND_OK and (old.queue_offset, old.commit_log_offset) == (-1, -1)
        assert len(await stored_ids(client, broker.address, "T", 0)) == 8

    run(scenario)


def test_a_sequence_reused_for_another_request_is_refused(start_broker):
    broker = start_broker()

    async def scenario(client: BrokerClient) -> None:
        await create_topic(client, broker.address, "T", 1)
        await client.send(broker.address, single(0, 0, "FIRST"))
        with pytest.raises(BadRequestError, match="was used by another request"):
            await client.send(broker.address, single(0, 0, "OTHER"))
        with pytest.raises(BadRequestError, match="negative"):
            await client.send(broker.address, single(0, -1, "NEG"))
        assert await stored_ids(client, broker.address, "T", 0) == ["FIRST"]

    run(scenario)


@pytest.mark.parametrize("hot_path", HOT_PATHS)
def test_after_kill_9_and_a_restart_a_repeated_request_is_answered_from_the_rebuilt_table(start_broker, hot_path):
    broker = start_broker(hot_path=hot_path)
    first: dict[str, object] = {}

    async def before(client: BrokerClient) -> None:
        await create_topic(client, broker.address, "T", 2)
        first["single"] = first_result(await client.send(broker.address, single(0, 0, "ONE")))
        first["batch"] = (await client.send_batch(broker.address, batch(1, 0, "B"))).first_queue_offset

    run(before)
    broker.proc.kill()  # SIGKILL after the acks: no clean stop
    broker.kill()
    broker = start_broker(hot_path=hot_path)
    broker.wait_for_line("producer table rebuilt")

    async def after(client: BrokerClient) -> None:
        again = await client.send(broker.address, single(0, 0, "ONE"))
        assert again.duplicate and first_result(again) == first["single"]
        batch_again = await client.send_batch(broker.address, batch(1, 0, "B"))
        assert batch_again.duplicate and batch_again.first_queue_offset == first["batch"]
        assert await stored_ids(client, broker.address, "T", 0) == ["ONE"]
        assert await stored_ids(client, broker.address, "T", 1) == ["B0", "B1", "B2"]

    run(after)
