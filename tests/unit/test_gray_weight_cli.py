"""`graymq gray weight` refuses a bad PERCENT before any request; `gray status` finds the normal queues the gray
side holds from the clients' reports and the routes' gray layout."""

from __future__ import annotations

import asyncio
import doctest
from typing import Any

import pytest

from graymq.client.message import MessageQueue
from graymq.core.route import BrokerData, TopicRoute
from graymq.gray_controller.cli import gray_cmd, main
from graymq.nameserver_api.client import NameServerClient
from graymq.protocol.errors import TopicNotExistError
from graymq.runbooks.group_state import GroupInspector, GroupStatus, WeightedQueue
from tests.support.records import client_record

pytestmark = pytest.mark.unit
UNREACHABLE = "http://127.0.0.1:9"  # a request would fail with exit 1, not 2


def test_percent_parsing_examples_hold():
    assert doctest.testmod(gray_cmd).failed == 0


@pytest.mark.parametrize("percent", ["101", "-1", "1000", "abc", "50.5", "", "²", "0x10"])
def test_a_percent_outside_0_to_100_or_not_a_whole_number_exits_2_with_one_line_before_any_request(
    percent: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["gray", "weight", "GID", percent, "--nameserver", UNREACHABLE]) == 2
    err = capsys.readouterr().err
    assert err == f"graymq gray: PERCENT must be a whole number from 0 to 100, got {percent!r}\n"


class FakeRoutes:
    """Routes of TOPIC (8 queues, 2 gray: 0 and 7) on broker-a; any other topic has none."""

    async def get(self, topic: str) -> TopicRoute:
        if topic != "TOPIC":
            raise TopicNotExistError(f"no route for topic {topic}")
        return TopicRoute("TOPIC", (BrokerData("broker-a", "127.0.0.1:1", 8, 2),))


def weighted(clients: list[dict[str, Any]]) -> list[tuple[str, str]]:
    async def go() -> list[tuple[str, str]]:
        inspector = GroupInspector(NameServerClient(UNREACHABLE))
        inspector.routes = FakeRoutes()  # type: ignore[assignment]
        try:
            records = [client_record(**c) for c in clients]
            return [(w.client_id, str(w.queue)) for w in await inspector.weighted_queues(records)]
        finally:
            await inspector.close()

    return asyncio.run(go())


def test_the_gray_side_holds_the_normal_queues_its_clients_report_outside_the_gray_layout():
    clients = [
        {"client_id": "v2a", "queues": ["broker-a:TOPIC:0", "broker-a:TOPIC:4", "broker-a:TOPIC:7"]},
        {"client_id": "v2b", "queues": ["broker-a:TOPIC:2", "broker-a:TOPIC:6"]},
    ]
    assert weighted(clients) == [("v2b", "broker-a:TOPIC:2"), ("v2a", "broker-a:TOPIC:4"),
                                 ("v2b", "broker-a:TOPIC:6")]


def test_queues_of_unknown_layout_or_unparsable_are_left_out():
    clients = [{"client_id": "v2a", "queues": ["broker-a:OTHER:3", "broker-b:TOPIC:3", "odd", "broker-a:TOPIC:x"]}]
    assert weighted(clients) == []


def test_status_json_keeps_its_keys_and_adds_the_weight_and_the_weighted_queues():
    status = GroupStatus("GID", True, "hold", [], gray_weight=50,
                         weighted=[WeightedQueue("v2a", MessageQueue("TOPIC", "broker-a", 4))])
    shown = status.to_json()
    assert {"group", "gray_switch", "orphan_policy", "clients", "gray_backlog", "gray_queues",
            "stale_clients"} <= set(shown)
    assert shown["gray_weight"] == 50
    assert shown["weighted_queues"] == [{"client_id": "v2a", "topic": "TOPIC", "broker": "broker-a", "queue_id": 4}]
