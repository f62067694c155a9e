"""The console's lane views without a cluster: queues per lane on the map, base and lanes side by side (none for a
group meeting no lane but gray), slot use, health per lane, a lane's promote described, one console operation per
group and lane."""

from __future__ import annotations

import asyncio
import doctest
from datetime import UTC, datetime

import pytest

from graymq.nameserver.console import actions, lane_view, queue_map
from graymq.nameserver.console.actions import FlagAction, PromoteAction, RollbackAction
from graymq.nameserver.console.drain import DrainWatch
from graymq.nameserver.console.lane_view import lane_columns, lane_counts, slot_use
from graymq.nameserver.console.operations import ConsoleOperations
from graymq.nameserver.console.preview import describe
from graymq.nameserver.console.queue_map import QueueOffsets, build_queue_map
from graymq.nameserver.schemas import BrokerRoute, ClientView, CutoverView, GroupDetail, GroupLaneView, TopicRoute
from graymq.nameserver.services.health_history import HealthHistory

pytestmark = pytest.mark.unit
NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("module", [actions, lane_view, queue_map])
def test_the_examples_hold(module: object) -> None:
    assert doctest.testmod(module).failed == 0  # type: ignore[arg-type]


def route(lanes: dict[str, int], lane_slots: int = 3) -> TopicRoute:
    """6 base queues, 2 per slot: slot 0 is (0, 5), slot 1 (6, 7), slot 2 (8, 9)."""
    total = 6 + (lane_slots - 1) * 2
    return TopicRoute(topic="T", queue_nums=6, gray_queue_nums=2, lanes=lanes, brokers=[
        BrokerRoute(broker_name="b", address="h:1", queue_nums=total, gray_queue_nums=2, perm=6,
                    lane_slots=lane_slots)])


def client(client_id: str, lane: str | None, role: str = "consumer") -> ClientView:
    return ClientView(client_id=client_id, role=role, labels={}, explicit_gray=None, desired_gray=lane is not None,
                      gray=lane is not None, state="GRAY" if lane else "NORMAL", queues=[], topics=["T"],
                      last_seen=NOW, lane=lane, desired_lane=lane)


def lag(left: int) -> QueueOffsets:
    return QueueOffsets(committed=0, min_offset=0, max_offset=left)


def test_each_lane_has_its_queues_and_backlog_and_a_free_slot_is_nobodys() -> None:
    offsets = {("b", "T"): {q: lag(q) for q in range(10)}}
    qmap = build_queue_map({"T": route({"gray": 0, "v3": 1})}, {}, offsets)
    assert [c.queue_id for c in qmap.lane_cells("v3")] == [6, 7]
    assert (qmap.backlog(None), qmap.gray_backlog, qmap.backlog("v3"), qmap.backlog("")) == (10, 5, 13, 17)
    assert qmap.lanes() == ["gray", "v3"]


def test_a_topic_with_room_for_one_lane_shows_its_free_slot_as_gray_as_before_lanes() -> None:
    qmap = build_queue_map({"T": route({}, lane_slots=1)}, {}, {})
    assert [(c.queue_id, c.lane) for c in qmap.cells() if c.gray] == [(0, "gray"), (5, "gray")]
    assert lane_columns([client("g1", "gray")], qmap, [], [], DrainWatch()) == []
    assert slot_use({"T": route({}, lane_slots=1)}, False) == []


def test_base_and_each_lane_side_by_side_with_the_running_operation_of_its_lane() -> None:
    qmap = build_queue_map({"T": route({"gray": 0, "v3": 1})}, {}, {("b", "T"): {q: lag(3) for q in range(10)}})
    clients = [client("b1", None), client("g1", "gray"), client("v3a", "v3"), client("p3", "v3", "producer")]
    views = [GroupLaneView(lane="v3", clients=["v3a (consumer)"], taking_part=True, orphan_policy="hold",
                           slots={"T": 1}),
             GroupLaneView(lane="v9", clients=[], taking_part=False, orphan_policy="adopt", slots={"OTHER": 0})]
    op = CutoverView(id=7, group="G", kind="promote", mode="drain", producer_groups=["G"], state="RUNNING",
                     step="drain", result=None, started_by="dev", started_at=NOW, updated_at=NOW, finished_at=None,
                     lane="v3")
    columns = lane_columns(clients, qmap, views, [op], DrainWatch())
    assert [c.name for c in columns] == ["base", "gray", "v3"]  # v9 holds no slot of the group's topics
    base, gray, v3 = columns
    assert [c.client_id for c in v3.clients] == ["v3a", "p3"] and [c.client_id for c in base.clients] == ["b1"]
    assert (base.queues, gray.queues, v3.queues, v3.backlog) == (4, 2, 2, 6)
    assert v3.view is views[0] and gray.view is None and base.running is None
    assert v3.running is op and v3.drain is not None and (v3.drain.left, v3.drain.gray_consumers) == (6, 1)
    assert len({c.colour for c in columns}) == 3
    assert [(s.slot, s.lane) for s in slot_use({"T": route({"gray": 0, "v3": 1})}, True)[0].slots] == [
        (0, "gray"), (1, "v3"), (2, "")]


def test_health_is_charted_per_lane_and_a_lane_once_seen_goes_on_at_zero() -> None:
    history = HealthHistory(sample_s=5.0)
    history.add({"G": {"c1": {"gray": {"consumed": 0}, "lane": "v3"}, "c2": {"gray": {"consumed": 0}}}}, at=100.0)
    history.add({"G": {"c1": {"gray": {"consumed": 50}, "lane": "v3"}, "c2": {"gray": {"consumed": 10}}}}, at=105.0)
    history.add({"G": {"c2": {"gray": {"consumed": 20}}}}, at=110.0)
    series = history.series("G")
    assert sorted(series) == ["gray", "normal", "v3"]
    assert [p["per_second"] for p in series["v3"]] == [10.0, 0.0]
    assert [p["per_second"] for p in series["gray"]] == [2.0, 2.0]


def test_a_lanes_promote_and_rollback_are_described_with_its_own_clients_and_queues() -> None:
    qmap = build_queue_map({"T": route({"gray": 0, "v3": 1})}, {}, {("b", "T"): {q: lag(4) for q in range(10)}})
    clients = [client("g1", "gray"), client("v3a", "v3"), client("p3", "v3", "producer")]
    detail = GroupDetail(group="G", gray_switch=True, orphan_policy="hold", gray_weight=0, created_at=NOW,
                         updated_at=NOW, rules=[], running_cutover=None)
    assert describe(PromoteAction(action="promote", lane="v3"), detail, clients, qmap) == (
        "promotes lane v3 of G: 1 v3 producer and 1 v3 consumer turn normal (the consumers once they drain 2 v3 "
        "queues, 8 messages left), 0 v3 rules removed, the lane's slots given back; the other lanes run on untouched")
    assert describe(RollbackAction(action="rollback", mode="adopt", lane="v3"), detail, clients, qmap).startswith(
        "rolls lane v3 of G back (adopt): 1 v3 producer turns normal; once the 1 v3 consumer stop, base consumers "
        "take 2 v3 queues, 8 messages left")
    assert describe(PromoteAction(action="promote"), detail, clients, qmap).startswith("promotes G: ")


def test_the_groups_list_counts_base_and_each_lane_apart_with_its_backlog() -> None:
    qmap = build_queue_map({"T": route({"gray": 0, "v3": 1})}, {}, {("b", "T"): {q: lag(4) for q in range(10)}})
    clients = [client("b1", None), client("g1", "gray"), client("v3a", "v3"), client("p3", "v3", "producer"),
               client("v2a", "v2")]
    old = client("old", None).model_copy(update={"gray": True})  # a gray client from before lanes names none
    assert [(c.lane, c.clients, c.backlog) for c in lane_counts([*clients, old], qmap)] == [
        ("gray", 2, 8), ("v2", 1, 0), ("v3", 2, 8)]  # v2 holds no slot of T: no queue, no backlog


def test_a_flag_into_a_lane_is_described_with_what_the_client_drains_first() -> None:
    qmap = build_queue_map({"T": route({"gray": 0, "v3": 1})}, {"b:T:0": ("g1",), "b:T:5": ("g1",),
                                                                  "b:T:1": ("b1",)},
                           {("b", "T"): {q: lag(4) for q in range(10)}})
    clients = [client("b1", None), client("g1", "gray")]
    detail = GroupDetail(group="G", gray_switch=True, orphan_policy="hold", gray_weight=0, created_at=NOW,
                         updated_at=NOW, rules=[], running_cutover=None)

    def flag(client_id: str, lane: str) -> str:
        return describe(FlagAction(action="flag", client_id=client_id, gray=True, lane=lane), detail, clients, qmap)

    assert flag("b1", "v3") == "b1 gives up its 1 queue, enters lane v3 and takes its queues"
    assert flag("g1", "v3") == "g1 drains 2 gray queues, 8 messages left, then enters lane v3 and takes its queues"
    assert flag("g1", "gray") == "g1 stays gray (its flag becomes explicit)"
    with pytest.raises(ValueError, match="lane v3 needs gray true"):
        FlagAction(action="flag", client_id="b1", gray=False, lane="v3")


def test_the_console_runs_one_operation_per_group_and_lane() -> None:
    async def scenario() -> tuple[bool, bool, str]:
        console = ConsoleOperations()
        gate = asyncio.Event()
        console.start("G", "promote", 0, gate.wait())
        console.start("G", "rollback", 0, gate.wait(), "v3")  # another lane of the group: runs alongside
        refused = ""
        try:
            console.start("G", "promote", 0, gate.wait(), "v3")
        except RuntimeError as exc:
            refused = str(exc)
        v3 = console.running("G", "v3")
        assert v3 is not None and v3.what == "rollback"
        await console.cancel(v3)
        gray_running = console.running("G") is not None
        await console.stop()
        return gray_running, console.running("G", "v3") is None, refused

    assert asyncio.run(scenario()) == (True, True, "the console already runs an operation on G (lane v3)")
