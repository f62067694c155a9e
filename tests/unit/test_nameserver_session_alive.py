"""Alive beats of a ``NameServerSession``: a fleet of memberships whose reports do not change sends their keys alone
after the first full heartbeat, and a full one every ``FULL_EVERY``; a changed report, an alive beat refused with 404,
a failing watch or a name server without alive beats get full heartbeats; a membership acts on its latest answer at
each beat all the same."""

from __future__ import annotations

import asyncio
import doctest
import logging
from typing import Any

import pytest

from graymq.broker_ext.grpc_endpoint.nameserver_session import NameServerSession as StockClientsSession
from graymq.nameserver_api import session as session_module
from graymq.nameserver_api.membership import Membership
from graymq.nameserver_api.records import HeartbeatAnswer
from graymq.nameserver_api.session import FULL_EVERY, PATH, WATCHES_PATH, NameServerSession
from graymq.protocol.errors import BadRequestError, ServiceNotAvailableError
from tests.support.records import heartbeat_answer_json

pytestmark = pytest.mark.unit
GROUP = "GID_FLEET"


def test_doctests() -> None:
    assert doctest.testmod(session_module).failed == 0


class FakeNameServer:
    """Answers batched heartbeats as a name server would (``old``: one from before alive beats; ``ids``: one giving
    alive ids, a client's the number in its id plus 1000), records each request's full heartbeats and alive entries
    (``alive_ids``: and its alive ids); ``refused``: client id -> the status its alive beats get."""

    def __init__(self, old: bool = False, ids: bool = False) -> None:
        self.old = old
        self.ids = ids
        self.topics: dict[str, Any] = {}  # what a full heartbeat's answer says of the clients' topics
        self.refused: dict[str, int] = {}
        self.requests: list[tuple[list[str], list[dict[str, Any]]]] = []  # (full heartbeats' ids, alive entries)
        self.alive_ids: list[list[int]] = []
        self.watch_error: Exception | None = None
        self.watched = asyncio.Event()

    async def request(self, method: str, path: str, json: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        if path == WATCHES_PATH:
            return await self._watch(json, timeout_s)
        assert path == PATH
        full, alive = json["heartbeats"], json.get("alive", [])
        self.requests.append(([b["client_id"] for b in full], alive))
        if self.old and not full:
            raise BadRequestError(f"POST {PATH}: heartbeats: List should have at least 1 item")
        self.alive_ids.append(json.get("alive_ids", []))
        results = [{"status_code": 200, "answer": heartbeat_answer_json(client_id=b["client_id"], role=b["role"],
                                                                        topics=self.topics),
                    **({"alive_id": alive_id(b["client_id"])} if self.ids else {})} for b in full]
        if self.old:
            return {"results": results}
        statuses = [self.refused.get(entry["client_id"], 200) for entry in alive]
        answer = {"results": results, "alive": [{"status_code": code} if code == 200 else
                                                {"status_code": code, "error": "not found", "detail": None}
                                                for code in statuses]}
        if self.ids and "alive_ids" in json:
            refused = {alive_id(client_id) for client_id in self.refused}
            answer["alive_missing"] = [i for i in json["alive_ids"] if i in refused]
        return answer

    async def _watch(self, json: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        self.watched.set()
        if self.watch_error is not None:
            raise self.watch_error
        await asyncio.sleep(timeout_s)
        return {"results": [{"status_code": 404, "error": "not found"} for _ in json["watches"]]}

    async def close(self) -> None:
        pass

    def last(self) -> tuple[list[str], list[str]]:
        full, alive = self.requests[-1]
        return full, [entry["client_id"] for entry in alive]


def alive_id(client_id: str) -> int:
    return 1000 + int(client_id[1:])


class Fleet:
    """``count`` consumers' memberships over one session; ``reports`` holds each one's report."""

    def __init__(self, nameserver: FakeNameServer, count: int, kind: type[NameServerSession] = NameServerSession,
                 spread: bool = False) -> None:
        self.nameserver = nameserver
        self.session = kind(nameserver, interval_s=1000, window_s=0.0, spread_full=spread)  # type: ignore[arg-type]
        self.ids = [f"c{i:02d}" for i in range(count)]
        self.reports: dict[str, dict[str, Any]] = {c: {"gray": False, "state": "NORMAL", "queues": ["q0"],
                                                       "health": {"normal": {"consumed": 0}}} for c in self.ids}
        self.updates: dict[str, int] = dict.fromkeys(self.ids, 0)
        self.lane_maps: dict[str, list[dict[str, dict[str, int]]]] = {c: [] for c in self.ids}  # told at each update
        self.members = [self._member(client_id) for client_id in self.ids]

    def _member(self, client_id: str) -> Membership:
        async def on_update(answer: HeartbeatAnswer) -> None:
            assert answer.client_id == client_id
            self.updates[client_id] += 1
            self.lane_maps[client_id].append(answer.topic_lanes)

        return Membership(self.session, group=GROUP, client_id=client_id, role="consumer", labels={},
                          declared_gray=None, interval_s=1000, report=lambda: dict(self.reports[client_id]),
                          on_update=on_update)

    async def beat(self) -> list[HeartbeatAnswer | None]:
        """One beat of every membership, together (one request, and one more for what it sends again)."""
        return await asyncio.gather(*(m.beat() for m in self.members))


def run(scenario: Any) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 30))


@pytest.mark.parametrize("kind", [NameServerSession, StockClientsSession])
def test_a_fleet_with_unchanged_reports_beats_alive_after_its_first_full_heartbeat_and_in_full_every_few(
        kind: type[NameServerSession]) -> None:
    async def scenario() -> None:
        nameserver = FakeNameServer()
        fleet = Fleet(nameserver, 20, kind)
        for _ in range(2 * (FULL_EVERY + 1)):
            answers = await fleet.beat()
            assert all(isinstance(answer, HeartbeatAnswer) for answer in answers)
        shapes = [(len(full), len(alive)) for full, alive in nameserver.requests]
        assert shapes == ([(20, 0)] + [(0, 20)] * FULL_EVERY) * 2
        assert fleet.updates == dict.fromkeys(fleet.ids, 2 * (FULL_EVERY + 1))  # acted on at every beat
        assert fleet.session.alive_beats == 20 * 2 * FULL_EVERY

    run(scenario)


def test_clients_started_together_spread_their_full_heartbeats_over_a_cycle() -> None:
    """After the first full heartbeat each client's cycle starts at a phase of its key: later beats carry a share of
    the fleet's full heartbeats each, a client's full ones stay FULL_EVERY alive beats apart."""
    async def scenario() -> None:
        nameserver = FakeNameServer(ids=True)
        fleet = Fleet(nameserver, 60, spread=True)
        beats = 3 * (FULL_EVERY + 1)
        for _ in range(beats):
            await fleet.beat()
        fulls = [set(full) for full, _ in nameserver.requests]
        assert len(fulls) == beats and fulls[0] == set(fleet.ids)
        assert all(0 < len(full) < 30 for full in fulls[1:])  # never the whole fleet again, nor half of it
        for client_id in fleet.ids:
            went = [beat for beat, full in enumerate(fulls) if client_id in full]
            assert 1 <= went[1] <= FULL_EVERY + 1
            assert all(b - a == FULL_EVERY + 1 for a, b in zip(went[1:], went[2:], strict=False))

    run(scenario)


def test_a_changed_report_goes_full_and_a_changed_health_rides_in_its_alive_entry() -> None:
    async def scenario() -> None:
        nameserver = FakeNameServer()
        fleet = Fleet(nameserver, 4)
        await fleet.beat()
        fleet.reports["c01"]["queues"] = ["q0", "q1"]
        fleet.reports["c02"]["health"] = {"normal": {"consumed": 7}}
        await fleet.beat()
        full, alive = nameserver.requests[-1]
        assert full == ["c01"]
        assert alive == [{"group": GROUP, "client_id": c, "role": "consumer"} for c in ("c00",)] + [
            {"group": GROUP, "client_id": "c02", "role": "consumer", "health": {"normal": {"consumed": 7}}},
            {"group": GROUP, "client_id": "c03", "role": "consumer"}]
        await fleet.beat()
        assert nameserver.last() == ([], ["c00", "c01", "c02", "c03"])
        assert "health" not in nameserver.requests[-1][1][2]  # stored with the alive beat before

    run(scenario)


def test_an_alive_beat_acts_on_the_latest_answer_without_retelling_its_lane_maps() -> None:
    """A slot taken or given back wakes no watch, so the lane maps of the latest answer are as old as it is: an alive
    beat acting on it again leaves them out (told again, an old map would undo a newer one heard elsewhere, as a
    broker's endpoint hears every stock client's); the next full heartbeat tells the maps of its time."""
    async def scenario() -> None:
        nameserver = FakeNameServer()
        fleet = Fleet(nameserver, 3)
        nameserver.topics = {"T": {"queue_nums": 6, "gray_queue_nums": 2, "lanes": {"v2": 0, "v3": 1}}}
        await fleet.beat()
        nameserver.topics = {"T": {"queue_nums": 6, "gray_queue_nums": 2, "lanes": {"v2": 0}}}  # v3 gave it back
        for _ in range(FULL_EVERY + 1):
            await fleet.beat()
        assert [full for full, _ in nameserver.requests] == [fleet.ids] + [[]] * FULL_EVERY + [fleet.ids]
        told = [{"T": {"v2": 0, "v3": 1}}] + [{}] * FULL_EVERY + [{"T": {"v2": 0}}]
        assert fleet.lane_maps == dict.fromkeys(fleet.ids, told)

    run(scenario)


def test_an_alive_beat_refused_with_404_sends_the_full_heartbeat_at_once() -> None:
    async def scenario() -> None:
        nameserver = FakeNameServer()
        fleet = Fleet(nameserver, 3)
        await fleet.beat()
        nameserver.refused["c01"] = 404
        answers = await fleet.beat()
        assert [(full, [e["client_id"] for e in alive]) for full, alive in nameserver.requests[1:]] == [
            ([], ["c00", "c01", "c02"]), (["c01"], [])]
        assert answers[1] is not None and answers[1].client_id == "c01"
        del nameserver.refused["c01"]
        await fleet.beat()
        assert nameserver.last() == ([], ["c00", "c01", "c02"])

    run(scenario)


def test_a_name_server_without_alive_beats_gets_full_heartbeats_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        nameserver = FakeNameServer(old=True)
        fleet = Fleet(nameserver, 3)
        await fleet.beat()
        answers = await fleet.beat()  # refused (422): sent again in full
        assert all(answer is not None for answer in answers)
        for _ in range(3):
            await fleet.beat()
        assert [len(alive) for _, alive in nameserver.requests] == [0, 3, 0, 0, 0, 0]
        assert [len(full) for full, _ in nameserver.requests] == [3, 0, 3, 3, 3, 3]

    with caplog.at_level(logging.INFO, logger=session_module.__name__):
        run(scenario)
    assert len([r for r in caplog.records if "takes no alive beats" in r.message]) == 1


def test_a_name_server_answering_without_alive_gets_the_alive_ones_again_in_full() -> None:
    async def scenario() -> None:
        nameserver = FakeNameServer(old=True)
        fleet = Fleet(nameserver, 3)
        await fleet.beat()
        fleet.reports["c00"]["gray"] = True  # one full heartbeat in the request: the old name server answers it
        await fleet.beat()
        assert [(full, len(alive)) for full, alive in nameserver.requests[1:]] == [(["c00"], 2), (["c01", "c02"], 0)]
        await fleet.beat()
        assert nameserver.last() == (["c00", "c01", "c02"], [])

    run(scenario)


def test_a_failing_watch_turns_alive_beats_off() -> None:
    async def scenario() -> None:
        nameserver = FakeNameServer()
        fleet = Fleet(nameserver, 3)
        await fleet.beat()
        await fleet.beat()
        assert nameserver.last() == ([], ["c00", "c01", "c02"])
        nameserver.watch_error = ServiceNotAvailableError("name server down")
        for member in fleet.members:
            member.start(watch=False)
            fleet.session.watch(member)
        while not fleet.session.watch_failed:
            await asyncio.sleep(0.01)
        await fleet.beat()
        assert nameserver.last() == (["c00", "c01", "c02"], [])
        for member in fleet.members:
            fleet.session.unwatch(member)
            await member.stop()
        await fleet.session.close()

    run(scenario)


def test_with_alive_ids_a_fleets_unchanged_clients_go_as_ids_and_a_changed_health_by_key_in_the_same_request(
        ) -> None:
    async def scenario() -> None:
        nameserver = FakeNameServer(ids=True)
        fleet = Fleet(nameserver, 20)
        for _ in range(2 * (FULL_EVERY + 1)):
            await fleet.beat()
        assert [(len(full), len(alive), len(ids)) for (full, alive), ids in zip(
            nameserver.requests, nameserver.alive_ids, strict=True)] == ([(20, 0, 0)] + [(0, 0, 20)] * FULL_EVERY) * 2
        assert nameserver.alive_ids[-1] == [alive_id(c) for c in fleet.ids]
        assert fleet.session.alive_beats == 20 * 2 * FULL_EVERY
        assert fleet.updates == dict.fromkeys(fleet.ids, 2 * (FULL_EVERY + 1))
        await fleet.beat()  # after a full heartbeat
        fleet.reports["c03"]["health"] = {"normal": {"consumed": 9}}
        fleet.reports["c04"]["queues"] = []
        await fleet.beat()
        assert nameserver.requests[-1] == (["c04"], [{"group": GROUP, "client_id": "c03", "role": "consumer",
                                                      "health": {"normal": {"consumed": 9}}}])
        assert nameserver.alive_ids[-1] == [alive_id(c) for c in fleet.ids if c not in ("c03", "c04")]
        await fleet.beat()
        assert nameserver.requests[-1] == ([], []) and nameserver.alive_ids[-1] == [alive_id(c) for c in fleet.ids]

    run(scenario)


def test_an_alive_id_the_name_server_misses_sends_that_clients_full_heartbeat_at_once() -> None:
    async def scenario() -> None:
        nameserver = FakeNameServer(ids=True)
        fleet = Fleet(nameserver, 3)
        await fleet.beat()
        nameserver.refused["c01"] = 404
        answers = await fleet.beat()
        assert nameserver.requests[1:] == [([], []), (["c01"], [])]
        assert nameserver.alive_ids[1:] == [[1000, 1001, 1002], []]
        assert answers[1] is not None and answers[1].client_id == "c01"

    run(scenario)


def test_a_name_server_ignoring_alive_ids_gets_the_keys_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    class IgnoresIds(FakeNameServer):
        async def request(self, method: str, path: str, json: dict[str, Any], timeout_s: float) -> dict[str, Any]:
            answer = await super().request(method, path, json, timeout_s)
            answer.pop("alive_missing", None)
            return answer

    async def scenario() -> None:
        nameserver = IgnoresIds(ids=True)
        fleet = Fleet(nameserver, 3)
        for _ in range(4):
            await fleet.beat()
        assert [len(ids) for ids in nameserver.alive_ids] == [0, 3, 0, 0, 0]
        assert [len(alive) for _, alive in nameserver.requests] == [0, 0, 3, 3, 3]
        assert fleet.updates == dict.fromkeys(fleet.ids, 4)

    with caplog.at_level(logging.INFO, logger=session_module.__name__):
        run(scenario)
    assert len([r for r in caplog.records if "takes no alive ids" in r.message]) == 1
