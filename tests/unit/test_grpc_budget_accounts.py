"""The gRPC endpoint's budgets and batched heartbeats, without a network: a refused claim holds nothing, a
registration gives its budget and its shared session back when it goes, heartbeats due together go out as one
request with a refused one failing alone, a name server without the batched route gets single heartbeats, and one
long poll watches many memberships."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from graymq.broker_ext.grpc_endpoint.budgets import Budget, BudgetLimits, Budgets
from graymq.broker_ext.grpc_endpoint.nameserver_session import NameServerSession
from graymq.broker_ext.grpc_endpoint.registrations import NameServerSessions, Registrations
from graymq.broker_ext.grpc_endpoint.status import RocketMQStatusError
from graymq.nameserver_api.client import ForbiddenError, NotFoundError
from graymq.nameserver_api.records import HeartbeatAnswer
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from tests.support.records import heartbeat_answer, heartbeat_answer_json

pytestmark = pytest.mark.unit


def test_a_claim_over_one_budget_holds_none_of_the_others_and_is_counted() -> None:
    budgets = Budgets(BudgetLimits(streams_per_principal=5, streams_per_connection=1))
    per_principal, per_connection = (Budget.STREAMS_PER_PRINCIPAL, "orders"), (Budget.STREAMS_PER_CONNECTION, "c1")
    budgets.take(per_principal, per_connection)
    with pytest.raises(RocketMQStatusError) as refused:
        budgets.take(per_principal, per_connection)
    assert refused.value.code == v2.TOO_MANY_REQUESTS
    assert "GRAYMQ_BROKER_GRPC_MAX_STREAMS_PER_CONNECTION" in refused.value.message
    assert budgets.held(*per_principal) == 1 and budgets.refused == {"streams_per_connection": 1}
    budgets.give_back(per_principal, per_connection)
    assert budgets.held(*per_principal) == 0 and not budgets._held  # nothing kept for a gone holder


class Closing:
    def __init__(self, session: Any) -> None:
        self.session = session
        self.used_at = 0.0
        self.closed = False

    async def close(self) -> None:
        self.closed = True


def test_registrations_hold_their_principals_budget_and_share_a_session_per_credential() -> None:
    async def main() -> None:
        budgets = Budgets(BudgetLimits(registrations_per_principal=2))
        table: Registrations[Closing] = Registrations("producer", expiry_s=60, budgets=budgets,
                                                      sessions=NameServerSessions(["http://127.0.0.1:1"]))
        a = table.add(("c1", "T1"), "orders", "tok", Closing)
        b = table.add(("c2", "T1"), "orders", "tok", Closing)
        assert a.session is b.session
        with pytest.raises(RocketMQStatusError):
            table.add(("c3", "T1"), "orders", "tok", Closing)
        assert ("c3", "T1") not in table.items
        other = table.add(("c3", "T1"), "payments", "tok2", Closing)  # another principal is not held up
        assert other.session is not a.session
        await table.forget("c1")
        assert a.closed and budgets.held(Budget.REGISTRATIONS_PER_PRINCIPAL, "orders") == 1
        table.add(("c4", "T1"), "orders", "tok", Closing)
        await table.stop()
        assert not table.items and not budgets._held and not table.sessions._clients

    asyncio.run(main())


class FakeNameServer:
    """Answers ``POST /v1/clients/heartbeats`` (or 404 for it), refusing client ids starting with ``theirs``."""

    def __init__(self, batched: bool = True) -> None:
        self.batched = batched
        self.batches: list[int] = []
        self.singles = 0

    async def request(self, method: str, path: str, *, json: Any = None, **_: Any) -> Any:
        if not self.batched:
            raise NotFoundError(f"{method} {path}: not found")
        self.batches.append(len(json["heartbeats"]))
        return {"results": [{"status_code": 403, "error": "FORBIDDEN", "detail": "taken"}
                            if b["client_id"].startswith("theirs") else
                            {"status_code": 200, "answer": heartbeat_answer_json(client_id=b["client_id"],
                                                                                desired_gray=True)}
                            for b in json["heartbeats"]]}

    async def client_heartbeat(self, body: dict[str, Any]) -> HeartbeatAnswer:
        self.singles += 1
        return heartbeat_answer(client_id=body["client_id"], desired_gray=False)

    async def close(self) -> None:
        pass


def test_heartbeats_due_together_go_out_as_one_request_and_a_refused_one_fails_alone() -> None:
    async def main() -> list[Any]:
        nameserver = FakeNameServer()
        link = NameServerSession(nameserver)  # type: ignore[arg-type]
        beats = [link.client_heartbeat({"client_id": f"c-{i}"}) for i in range(150)]
        answers = await asyncio.gather(*beats, link.client_heartbeat({"client_id": "theirs"}),
                                       return_exceptions=True)
        assert nameserver.batches == [100, 51] and link.requests == 2
        await link.close()
        return answers

    answers = asyncio.run(main())
    assert [a.client_id for a in answers[:150]] == [f"c-{i}" for i in range(150)]
    assert isinstance(answers[150], ForbiddenError) and answers[150].permanent


def test_a_name_server_without_the_batched_route_gets_single_heartbeats() -> None:
    async def main() -> None:
        nameserver = FakeNameServer(batched=False)
        link = NameServerSession(nameserver)  # type: ignore[arg-type]
        answers = await asyncio.gather(*(link.client_heartbeat({"client_id": f"c-{i}"}) for i in range(3)))
        assert [a.client_id for a in answers] == ["c-0", "c-1", "c-2"] and nameserver.singles == 3
        assert (await link.client_heartbeat({"client_id": "later"})).client_id == "later"
        assert nameserver.singles == 4
        await link.close()

    asyncio.run(main())


class WatchingNameServer(FakeNameServer):
    """Holds ``POST /v1/clients/watches`` until ``change`` names a client whose desired flag is now gray."""

    def __init__(self) -> None:
        super().__init__()
        self.watch_sizes: list[int] = []
        self.gray: set[str] = set()
        self.changed = asyncio.Event()

    async def request(self, method: str, path: str, *, json: Any = None, **_: Any) -> Any:
        if not path.endswith("/watches"):
            return await super().request(method, path, json=json)
        self.watch_sizes.append(len(json["watches"]))
        if not any(w["client_id"] in self.gray for w in json["watches"]):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), json["timeout_s"])
        self.changed.clear()
        return {"results": [{"status_code": 200, "answer": heartbeat_answer_json(
            **{**w["known"], "client_id": w["client_id"], "desired_gray": w["client_id"] in self.gray})}
                            for w in json["watches"]]}


class Member:
    """What the session reads of a membership: its watch body, its epoch, and what it is told."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self.epoch = 0
        self.seen: list[bool] = []

    def watch_body(self) -> dict[str, Any]:
        return {"group": "G", "client_id": self.client_id, "role": "consumer",
                "known": {"desired_gray": bool(self.seen and self.seen[-1])}}

    async def watched(self, body: dict[str, Any], response: HeartbeatAnswer, epoch: int) -> None:
        if response.desired_gray != body["known"]["desired_gray"]:
            self.seen.append(response.desired_gray)


def test_one_long_poll_watches_many_memberships_and_a_change_reaches_the_one_it_concerns() -> None:
    async def main() -> None:
        nameserver = WatchingNameServer()
        session = NameServerSession(nameserver, interval_s=0.2)  # type: ignore[arg-type]
        members = [Member(f"c-{i}") for i in range(150)]
        for member in members:
            session.watch(member)  # type: ignore[arg-type]
        while len(nameserver.watch_sizes) < 2:
            await asyncio.sleep(0.01)
        assert sorted(nameserver.watch_sizes) == [50, 100]  # 150 memberships, two long polls
        nameserver.gray.add("c-7")
        nameserver.changed.set()
        for _ in range(200):
            if members[7].seen:
                break
            await asyncio.sleep(0.01)
        assert members[7].seen == [True] and not any(m.seen for m in members if m is not members[7])
        session.unwatch(members[7])  # type: ignore[arg-type]
        await session.close()

    asyncio.run(main())
