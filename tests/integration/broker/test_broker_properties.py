"""A real broker bounds a producer's message properties and keeps its own reserved names to itself, on
SEND_MESSAGE and SEND_BATCH, compiled and pure hot path alike: a refusal names the property and the limit, a batch
with one bad message stores nothing, a reserved name is refused or stripped."""

from __future__ import annotations

import asyncio

import pytest

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import BadRequestError
from graymq.protocol.record import MessageExt, iter_records
from tests.support.broker import create_topic, heartbeat, message, pull_request, run, send
from tests.support.hot_path import HOT_PATHS, assert_runs, path_env

pytestmark = pytest.mark.integration


async def stored(client: BrokerClient, address: str, topic: str) -> list[MessageExt]:
    resp = await client.pull(address, pull_request("g", "c", topic, 0, 0, max_nums=100, expression="*"))
    return list(iter_records(resp.records))


def with_properties(topic: str, body: bytes, properties: dict[str, str], keys: tuple[str, ...] = ()) -> pb.Message:
    msg = message(topic, body, keys=keys)
    msg.properties.update(properties)
    return msg


@pytest.mark.parametrize("hot_path", HOT_PATHS)
def test_properties_over_a_limit_are_refused_naming_it_and_a_batch_with_one_stores_nothing(
        graymq_process, tmp_path, hot_path):
    broker = graymq_process("broker", "--name", "broker-a", "--port", "0", "--store", str(tmp_path / "b"),
                            env={**path_env(hot_path), "GRAYMQ_BROKER_MAX_PROPERTY_VALUE_SIZE": "2048"})
    assert_runs(broker, hot_path)
    huge = {f"p{i}": "v" * 1024 for i in range(3 * 1024)}  # 3 MiB of properties, the body 1 byte

    async def scenario(client: BrokerClient) -> None:
        address = broker.address
        await create_topic(client, address, "P", 1)
        refused = {
            "3072 properties, more than the 128 allowed": with_properties("P", b"x", huge),
            "40[0-9]{3} bytes, more than the 32768 allowed": with_properties(
                "P", b"x", {f"p{i}": "v" * 2000 for i in range(20)}),
            "message key of 1048576 bytes": with_properties("P", b"x", {}, keys=("k" * (1 << 20),)),
            "name of 2000 bytes": with_properties("P", b"x", {"n" * 2000: "v"}),
            "'big' has a value of 3000 bytes, more than the 2048": with_properties("P", b"x", {"big": "v" * 3000}),
            "'__STARTDELIVERTIME' is reserved": with_properties("P", b"x", {"__STARTDELIVERTIME": "1"}),
            "'DELAY' is reserved": with_properties("P", b"x", {"DELAY": "3"}),
        }
        for expected, msg in refused.items():
            with pytest.raises(BadRequestError, match=expected) as error:
                await client.send(address, pb.SendRequest(producer_group="pg", queue_id=0, message=msg))
            assert "\n" not in error.value.message and len(error.value.message) < 300
            with pytest.raises(BadRequestError, match=expected):  # one bad message refuses its batch whole
                await client.send_batch(address, pb.SendBatchRequest(producer_group="pg", topic="P", messages=[
                    message("P", b"good"), msg, message("P", b"good too")]))
        assert await stored(client, address, "P") == []
        # within the limits: stored, and the names the broker owns stripped (the broker sets its own)
        ok = with_properties("P", b"ok", {"region": "eu", "RETRY_TOPIC": "ELSEWHERE", "TAGS": "spoofed",
                                          "REAL_TOPIC": "X", "PGROUP": "other", "n" * 1024: "v" * 2048})
        assert (await client.send(address, pb.SendRequest(producer_group="pg", queue_id=0, message=ok))).status \
            == pb.SEND_OK
        await client.send_batch(address, pb.SendBatchRequest(producer_group="pg", topic="P", messages=[ok, ok]))
        for got in await stored(client, address, "P"):
            assert got.properties["region"] == "eu" and got.properties["PGROUP"] == "pg" and got.tags == ""
            assert not {"RETRY_TOPIC", "TAGS", "REAL_TOPIC"} & set(got.properties)

    run(scenario)


def test_a_send_back_takes_the_retry_topic_from_the_stored_message_not_from_the_consumer(graymq_process, tmp_path):
    broker = graymq_process("broker", "--name", "b", "--port", "0", "--store", str(tmp_path / "b"),
                            env={"GRAYMQ_BROKER_DELAY_LEVELS_S": "0.05,0.05,0.05,0.05"})

    async def scenario(client: BrokerClient) -> None:
        address = broker.address
        await create_topic(client, address, "RT", 1)
        await heartbeat(client, address, "c1", "G", {"RT": "*"}, gray=False, switch=False)
        sent = await send(client, address, "RT", 0, b"failed", msg_id="M1")
        await client.send_back(address, pb.SendBackRequest(
            consumer_group="G", commit_log_offset=sent.commit_log_offset, origin_topic="ELSEWHERE"))
        for _ in range(200):
            retried = [m for q in range(4) for m in iter_records((await client.pull(address, pull_request(
                "G", "c1", "%RETRY%G", q, 0, expression="*"))).records)]
            if retried:
                break
            await asyncio.sleep(0.05)
        assert [m.properties["RETRY_TOPIC"] for m in retried] == ["RT"]

    run(scenario)
