"""The broker's side of lanes without a network: a topic's lane slots and lane map (validated, persisted, read from
the name server), a subscription table per lane, pull isolation per lane, the retry slot of a lane's send-back, and
the stock (gRPC) clients' gray lane on a topic of several slots."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from graymq.broker_ext.broker_controller import BrokerController
from graymq.broker_ext.config import BrokerSettings
from graymq.broker_ext.groups.consumer_manager import ConsumerManager
from graymq.broker_ext.groups.group_info import ConsumerGroupInfo, SubscriptionData
from graymq.broker_ext.groups.queue_leases import QueueLocks
from graymq.broker_ext.grpc_endpoint.assignment import Side, receivable_queue_ids
from graymq.broker_ext.grpc_endpoint.send import own_route
from graymq.broker_ext.nameserver_registry import NameServerRegistry
from graymq.broker_ext.processors.client_processor import ClientProcessor
from graymq.broker_ext.processors.pull_processor import check_gray_isolation
from graymq.broker_ext.processors.send_back import retry_queue_ids
from graymq.broker_ext.topic_config import TopicConfig, TopicConfigManager
from graymq.core.group_gray import GroupGray
from graymq.core.queue_layout import GRAY_LANE
from graymq.core.route import FREE_SLOT
from graymq.core.selector import GrayQueueSelector
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import BadRequestError, GrayIsolationError, LaneSlotError
from graymq.protocol.remoting import parse_body, parse_envelope

pytestmark = pytest.mark.unit

# 10 queues, 2 per slot, 3 slots: base 1 2 3 4, slot 0 is 0 5, slot 1 is 6 7, slot 2 is 8 9
LANES = {"v2": 0, "v3": 2}
TOPIC = TopicConfig("T", 10, 2, lane_slots=3, lanes=LANES)  # type: ignore[arg-type]


def test_a_topic_of_three_slots_names_each_queues_slot_and_lane() -> None:
    assert (TOPIC.slot_ids(0), TOPIC.slot_ids(1), TOPIC.slot_ids(2), TOPIC.base_ids) == (
        (0, 5), (6, 7), (8, 9), (1, 2, 3, 4))
    assert [TOPIC.lane_of(q) for q in range(10)] == ["v2", None, None, None, None, "v2", FREE_SLOT, FREE_SLOT,
                                                     "v3", "v3"]
    assert TOPIC.slot_of_lane("v3") == 2 and TOPIC.slot_of_lane("gray") is None
    never_heard = TopicConfig("T", 10, 2, lane_slots=3)
    assert [never_heard.lane_of(q) for q in (0, 6, 8, 1)] == ["gray", FREE_SLOT, FREE_SLOT, None]
    assert TopicConfig("T", 8, 2).gray_queues == (0, 7)  # one slot: today's layout


@pytest.mark.parametrize(("kwargs", "why"), [
    ({"queue_nums": 4, "lane_slots": 3}, "cannot hold 3 lane slots"),
    ({"lanes": {"v2": 3}}, "lane v2 holds slot 3, outside its 3 slots"),
    ({"lanes": {"v2": 1, "v3": 1}}, "lanes v2 and v3 both hold slot 1"),
    ({"lanes": {"v 2": 1}}, "invalid lane name 'v 2'"),
    ({"lane_slots": 0}, "lane_slots must be >= 1"),
])
def test_a_layout_that_cannot_hold_its_slots_or_a_bad_lane_map_is_refused(kwargs, why) -> None:
    with pytest.raises(BadRequestError, match=why):
        TopicConfig(**{"topic": "T", "queue_nums": 10, "gray_queue_nums": 2, "lane_slots": 3, **kwargs})


def test_a_topic_of_three_slots_round_trips_through_protobuf_and_the_topic_file(tmp_path) -> None:
    assert TopicConfig.from_pb(TOPIC.to_pb()) == TOPIC
    assert TopicConfig.from_pb(pb.TopicConfig(topic="T", queue_nums=8, gray_queue_nums=2)) == TopicConfig("T", 8, 2)
    topics = TopicConfigManager(tmp_path, retry_queue_nums=4, retry_gray_queue_nums=2)
    topics.update(TOPIC)
    topics.update(TopicConfig("OLD", 8, 2))
    stored = json.loads((tmp_path / "topics.json").read_text())["topics"]
    assert stored[0] == {"topic": "OLD", "queue_nums": 8, "gray_queue_nums": 2, "perm": 6, "order": False}
    assert stored[1]["lane_slots"] == 3 and stored[1]["lanes"] == LANES
    again = TopicConfigManager(tmp_path, retry_queue_nums=4, retry_gray_queue_nums=2)
    again.load()
    assert again.get("T") == TOPIC and again.get("OLD") == TopicConfig("OLD", 8, 2)


def test_a_file_written_before_lanes_loads_as_one_slot_without_a_lane_map(tmp_path) -> None:
    (tmp_path / "topics.json").write_text(json.dumps({"topics": [
        {"topic": "T", "queue_nums": 8, "gray_queue_nums": 2, "perm": 6, "order": False}]}))
    topics = TopicConfigManager(tmp_path, retry_queue_nums=4, retry_gray_queue_nums=2)
    topics.load()
    config = topics.require("T")
    assert (config.lane_slots, config.lanes, config.lane_of(0)) == (1, None, "gray")


def test_a_config_naming_no_lane_map_keeps_the_known_one_and_slots_never_shrink(tmp_path) -> None:
    topics = TopicConfigManager(tmp_path, retry_queue_nums=4, retry_gray_queue_nums=2)
    topics.update(TOPIC)
    assert topics.update(TopicConfig("T", 10, 2, perm=pb.PERM_READ, lane_slots=3))
    assert topics.require("T").lanes == TOPIC.lanes and topics.require("T").perm == pb.PERM_READ
    topics.update(TopicConfig("T", 10, 2, lane_slots=3, lanes={}))  # type: ignore[arg-type]
    assert topics.require("T").lanes == ()  # a map naming no lane: every slot free
    with pytest.raises(BadRequestError, match="cannot shrink from 3 to 1 lane slots"):
        topics.update(TopicConfig("T", 10, 2))


def test_a_retry_topic_grows_to_the_slots_its_topics_have_and_moves_no_queue(tmp_path) -> None:
    topics = TopicConfigManager(tmp_path, retry_queue_nums=4, retry_gray_queue_nums=2)
    one = topics.ensure_retry_topic("%RETRY%G")
    grown = topics.ensure_retry_topic("%RETRY%G", 3)
    assert (one.queue_nums, one.gray_queues) == (4, (0, 3))
    assert (grown.queue_nums, grown.lane_slots, grown.gray_queues, grown.slot_ids(2)) == (8, 3, (0, 3), (6, 7))
    assert topics.ensure_retry_topic("%RETRY%G") is grown


def registry_with(tmp_path, topics: list[dict]) -> tuple[NameServerRegistry, list[dict]]:
    settings = BrokerSettings(name="broker-a", store_dir=tmp_path, segment_size=1 << 16, cq_units_per_file=64)
    registry = NameServerRegistry(BrokerController(settings), ["http://ns.test"], interval_s=60)
    bodies: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/heartbeat"):
            bodies.append(json.loads(request.content))
        return httpx.Response(200, json={"topics": topics, "topics_version": "1"})

    registry._client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return registry, bodies


def test_the_registry_takes_lane_slots_and_the_lane_map_from_the_name_server_and_reports_its_slots(tmp_path) -> None:
    registry, bodies = registry_with(tmp_path, [
        {"topic": "T", "queue_nums": 10, "gray_queue_nums": 2, "perm": 6, "lane_slots": 3, "lanes": LANES},
        {"topic": "OLD", "queue_nums": 8, "gray_queue_nums": 2, "perm": 6},
    ])

    async def main() -> None:
        await registry.register_once()
        await registry.stop()

    asyncio.run(main())
    topics = registry.broker.topics
    assert topics.get("T") == TOPIC and topics.get("OLD") == TopicConfig("OLD", 8, 2)
    assert {"topic": "T", "queue_nums": 10, "gray_queue_nums": 2, "perm": 6, "lane_slots": 3} in bodies[-1]["topics"]


def test_a_name_server_answer_without_lane_keys_keeps_the_brokers_slots_and_map(tmp_path) -> None:
    registry, _ = registry_with(tmp_path, [{"topic": "T", "queue_nums": 10, "gray_queue_nums": 2, "perm": 4}])
    registry.broker.topics.update(TOPIC)

    async def main() -> None:
        await registry.register_once()
        await registry.stop()

    asyncio.run(main())
    config = registry.broker.topics.require("T")
    assert (config.perm, config.lane_slots, config.lanes) == (4, 3, TOPIC.lanes)


def heartbeat(client_id: str, gray: bool, lane: str, topics: dict[str, str]) -> pb.HeartbeatRequest:
    subs = [pb.SubscriptionData(topic=t, sub_string=e, sub_version=1) for t, e in topics.items()]
    data = pb.ConsumerData(group="G", gray_flag=gray, lane=lane, gray_switch=True, subscriptions=subs,
                           consume_model=pb.CLUSTERING)
    return pb.HeartbeatRequest(client_id=client_id, consumers=[data])


def test_each_lane_has_its_own_table_and_the_consumer_list_names_each_clients_lane(tmp_path) -> None:
    topics = TopicConfigManager(tmp_path, retry_queue_nums=4, retry_gray_queue_nums=2)
    topics.update(TOPIC)
    consumers = ConsumerManager(expiry_s=60)
    processor = ClientProcessor(topics, consumers, QueueLocks(30))
    for request in (heartbeat("b1", False, "v3", {"T": "base"}), heartbeat("g1", True, "", {"T": "gray"}),
                    heartbeat("c2", True, "v2", {"T": "two"}), heartbeat("c3", True, "v3", {"T": "three"}),
                    heartbeat("c3b", True, "v3", {"T": "three", "U": "*"})):
        processor.heartbeat(None, request)  # type: ignore[arg-type]
    info = consumers.groups["G"]
    assert {lane: len(info.lane_table(lane)) for lane in (None, "gray", "v2", "v3", "v4")} == {
        None: 1, "gray": 1, "v2": 1, "v3": 2, "v4": 0}
    assert info.find_subscription("T", True, "v2").sub_string == "two"  # type: ignore[union-attr]
    assert info.find_subscription("T", False, "v2").sub_string == "base"  # type: ignore[union-attr]
    assert (info.lane_clients, info.gray_clients) == ({"gray": 1, "v2": 1, "v3": 2}, 1)
    assert topics.require("%RETRY%G").lane_slots == 3
    listing = parse_body(parse_envelope(processor.consumer_list(pb.ConsumerListRequest(consumer_group="G"))),
                         response=True)
    assert [(c.client_id, c.gray_flag, c.lane) for c in listing.clients] == [
        ("b1", False, ""), ("c2", True, "v2"), ("c3", True, "v3"), ("c3b", True, "v3"), ("g1", True, "")]
    assert [(s.topic, s.sub_string) for s in listing.subscriptions] == [("T", "base")]
    assert [(s.topic, s.sub_string) for s in listing.gray_subscriptions] == [("T", "gray")]
    assert {t.lane: sorted(s.topic for s in t.subscriptions) for t in listing.lane_subscriptions} == {
        "v2": ["T"], "v3": ["T", "U"]}


def test_a_client_moving_to_another_lane_moves_its_subscription_and_counts() -> None:
    info = ConsumerGroupInfo("G", gray_switch=True)
    info.update_client("c", None, True, [SubscriptionData("T", "x")], "v2")
    assert info.update_client("c", None, True, [SubscriptionData("T", "x")], "v3")
    assert (info.lane_table("v2"), list(info.lane_table("v3")), info.lane_clients) == ({}, ["T"], {"v3": 1})
    assert not info.update_client("c", None, True, [SubscriptionData("T", "x")], "v3")


def group(*clients: tuple[str, bool, str], weight: int = 0) -> ConsumerGroupInfo:
    info = ConsumerGroupInfo("G", gray_switch=True, gray_weight=weight)
    for client_id, gray, lane in clients:
        info.update_client(client_id, None, gray, [], lane)
    return info


SIDES = {"base": (False, ""), "gray": (True, ""), "v2": (True, "v2"), "v3": (True, "v3")}


def pullable(config: TopicConfig, info: ConsumerGroupInfo, side: str, adopted: bool = False) -> list[int]:
    gray, lane = SIDES[side]
    allowed = []
    for queue_id in range(config.queue_nums):
        request = pb.PullRequest(consumer_group="G", client_id="x", topic=config.topic, queue_id=queue_id,
                                 gray_flag=gray, lane=lane, adopted=adopted)
        try:
            check_gray_isolation(config, info, request)
        except GrayIsolationError:
            continue
        allowed.append(queue_id)
    return allowed


EVERYONE = group(("b", False, ""), ("g", True, ""), ("c2", True, "v2"), ("c3", True, "v3"))


@pytest.mark.parametrize(("side", "adopted", "known", "never_heard"), [
    ("base", False, [1, 2, 3, 4], [1, 2, 3, 4]),
    ("base", True, list(range(10)), list(range(10))),  # an adopting rebalance may take any lane's queue
    ("v2", False, [0, 5, 6, 7], [0, 5, 6, 7, 8, 9]),  # its slot and a free one; unknown map: any slot
    ("v3", False, [6, 7, 8, 9], [0, 5, 6, 7, 8, 9]),
    ("v3", True, [6, 7, 8, 9], [0, 5, 6, 7, 8, 9]),  # only base clients adopt
    ("gray", False, [6, 7], [0, 5, 6, 7, 8, 9]),  # gray holds no slot: only a free one may become its own
])
def test_the_isolation_matrix_by_side_with_a_known_and_an_unknown_lane_map(side, adopted, known, never_heard) -> None:
    assert pullable(TOPIC, EVERYONE, side, adopted) == known
    assert pullable(TopicConfig("T", 10, 2, lane_slots=3), EVERYONE, side, adopted) == never_heard


def test_a_refusal_names_the_client_its_lane_the_queue_and_the_holding_lane() -> None:
    def refusal(queue_id: int, side: str) -> str:
        gray, lane = SIDES[side]
        with pytest.raises(GrayIsolationError) as refused:
            check_gray_isolation(TOPIC, EVERYONE, pb.PullRequest(consumer_group="G", client_id="c", topic="T",
                                                                 queue_id=queue_id, gray_flag=gray, lane=lane))
        return refused.value.message

    assert refusal(0, "v3") == "lane v3 client c of G may not pull queue 0 of T: lane v2 holds its slot"
    assert refusal(1, "v3") == "lane v3 client c of G may not pull base queue 1 of T"
    assert refusal(8, "base") == ("normal client c of G may not pull queue 8 of T: lane v3 holds its slot (only an "
                                  "adopting rebalance may)")
    assert refusal(6, "base").endswith("queue 6 of T: it is in a free lane slot (only an adopting rebalance may)")
    assert refusal(8, "gray") == "gray client c of G may not pull queue 8 of T: lane v3 holds its slot"


def test_the_weighted_base_queues_stay_the_gray_lanes() -> None:
    config = TopicConfig("T", 10, 2, lane_slots=3, lanes={"gray": 0, "v3": 2})  # type: ignore[arg-type]
    info = group(("b", False, ""), ("g", True, ""), ("c3", True, "v3"), weight=50)
    weighted = sorted(info.weighted_queues(config))
    assert weighted == [2, 4]
    assert pullable(config, info, "gray") == [0, 2, 4, 5, 6, 7]
    assert pullable(config, info, "v3") == [6, 7, 8, 9]
    assert pullable(config, info, "base") == [1, 3]
    no_gray = group(("b", False, ""), ("c3", True, "v3"), weight=50)
    assert pullable(config, no_gray, "base") == [1, 2, 3, 4]  # the weight needs a client of the gray lane


def test_a_lane_consumers_retry_goes_to_its_slot_of_the_retry_topic() -> None:
    retry = TopicConfig("%RETRY%G", 8, 2, lane_slots=3)  # slot 0 is 0 3, slot 1 is 4 5, slot 2 is 6 7
    assert retry_queue_ids(retry, TOPIC, "v3") == (6, 7)  # no map heard for the retry topic: the origin's slot
    assert retry_queue_ids(retry, TOPIC, None) == (1, 2)
    assert retry_queue_ids(retry, TopicConfig("T", 8, 2), "gray") == (0, 3)  # today's gray retry queues
    mapped = TopicConfig("%RETRY%G", 8, 2, lane_slots=3, lanes={"v3": 1, "v2": 2})  # type: ignore[arg-type]
    assert retry_queue_ids(mapped, TOPIC, "v3") == (4, 5)  # the retry topic's own map wins
    assert retry_queue_ids(mapped, TOPIC, "v4") == (1, 2)  # no slot known anywhere: base, not stranded
    taken = TopicConfig("%RETRY%G", 8, 2, lane_slots=3, lanes={"v2": 2})  # type: ignore[arg-type]
    assert retry_queue_ids(taken, TOPIC, "v3") == (1, 2)  # its origin slot is another lane's here


def stock_ids(config: TopicConfig, gray: bool) -> list[int]:
    side = Side(GRAY_LANE if gray else None, False, frozenset({GRAY_LANE}))
    return sorted(receivable_queue_ids(config.queue_nums, config.gray_queue_nums, side, GroupGray(switch=True),
                                      lane_slots=config.lane_slots, lanes=config.lanes))


def test_a_gray_or_base_stock_consumer_never_receives_another_lanes_queues() -> None:
    with_gray = TopicConfig("T", 10, 2, lane_slots=3, lanes={"gray": 1, "v3": 2})  # type: ignore[arg-type]
    assert (stock_ids(with_gray, True), stock_ids(with_gray, False)) == ([6, 7], [1, 2, 3, 4])
    assert stock_ids(TopicConfig("T", 10, 2, lane_slots=3, lanes={"v3": 2}), True) == [0, 5]  # type: ignore[arg-type]
    assert stock_ids(TOPIC, True) == [] and stock_ids(TOPIC, False) == [1, 2, 3, 4]  # v2 holds slot 0, gray none


def test_a_stock_producers_send_takes_the_gray_lanes_slot_of_the_brokers_layout() -> None:
    selector = GrayQueueSelector()
    with_gray = own_route("broker-a", TopicConfig("T", 10, 2, lane_slots=3, lanes={"gray": 1}))  # type: ignore[arg-type]
    assert {selector.select(with_gray, True).queue_id for _ in range(8)} == {6, 7}
    assert {selector.select(with_gray, False).queue_id for _ in range(8)} == {1, 2, 3, 4}
    assert {selector.select(own_route("broker-a", TopicConfig("T", 8, 2)), True).queue_id for _ in range(4)} == {0, 7}
    with pytest.raises(LaneSlotError, match="lane gray holds no slot on topic T"):
        selector.select(own_route("broker-a", TOPIC), True)


def test_each_weighted_lane_pulls_its_own_share_of_the_base_queues_and_no_one_elses() -> None:
    config = TopicConfig("T", 14, 2, lane_slots=3, lanes={"gray": 0, "v2": 1, "v3": 2})  # type: ignore[arg-type]
    info = group(("b", False, ""), ("c2", True, "v2"), ("c3", True, "v3"))
    # base 1..8 (slot 0 is 0 9, v2's slot 10 11, v3's 12 13): v2 25% takes 3 7, v3 25% two of the six left: 2 6
    assert info.set_gray_allocation(True, 0, {"v2": 25, "v3": 25})
    assert not info.set_gray_allocation(True, 0, {"v3": 25, "v2": 25})
    assert info.weighted_queues(config) == {3: "v2", 7: "v2", 2: "v3", 6: "v3"}
    assert pullable(config, info, "v2") == [3, 7, 10, 11]
    assert pullable(config, info, "v3") == [2, 6, 12, 13]
    assert pullable(config, info, "base") == [1, 4, 5, 8]
    info.remove_client("c2")  # a weighted lane without a client in the group: its share is the base clients'
    assert pullable(config, info, "base") == [1, 3, 4, 5, 7, 8]
    assert pullable(config, info, "v3") == [2, 6, 12, 13]


def test_a_heartbeat_carries_the_lane_weights_to_the_broker() -> None:
    manager = ConsumerManager(expiry_s=60)
    data = pb.ConsumerData(group="G", gray_flag=True, lane="v3", gray_switch=True, lane_weights={"v3": 40})
    manager.register("c3", None, data)
    info = manager.get("G")
    assert info is not None and info.lane_weights == {"v3": 40} and info.weights == (("v3", 40),)
