"""The source's pure parts: option parsing, offset JSON, read limits, queue sets, Arrow batches."""

from __future__ import annotations

import asyncio
import doctest

import pytest

from graymq.client.message import MessageQueue
from graymq.client.spark.offsets import cap_offsets, from_json, processed_offsets, to_json
from graymq.client.spark.options import SourceOptions, side_options, with_conf_gray_flag
from graymq.client.spark.planner import GroupLanes, Planner, job_queues
from graymq.client.spark.schema import ARROW_SCHEMA, to_record_batch
from graymq.core.route import BrokerData, TopicRoute
from graymq.nameserver_api.lane_records import GroupLane
from graymq.protocol.errors import ConfigError, RequestTimeoutError
from graymq.protocol.record import MessageExt, make_properties

pytestmark = pytest.mark.spark
A0, A1, A2 = (MessageQueue("T", "broker-a", q) for q in range(3))
B10 = MessageQueue("T", "broker-b", 10)
BASE = {"nameserver": "http://127.0.0.1:9876", "topic": "T", "group": "G"}


def test_options_are_case_insensitive_with_defaults():
    options = SourceOptions.parse({**BASE, "GrayFlag": "TRUE", "MAXRECORDSPERTRIGGER": "10", "Topics": "T,U"})
    assert options == SourceOptions("http://127.0.0.1:9876", ("T", "U"), "G", gray=True, max_records_per_trigger=10)
    assert SourceOptions.parse(BASE).starting_offsets == "group" and not SourceOptions.parse(BASE).gray


@pytest.mark.parametrize("options, message", [
    ({"topic": "T", "group": "G"}, "nameserver is required"),
    ({**BASE, "nameserver": "127.0.0.1:9876"}, "must start with http"),
    ({**BASE, "topic": ""}, "topic .* is required"),
    ({**BASE, "grayFlag": "maybe"}, "grayFlag='maybe' is not a boolean"),
    ({**BASE, "startingOffsets": "first"}, "startingOffsets='first' must be one of"),
    ({**BASE, "maxRecordsPerTrigger": "0"}, "maxRecordsPerTrigger='0' must be > 0"),
    ({**BASE, "pullBatchSize": "5000"}, "exceeds 1024"),
    ({**BASE, "tag": "A"}, "unknown graymq option"),
])
def test_bad_options_name_the_option(options, message):
    with pytest.raises(Exception, match=message):
        SourceOptions.parse(options)


class FakeConf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)


class FakeSpark:
    def __init__(self, values: dict[str, str]) -> None:
        self.conf = FakeConf(values)


def test_the_lane_option_names_the_jobs_lane_and_gray_is_the_gray_flag():
    assert SourceOptions.parse({**BASE, "Lane": " v3 "}).in_lane == "v3"
    gray = SourceOptions.parse({**BASE, "lane": "gray"})
    assert gray == SourceOptions.parse({**BASE, "grayFlag": "true"}) and gray.in_lane == "gray"
    assert SourceOptions.parse({**BASE, "grayFlag": "true", "lane": "v3"}).in_lane == "v3"
    assert SourceOptions.parse({**BASE, "lane": ""}).in_lane is None, "empty: no lane"
    assert SourceOptions.parse({**BASE, **side_options("v3")}).in_lane == "v3"
    assert SourceOptions.parse({**BASE, **side_options(False)}).in_lane is None


@pytest.mark.parametrize("options, message", [
    ({**BASE, "grayFlag": "false", "lane": "v3"}, r"^options grayFlag=false and lane='v3' contradict each other"),
    ({**BASE, "lane": "v 3"}, r"^option lane: invalid lane name 'v 3'"),
    ({**BASE, "lane": "v3/x"}, r"^option lane: invalid lane name 'v3/x'"),
])
def test_a_lane_with_gray_flag_false_or_a_bad_lane_name_is_one_line(options, message):
    with pytest.raises(ConfigError, match=message) as refused:
        SourceOptions.parse(options)
    assert "\n" not in str(refused.value)


def test_spark_conf_lane_applies_only_when_the_options_name_no_side():
    spark = FakeSpark({"spark.graymq.lane": "v3"})
    assert SourceOptions.parse(with_conf_gray_flag(spark, BASE)).in_lane == "v3"
    assert SourceOptions.parse(with_conf_gray_flag(spark, {**BASE, "grayFlag": "false"})).in_lane is None
    assert SourceOptions.parse(with_conf_gray_flag(spark, {**BASE, "LANE": "v2"})).in_lane == "v2"
    both = FakeSpark({"spark.graymq.lane": "v3", "spark.graymq.grayFlag": "false"})
    with pytest.raises(ConfigError, match="contradict"):
        SourceOptions.parse(with_conf_gray_flag(both, BASE))


def test_spark_conf_gray_flag_applies_only_when_the_option_is_absent():
    spark = FakeSpark({"spark.graymq.grayFlag": "on"})
    assert with_conf_gray_flag(spark, BASE)["grayFlag"] == "true"
    assert with_conf_gray_flag(spark, {**BASE, "grayflag": "false"}) == {**BASE, "grayflag": "false"}
    assert "grayFlag" not in with_conf_gray_flag(FakeSpark({}), BASE)
    with pytest.raises(ConfigError, match="spark.graymq.grayFlag"):
        with_conf_gray_flag(FakeSpark({"spark.graymq.grayFlag": "2"}), BASE)


def test_offsets_json_round_trips_and_is_canonical():
    offsets = {A2: 7, A0: 3, B10: 1}
    raw = to_json(offsets)
    assert raw == {"T": {"broker-a": {"0": 3, "2": 7}, "broker-b": {"10": 1}}}
    assert from_json(raw) == offsets
    assert to_json(dict(reversed(list(offsets.items())))) == raw


def test_processed_offsets_are_the_graymq_sources_end_of_the_last_batch():
    ours = {"description": "graymq", "startOffset": to_json({A0: 1}), "endOffset": '{"T": {"broker-a": {"0": 4}}}'}
    others = [{"endOffset": "17"}, {"endOffset": "null"}, {"endOffset": None}, {"endOffset": "{not json"},
              {"endOffset": '{"U": {"broker-a": {"0": 9}}}'}, {"endOffset": '{"T": 3}'}]
    assert processed_offsets({"batchId": 3, "sources": [*others, ours]}, ("T",)) == {A0: 4}
    assert processed_offsets(None, ("T",)) == {} == processed_offsets({"sources": []}, ("T",))
    assert processed_offsets({"sources": [ours, ours]}, ("T",)) == {}, "two graymq sources: which is the job's?"


def test_read_limit_is_shared_over_the_queues_and_never_exceeded():
    assert cap_offsets({A0: 0, A1: 0, A2: 0}, {A0: 100, A1: 100, A2: 100}, 10) == {A0: 4, A1: 3, A2: 3}
    assert cap_offsets({A0: 5, A1: 0}, {A0: 6, A1: 100}, 10) == {A0: 6, A1: 9}
    assert cap_offsets({A0: 5}, {A0: 5, A1: 8}, 10) == {A0: 5, A1: 8}, "a new queue starts at its latest"
    assert cap_offsets({A0: 0, A1: 0}, {A0: 3, A1: 2}, 100) == {A0: 3, A1: 2}


def test_queue_sets_follow_the_gray_layout_and_the_switch():
    route = TopicRoute("T", (BrokerData("broker-a", "h:1", 6, 2), BrokerData("broker-b", "h:2", 4, 0)))
    ids = lambda queues: [(mq.broker_name, mq.queue_id) for mq in queues]  # noqa: E731
    assert ids(job_queues(route, "gray", True)) == [("broker-a", 0), ("broker-a", 5)]
    assert ids(job_queues(route, None, True)) == [("broker-a", q) for q in (1, 2, 3, 4)] + [
        ("broker-b", q) for q in range(4)]
    assert len(job_queues(route, None, False)) == 10, "switch off: the normal side owns every queue"
    assert ids(job_queues(route, "gray", False)) == [("broker-a", 0), ("broker-a", 5)]


LANE_ROUTE = TopicRoute("T", (BrokerData("broker-a", "h:1", 10, 2, lane_slots=3),), (("v2", 0), ("v3", 1)))


def queue_ids(queues: list[MessageQueue]) -> list[int]:
    return [mq.queue_id for mq in queues]


def test_a_lane_job_reads_its_lanes_slot_only_and_nobody_reads_a_free_slot():
    # 10 queues, 2 per slot, 3 slots: base 1-4, slot 0 (v2) 0 and 5, slot 1 (v3) 6-7, slot 2 (free) 8-9
    assert queue_ids(job_queues(LANE_ROUTE, "v3", True)) == [6, 7]
    assert queue_ids(job_queues(LANE_ROUTE, "v2", True)) == [0, 5]
    assert queue_ids(job_queues(LANE_ROUTE, "gray", True)) == [], "the gray lane holds no slot of this topic"
    assert queue_ids(job_queues(LANE_ROUTE, None, True)) == [1, 2, 3, 4], "v2 and v3 held (their default policy)"
    assert queue_ids(job_queues(LANE_ROUTE, "v3", False)) == [6, 7], "switch off: a lane job keeps to its slot"
    assert queue_ids(job_queues(LANE_ROUTE, None, False)) == list(range(10))


def test_a_base_job_adopts_a_lane_without_consumers_in_the_group_as_a_base_consumer_would():
    lanes = [GroupLane("v2", ("p1 (producer)",), False, "adopt", None, {"T": 0}),
             GroupLane("v3", ("job-v3 (spark)",), True, "hold", None, {"T": 1})]
    adopting = GroupLanes.of(lanes)
    assert adopting.present == {"v3"}, "a producer in v2 is no consumer of it"
    assert queue_ids(job_queues(LANE_ROUTE, None, True, adopting)) == [0, 1, 2, 3, 4, 5]
    assert queue_ids(job_queues(LANE_ROUTE, "v3", True, adopting)) == [6, 7]
    v2_consumed = GroupLanes.of([GroupLane("v2", ("c1 (consumer)",), False, "adopt", None, {"T": 0}), *lanes[1:]])
    assert queue_ids(job_queues(LANE_ROUTE, None, True, v2_consumed)) == [1, 2, 3, 4], "v2 has a consumer: not adopted"
    held = GroupLanes.of([GroupLane("v3", (), True, "hold", None, {"T": 1}), *lanes[:1]])
    assert queue_ids(job_queues(LANE_ROUTE, None, True, held)) == [0, 1, 2, 3, 4, 5], "v3 orphaned but held"


def test_arrow_batch_matches_the_schema_spark_checks():
    properties = make_properties(tags="PAID", keys=["o1", "c9"], msg_id="M1", extra={"region": "eu"})
    message = MessageExt("T", b"\x00body", 5, 42, 1000, properties, sys_flag=1, born_timestamp=1_700_000_000_123,
                         store_timestamp=1_700_000_000_456, broker_name="broker-a")
    batch = to_record_batch([message, message])
    assert batch.schema.equals(ARROW_SCHEMA)
    row = batch.to_pylist()[0]
    assert (row["topic"], row["broker"], row["queue_id"], row["queue_offset"]) == ("T", "broker-a", 5, 42)
    assert (row["msg_id"], row["tags"], row["keys"], row["body"], row["gray"]) == ("M1", "PAID", ["o1", "c9"],
                                                                                   b"\x00body", True)
    assert dict(row["properties"])["region"] == "eu"
    assert row["born_timestamp"].timestamp() == 1_700_000_000.123


class FlakyConsumer:
    """Answers for broker-a, fails (as a broker that is down) for broker-b."""

    def __init__(self) -> None:
        self.committed: dict[MessageQueue, int] = {}

    async def max_offset(self, mq: MessageQueue) -> int:
        if mq.broker_name == "broker-b":
            raise RequestTimeoutError("broker-b does not answer")
        return 50

    async def commit(self, mq: MessageQueue, offset: int) -> None:
        await self.max_offset(mq)
        self.committed[mq] = offset


def test_a_broker_that_does_not_answer_holds_its_queues_and_is_committed_later():
    planner = Planner(SourceOptions.parse(BASE))
    real, planner.consumer = planner.consumer, FlakyConsumer()  # type: ignore[assignment]
    try:
        assert asyncio.run(planner.latest_offsets({A0: 5, B10: 7})) == {A0: 50, B10: 7}
        assert asyncio.run(planner.commit({A0: 5, B10: 7})) == {A0: 5}
    finally:
        asyncio.run(real.stop())


class SlotRoutes:
    """Routes of T: a cached one without v3's slot, and what the name server says (v3 holding slot 1 once taken)."""

    def __init__(self, taken: bool) -> None:
        self.taken, self.taken_by_planner = taken, False
        self.cached = TopicRoute("T", LANE_ROUTE.brokers, (("v2", 0),))

    async def get(self, topic: str, *, refresh: bool = False) -> TopicRoute:
        if refresh:
            self.cached = LANE_ROUTE if self.taken else self.cached
        return self.cached

    async def take_lane_slot(self, topic: str, lane: str) -> None:
        self.taken = self.taken_by_planner = True


class SlotConsumer:
    def __init__(self, routes: SlotRoutes) -> None:
        self.routes = self.nameserver = routes

    async def route(self, topic: str) -> TopicRoute:
        return await self.routes.get(topic)


@pytest.mark.parametrize("taken_by_heartbeat", [True, False])
def test_a_lane_job_whose_cached_route_lacks_its_slot_reads_it_again_and_takes_it_only_when_none_is_held(
        taken_by_heartbeat):
    planner = Planner(SourceOptions.parse({**BASE, "lane": "v3"}))
    real, routes = planner.consumer, SlotRoutes(taken_by_heartbeat)
    planner.consumer = SlotConsumer(routes)  # type: ignore[assignment]
    try:
        assert queue_ids(asyncio.run(planner.queues())) == [6, 7]
        assert routes.taken_by_planner is not taken_by_heartbeat
    finally:
        asyncio.run(real.stop())


def test_option_doctests() -> None:
    from graymq.client.spark import options

    assert doctest.testmod(options).failed == 0
