"""Stock clients' reports reach the name server when they change, not at the next heartbeat interval: a consumer or
producer whose first answer flips it reports the new side before it is served, a consumer whose state or queues
change (its own flip or retirement, a gray consumer of its group joining or leaving) beats at once, and a failed
request of the batched heartbeats is logged once, not once per client."""

from __future__ import annotations

import asyncio
import doctest
import logging
from typing import Any

import pytest

from graymq.broker_ext.grpc_endpoint import report_checks
from graymq.broker_ext.grpc_endpoint.budgets import BudgetLimits, Budgets
from graymq.broker_ext.grpc_endpoint.consumer_sides import BrokerView, ConsumerSides
from graymq.broker_ext.grpc_endpoint.credentials import Caller
from graymq.broker_ext.grpc_endpoint.nameserver_session import NameServerSession
from graymq.broker_ext.grpc_endpoint.producer_sides import ProducerSides
from graymq.broker_ext.grpc_endpoint.registrations import NameServerSessions
from graymq.broker_ext.security.principals import DEV_PRINCIPAL
from graymq.broker_ext.topic_config import TopicConfig
from graymq.nameserver_api.records import HeartbeatAnswer
from graymq.protocol.errors import ServiceNotAvailableError
from tests.support.records import heartbeat_answer, heartbeat_answer_json

pytestmark = pytest.mark.unit

TOPIC, GROUP = "ORDERS", "GID_ORDERS"
NEVER_S = 1e6  # the heartbeat interval: a beat seen in these tests was not a periodic one


def test_doctests() -> None:
    assert doctest.testmod(report_checks).failed == 0


class FakeLink:
    """A name-server session that answers each client as ``answers`` says and records every heartbeat body."""

    def __init__(self) -> None:
        self.answers: dict[str, dict[str, Any]] = {}
        self.beats: list[dict[str, Any]] = []

    async def client_heartbeat(self, body: dict[str, Any]) -> HeartbeatAnswer:
        self.beats.append(body)
        return heartbeat_answer(role=body["role"], **self.answers.get(body["client_id"], {}))

    async def watch_client(self, body: dict[str, Any], timeout_s: float) -> HeartbeatAnswer:
        await asyncio.sleep(timeout_s)
        raise AssertionError("not watched one by one")

    async def unregister_client(self, group: str, client_id: str, role: str) -> None:
        pass

    def watch(self, membership: Any) -> None:
        pass

    def unwatch(self, membership: Any) -> None:
        pass

    async def close(self) -> None:
        pass

    def reported(self, client_id: str) -> list[tuple[str, int]]:
        """(state, queues) of each of ``client_id``'s heartbeats."""
        return [(b["state"], len(b["queues"])) for b in self.beats if b["client_id"] == client_id]


class Sessions(NameServerSessions):
    def __init__(self, link: FakeLink) -> None:
        super().__init__([], NEVER_S)
        self.link = link

    def _open(self, token: str | None) -> NameServerSession:
        return self.link  # type: ignore[return-value]


def consumer_sides(link: FakeLink) -> ConsumerSides:
    config = TopicConfig(TOPIC, queue_nums=6, gray_queue_nums=2)
    view = BrokerView(lambda topic: config, lambda group, topic: [], lambda group: frozenset())
    return ConsumerSides(["http://127.0.0.1:1"], view, broker_name="broker-a", claim=lambda caller: None,
                         interval_s=NEVER_S, expiry_s=60.0, sessions=Sessions(link))


async def reported(link: FakeLink, client_id: str, expected: tuple[str, int]) -> None:
    """Wait (a poll with a deadline far below the interval) until ``client_id`` reported ``expected``."""
    async with asyncio.timeout(10):
        while not link.reported(client_id) or link.reported(client_id)[-1] != expected:
            await asyncio.sleep(0.01)


def test_a_stock_consumers_changed_state_and_queues_reach_the_name_server_at_once() -> None:
    async def scenario() -> None:
        link = FakeLink()
        table = consumer_sides(link)
        v1, v2, v3 = (Caller(DEV_PRINCIPAL, None, f"orders-{v}@1@0@x") for v in ("v1", "v2", "v3"))
        link.answers = {v1.client_id: {"orphan_policy": "adopt"}, v2.client_id: {"desired_gray": True},
                        v3.client_id: {"desired_gray": True}}
        await table.register(v1, GROUP, [TOPIC])
        assert link.reported(v1.client_id) == [("NORMAL", 4), ("NORMAL", 6)]  # no gray consumer: it adopts
        await table.register(v2, GROUP, [TOPIC])
        # its first answer made it gray: reported before it is served, not at the next beat
        assert link.reported(v2.client_id) == [("NORMAL", 4), ("GRAY", 2)]
        await reported(link, v1.client_id, ("NORMAL", 4))  # a gray consumer came: the gray queues are its
        await table.registrations.forget(v2.client_id)
        await reported(link, v1.client_id, ("NORMAL", 6))  # it left: adopted again

        await table.register(v3, GROUP, [TOPIC])
        await reported(link, v1.client_id, ("NORMAL", 4))
        link.answers[v3.client_id] = {"desired_gray": True, "gray_retired": True}
        await table._apply(table.registrations.items[(v3.client_id, GROUP)],
                           heartbeat_answer(**link.answers[v3.client_id]))
        await reported(link, v3.client_id, ("RETIRED", 0))  # rolled back
        await reported(link, v1.client_id, ("NORMAL", 6))
        assert link.reported(v1.client_id) == [("NORMAL", 4), ("NORMAL", 6)] * 3  # a beat a change, no more
        await table.stop()

    asyncio.run(scenario())


def test_a_stock_producer_reports_the_flag_its_first_answer_gave_before_its_first_send() -> None:
    async def scenario() -> None:
        link = FakeLink()
        sides = ProducerSides(["http://127.0.0.1:1"], interval_s=NEVER_S, expiry_s=60.0,
                              budgets=Budgets(BudgetLimits()))
        sides.registrations.sessions = Sessions(link)
        caller = Caller(DEV_PRINCIPAL, None, "orders-v2@1@0@x")
        link.answers[caller.client_id] = {"desired_gray": True}
        assert (await sides.side(caller, TOPIC)).gray
        assert [b["gray"] for b in link.beats] == [False, True]
        link.answers[caller.client_id] = {"desired_gray": False}
        registration = sides.registrations.items[(caller.client_id, TOPIC)]
        await registration.apply(heartbeat_answer(role="producer", **link.answers[caller.client_id]))  # a watch's
        async with asyncio.timeout(10):
            while link.beats[-1]["gray"]:
                await asyncio.sleep(0.01)
        await sides.stop()

    asyncio.run(scenario())


class DownNameServer:
    """Refuses every batched heartbeat request until ``up``."""

    def __init__(self) -> None:
        self.up = False

    async def request(self, method: str, path: str, *, json: Any = None, **_: Any) -> Any:
        if not self.up:
            raise ServiceNotAvailableError("the name server is restarting")
        return {"results": [{"status_code": 200, "answer": heartbeat_answer_json()} for _ in json["heartbeats"]]}

    async def close(self) -> None:
        pass


def test_failed_heartbeat_requests_are_logged_once_until_one_goes_through(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> list[Any]:
        nameserver = DownNameServer()
        session = NameServerSession(nameserver)  # type: ignore[arg-type]
        failed = [await asyncio.gather(*(session.client_heartbeat({"client_id": f"c-{i}"}) for i in range(30)),
                                       return_exceptions=True) for _ in range(3)]
        nameserver.up = True
        await session.client_heartbeat({"client_id": "c-0"})
        await session.close()
        return [a for answers in failed for a in answers]

    with caplog.at_level(logging.INFO, logger="graymq.broker_ext.grpc_endpoint.nameserver_session"):
        answers = asyncio.run(main())
    assert all(isinstance(a, ServiceNotAvailableError) for a in answers)
    assert [(r.levelname, r.message.split(":")[0]) for r in caplog.records] == [
        ("WARNING", "stock clients' heartbeats to the name server failed"),
        ("INFO", "stock clients' heartbeats reach the name server again")]
