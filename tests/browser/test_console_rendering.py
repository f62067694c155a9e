"""What the console says, without a browser or a cluster: the confirmation texts from a group's state, and an
operation record (a rollout's checks included) as the operations page shows it."""

from __future__ import annotations

import doctest
from datetime import UTC, datetime

import pytest

from graymq.nameserver.console import drain, queue_map
from graymq.nameserver.console.actions import FlagAction, PromoteAction, RollbackAction, SwitchAction, WeightAction
from graymq.nameserver.console.preview import describe
from graymq.nameserver.console.queue_map import QueueOffsets, build_queue_map, owners_by_queue
from graymq.nameserver.console.routes import templates
from graymq.nameserver.schemas import BrokerRoute, ClientView, CutoverView, GroupDetail, RuleView, TopicRoute

pytestmark = pytest.mark.unit
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def client(client_id: str, gray: bool, queues: list[str], role: str = "consumer") -> ClientView:
    return ClientView(client_id=client_id, role=role, labels={"version": "v2" if gray else "v1"}, explicit_gray=None,
                      desired_gray=gray, gray=gray, state="GRAY" if gray else "NORMAL", queues=queues, topics=["T"],
                      last_seen=NOW)


def state(lags: dict[int, int]) -> tuple[GroupDetail, list[ClientView], queue_map.QueueMap]:
    """Topic T, 6 queues (gray 0 and 5) on broker b: v2 holds the gray ones, v1 the rest; ``lags`` by queue."""
    rule = RuleView(id=1, group="G", selector={"version": "v2"}, gray=True, position=0, created_at=NOW)
    detail = GroupDetail(group="G", gray_switch=True, orphan_policy="hold", gray_weight=0, created_at=NOW,
                         updated_at=NOW, rules=[rule], running_cutover=None)
    clients = [client("v2", True, ["b:T:0", "b:T:5"]), client("v1", False, [f"b:T:{q}" for q in range(1, 5)]),
               client("p2", True, [], role="producer")]
    route = TopicRoute(topic="T", queue_nums=6, gray_queue_nums=2, brokers=[
        BrokerRoute(broker_name="b", address="h:1", queue_nums=6, gray_queue_nums=2, perm=6)])
    offsets = {q: QueueOffsets(100, 0, 100 + lags.get(q, 0)) for q in range(6)}
    return detail, clients, build_queue_map({"T": route}, owners_by_queue(clients), {("b", "T"): offsets})


def test_the_queue_map_and_drain_progress_examples_hold() -> None:
    assert doctest.testmod(queue_map).failed == 0
    assert doctest.testmod(drain).failed == 0


def test_each_confirmation_says_what_will_happen_in_numbers() -> None:
    detail, clients, qmap = state({0: 1000, 5: 204, 2: 7})
    assert describe(FlagAction(action="flag", client_id="v2", gray=False), detail, clients, qmap) == \
        "v2 drains 2 gray queues, 1,204 messages left, then turns normal and takes normal queues"
    assert describe(FlagAction(action="flag", client_id="v1", gray=True), detail, clients, qmap) == \
        "v1 gives up its 4 queues, turns gray and takes gray queues"
    assert describe(SwitchAction(action="switch", enabled=False), detail, clients, qmap).startswith(
        "turns the gray switch of G off: 1 gray consumer drains 2 gray queues, 1,204 messages left")
    assert describe(WeightAction(action="weight", weight=50), detail, clients, qmap) == \
        "sets the weight of G from 0% to 50%: the gray side takes 2 of the 4 normal queues"
    assert describe(PromoteAction(action="promote"), detail, clients, qmap) == (
        "promotes G: 1 gray producer and 1 gray consumer turn normal (the consumers once they drain 2 gray queues, "
        "1,204 messages left), 1 gray rule removed, weight back to 0")
    assert "normal consumers take 2 gray queues, 1,204 messages left" in describe(
        RollbackAction(action="rollback", mode="adopt"), detail, clients, qmap)


def test_a_broker_that_did_not_answer_makes_the_backlog_unknown_not_zero() -> None:
    detail, clients, _ = state({})
    route = TopicRoute(topic="T", queue_nums=6, gray_queue_nums=2, brokers=[
        BrokerRoute(broker_name="b", address="h:1", queue_nums=6, gray_queue_nums=2, perm=6)])
    qmap = build_queue_map({"T": route}, owners_by_queue(clients), {("b", "T"): "offsets unavailable: refused"})
    assert qmap.gray_backlog is None
    assert describe(FlagAction(action="flag", client_id="v2", gray=False), detail, clients, qmap) == \
        "v2 drains 2 gray queues (messages left unknown: a broker did not answer), then turns normal and takes " \
        "normal queues"


def test_a_rollout_record_shows_its_outcome_and_each_check() -> None:
    op = CutoverView(id=3, group="G", kind="rollout", mode="promote", producer_groups=["G"], state="SUCCEEDED",
                     step="done", started_by="ops", started_at=NOW, updated_at=NOW, finished_at=NOW,
                     result={"outcome": "PROMOTED", "timings_s": {"steps": 3.25}, "resumed": False,
                             "checks": [{"weight": 10, "verdict": "pass"}, {"weight": 50, "verdict": "pass"}]})
    html = templates.get_template("operations.html").render(operations=[op])
    assert 'data-state="SUCCEEDED"' in html and '<span class="outcome">PROMOTED</span>' in html
    assert "steps 3.25 s" in html and "resumed" not in html
    assert "<tr><td>10</td><td>pass</td></tr><tr><td>50</td><td>pass</td></tr>" in html
