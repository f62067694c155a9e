"""A real broker with a topic of three lane slots: per-lane tables in the consumer list, pull isolation per lane,
backlog naming each queue's lane, a lane consumer's retry in its slot of the retry topic, and the slots kept across
a restart."""

from __future__ import annotations

import asyncio

import pytest

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import GrayIsolationError
from graymq.protocol.record import iter_records
from tests.support.broker import pull_request, run, send

pytestmark = pytest.mark.integration

# 10 queues, 3 slots of 2: base 1 2 3 4, slot 0 (v2) 0 5, slot 1 free 6 7, slot 2 (v3) 8 9
LANE_TOPIC = pb.TopicConfig(topic="LT", queue_nums=10, gray_queue_nums=2, perm=pb.PERM_READ_WRITE, lane_slots=3,
                            lanes={"v2": 0, "v3": 2})
# the retry topic: 4 queues with 2 gray per slot, grown to 3 slots: slot 0 is 0 3, slot 1 4 5, slot 2 6 7
RETRY_SLOT_OF_V3 = (6, 7)


@pytest.fixture
def start_broker(graymq_process, tmp_path):
    def start(store=None):
        return graymq_process("broker", "--name", "broker-a", "--port", "0", "--store", str(store or tmp_path / "b"),
                              "--metrics-port", "0", "--segment-size", str(1 << 20),
                              env={"GRAYMQ_BROKER_DELAY_LEVELS_S": "0.05,0.05,0.05"})

    return start


async def lane_heartbeat(client: BrokerClient, address: str, client_id: str, gray: bool, lane: str, tag: str) -> None:
    data = pb.ConsumerData(group="G", gray_flag=gray, lane=lane, gray_switch=True, consume_model=pb.CLUSTERING,
                           subscriptions=[pb.SubscriptionData(topic="LT", sub_string=tag, sub_version=1)])
    await client.heartbeat(address, pb.HeartbeatRequest(client_id=client_id, consumers=[data]))


def lane_pull(client_id: str, queue_id: int, lane: str | None, *, adopted: bool = False,
              topic: str = "LT", offset: int = 0) -> pb.PullRequest:
    request = pull_request("G", client_id, topic, queue_id, offset, gray=lane is not None, adopted=adopted)
    request.lane = lane or ""
    return request


async def bodies(client: BrokerClient, address: str, request: pb.PullRequest) -> list[bytes]:
    return [m.body for m in iter_records((await client.pull(address, request)).records)]


async def retried_queue(client: BrokerClient, address: str, retry_queues: int) -> tuple[int, bytes]:
    """Poll the retry topic (with a deadline) until the delayed retry lands; (its queue, its body)."""
    for _ in range(200):
        for queue_id in range(retry_queues):
            request = lane_pull("b1", queue_id, None, adopted=True, topic="%RETRY%G")  # may read every queue
            request.sub_expression = "*"
            found = await client.pull(address, request)
            records = list(iter_records(found.records))
            if records:
                return queue_id, records[0].body
        await asyncio.sleep(0.05)
    raise AssertionError("the retry never reached the retry topic")


def test_lanes_on_a_real_broker_tables_isolation_backlog_and_retries(start_broker, tmp_path):
    broker = start_broker()

    async def scenario(client: BrokerClient) -> None:
        address = broker.address
        await client.update_topic(address, LANE_TOPIC)
        for client_id, gray, lane, tag in [("b1", False, "", "base"), ("c2", True, "v2", "two"),
                                           ("c3", True, "v3", "three")]:
            await lane_heartbeat(client, address, client_id, gray, lane, tag)
        listing = await client.consumer_list(address, "G")
        assert [(c.client_id, c.lane) for c in listing.clients] == [("b1", ""), ("c2", "v2"), ("c3", "v3")]
        assert {t.lane: [s.sub_string for s in t.subscriptions] for t in listing.lane_subscriptions} == {
            "v2": ["two"], "v3": ["three"]}
        assert not listing.gray_subscriptions
        for queue_id, tag in [(8, "three"), (8, "base"), (0, "two"), (1, "base")]:
            await send(client, address, "LT", queue_id, f"{queue_id}{tag}".encode(), tags=tag)
        assert await bodies(client, address, lane_pull("c3", 8, "v3")) == [b"8three"]  # its lane's table
        assert await bodies(client, address, lane_pull("c2", 6, "v2")) == []  # a free slot may become its own
        with pytest.raises(GrayIsolationError, match="lane v3 client c3 of G may not pull queue 0 of LT: lane v2"):
            await client.pull(address, lane_pull("c3", 0, "v3"))
        with pytest.raises(GrayIsolationError, match="normal client b1 of G may not pull queue 8 of LT: lane v3"):
            await client.pull(address, lane_pull("b1", 8, None))
        assert await bodies(client, address, lane_pull("b1", 8, None, adopted=True)) == [b"8base"]
        backlog = {q.queue_id: (q.gray, q.lane) for q in await client.group_backlog(address, "G", "LT")}
        assert backlog == {0: (True, "v2"), 5: (True, "v2"), 6: (True, ""), 7: (True, ""), 8: (True, "v3"),
                           9: (True, "v3"), **{q: (False, "") for q in (1, 2, 3, 4)}}
        failed = (await client.pull(address, lane_pull("c3", 8, "v3"))).records
        (message,) = iter_records(failed)
        await client.send_back(address, pb.SendBackRequest(
            consumer_group="G", commit_log_offset=message.commit_log_offset, max_reconsume_times=3, gray_flag=True,
            lane="v3"))
        retry = await client.call(address, pb.GET_TOPIC, pb.GetTopicRequest(topic="%RETRY%G"), pb.TopicConfig)
        assert (retry.queue_nums, retry.lane_slots) == (8, 3)
        assert await retried_queue(client, address, retry.queue_nums) in {(q, b"8three") for q in RETRY_SLOT_OF_V3}

    run(scenario)
    assert broker.terminate() == 0
    broker = start_broker(tmp_path / "b")

    async def after_restart(client: BrokerClient) -> None:
        kept = await client.call(broker.address, pb.GET_TOPIC, pb.GetTopicRequest(topic="LT"), pb.TopicConfig)
        assert (kept.queue_nums, kept.lane_slots, dict(kept.lanes)) == (10, 3, {"v2": 0, "v3": 2})

    run(after_restart)
