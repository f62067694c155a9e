"""The broker's side of a large group: the consumer list is encoded once per change of the group, and the
releases of queue leases reach the members once per window, not once each."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from graymq.broker_ext.groups import consumer_manager as cm
from graymq.broker_ext.groups.consumer_manager import ConsumerManager
from graymq.broker_ext.processors.client_processor import ClientProcessor
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.remoting import parse_body, parse_envelope

pytestmark = pytest.mark.unit


class RecordingConnection:
    """Stands in for a client's connection: records the one-way notices the broker pushes."""

    is_closed = False

    def __init__(self) -> None:
        self.attributes: dict[str, object] = {}
        self.notices: list[str] = []

    def send_oneway(self, method: int, body: Any) -> None:
        assert method == pb.NOTIFY_GROUP_CHANGED
        self.notices.append(body.reason)


def consumer_data(group: str, gray: bool = False, topics: tuple[str, ...] = ("T",), weight: int = 0
                  ) -> pb.ConsumerData:
    return pb.ConsumerData(group=group, gray_flag=gray, gray_switch=True, gray_weight=weight,
                           subscriptions=[pb.SubscriptionData(topic=t, sub_string="*") for t in topics])


def listing(processor: ClientProcessor, group: str) -> tuple[bytes, pb.ConsumerListResponse]:
    encoded = processor.consumer_list(pb.ConsumerListRequest(consumer_group=group))
    response = parse_body(parse_envelope(encoded), response=True)
    assert isinstance(response, pb.ConsumerListResponse)
    return encoded, response


def test_consumer_list_is_encoded_once_per_change_of_the_group() -> None:
    manager = ConsumerManager(expiry_s=60)
    processor = ClientProcessor(topics=None, consumers=manager, locks=None)  # type: ignore[arg-type]
    manager.register("a", None, consumer_data("G"))
    first, response = listing(processor, "G")
    assert [c.client_id for c in response.clients] == ["a"]

    manager.register("a", None, consumer_data("G"))  # a heartbeat that changes nothing
    assert listing(processor, "G")[0] is first

    manager.register("b", None, consumer_data("G", gray=True))
    _, response = listing(processor, "G")
    assert [(c.client_id, c.gray_flag) for c in response.clients] == [("a", False), ("b", True)]

    manager.register("b", None, consumer_data("G", gray=True, topics=("T", "U")))
    _, response = listing(processor, "G")
    assert [list(c.topics) for c in response.clients] == [["T"], ["T", "U"]]

    manager.register("a", None, consumer_data("G", weight=50))
    assert manager.groups["G"].listing is None  # the weight changed: listed again on the next request

    manager.unregister("G", "b", "test")
    _, response = listing(processor, "G")
    assert [c.client_id for c in response.clients] == ["a"]


def test_releases_reach_every_member_once_per_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cm, "RELEASE_NOTICE_WINDOW_S", 0.01)

    async def scenario() -> None:
        manager = ConsumerManager(expiry_s=60)
        members = {cid: RecordingConnection() for cid in ("a", "b", "c")}
        for cid, conn in members.items():
            manager.register(cid, conn, consumer_data("G"))  # type: ignore[arg-type]
        for conn in members.values():
            conn.notices.clear()

        manager.notify_group("G", "a released q1")
        assert [conn.notices for conn in members.values()] == [["a released q1"]] * 3  # the first: at once
        manager.notify_group("G", "b released q2")
        manager.notify_group("G", "c released q3")
        assert all(len(conn.notices) == 1 for conn in members.values())  # the others wait for the window
        while len(members["a"].notices) < 2:
            await asyncio.sleep(0.005)
        assert members["a"].notices[1] == "b released q2 and 1 more releases"
        await asyncio.sleep(0.05)  # the window the trailing notice opened ends with nothing held
        assert [len(conn.notices) for conn in members.values()] == [2, 2, 2]

        manager.register("d", RecordingConnection(), consumer_data("G"))  # type: ignore[arg-type]
        assert all(conn.notices[-1].startswith("client d") for conn in members.values())  # joins: never held

    asyncio.run(scenario())
