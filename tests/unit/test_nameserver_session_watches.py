"""The watches of a ``NameServerSession``: a round that failed goes again at once (a connection lost costs a flip no
wait), and waits ``WATCH_RETRY_S`` only when it failed again; a membership whose heartbeat failed stays watched; a
heartbeat's answer setting a membership back from what the round out asks about starts a new round; an answer to a
round sent before the client's own change acts on the group's settings, not on the client's flag; a change following
an answer makes stale only the requests sent before that answer came; a poll answered goes again alone, with the
answer's versions while each membership knows what the answer said."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from graymq.nameserver_api import session as session_module
from graymq.nameserver_api.membership import Membership
from graymq.nameserver_api.records import HeartbeatAnswer
from graymq.nameserver_api.session import PATH, WATCHES_PATH, NameServerSession
from graymq.protocol.errors import NameServerError
from tests.support.records import heartbeat_answer_json

pytestmark = pytest.mark.unit
GROUP = "GID_WATCHED"


class FakeNameServer:
    """Answers heartbeats (``heartbeats_fail``: fails them), fails the first ``failing`` watch rounds and holds the
    others; ``rounds`` records the client ids of every watch round, ``sent`` is set at each."""

    def __init__(self, failing: int = 0) -> None:
        self.failing = failing
        self.heartbeats_fail = False
        self.switch = True  # what heartbeats answer
        self.held: asyncio.Event | None = None  # set: heartbeats go on (until then each waits)
        self.holding = asyncio.Event()  # a heartbeat waits for ``held``
        self.rounds: list[list[str]] = []
        self.known: list[list[bool]] = []  # the gray switch each watch of a round knows
        self.sent = asyncio.Event()

    async def request(self, method: str, path: str, json: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        if path == WATCHES_PATH:
            self.rounds.append([watch["client_id"] for watch in json["watches"]])
            self.known.append([watch["known"]["gray_switch"] for watch in json["watches"]])
            self.sent.set()
            if len(self.rounds) <= self.failing:
                raise NameServerError(f"POST {path} failed on every name server: ReadError")
            await asyncio.sleep(timeout_s)
            return {"results": [{"status_code": 404, "error": "not found"} for _ in json["watches"]]}
        assert path == PATH
        if self.held is not None:
            self.holding.set()
            await self.held.wait()
        if self.heartbeats_fail:
            raise NameServerError(f"POST {path} failed on every name server: ReadTimeout")
        answers = [heartbeat_answer_json(client_id=b["client_id"], role=b["role"], gray_switch=self.switch)
                   for b in json["heartbeats"]]
        return {"results": [{"status_code": 200, "answer": answer} for answer in answers], "alive": []}

    async def rounds_sent(self, count: int) -> None:
        while len(self.rounds) < count:
            self.sent.clear()
            await asyncio.wait_for(self.sent.wait(), 10)

    async def beats_held(self) -> None:
        await asyncio.wait_for(self.holding.wait(), 10)

    async def close(self) -> None:
        pass


class WakingNameServer(FakeNameServer):
    """Holds every watch until ``wake(client_id)``: then a poll holding that client and knowing its switch on answers
    (its switch off); ``cancelled`` counts the polls given up by the client."""

    def __init__(self) -> None:
        super().__init__()
        self.woken: str | None = None
        self.waking = asyncio.Event()
        self.cancelled = 0
        self.since: list[dict[str, str]] = []  # each poll's

    def wake(self, client_id: str) -> None:
        self.woken = client_id
        self.waking.set()

    async def request(self, method: str, path: str, json: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        if path != WATCHES_PATH:
            return await super().request(method, path, json, timeout_s)
        watches = json["watches"]
        self.rounds.append([watch["client_id"] for watch in watches])
        self.known.append([watch["known"]["gray_switch"] for watch in watches])
        self.since.append(json["since"])
        self.sent.set()
        try:
            while not any(w["client_id"] == self.woken and w["known"]["gray_switch"] for w in watches):
                await self.waking.wait()
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return {"results": [{"status_code": 200, "answer": heartbeat_answer_json(
            client_id=w["client_id"], role=w["role"], gray_switch=w["client_id"] != self.woken)} for w in watches],
            "versions": {GROUP: f"r.{len(self.rounds)}"}}


def members(session: NameServerSession, count: int) -> list[Membership]:
    """``count`` memberships whose every heartbeat goes in full (their reports count the beats)."""
    async def on_update(answer: HeartbeatAnswer) -> None:
        return None

    beats = itertools.count()
    return [Membership(session, group=GROUP, client_id=f"c{i}", role="consumer", labels={}, declared_gray=None,
                       interval_s=1000, report=lambda: {"gray": False, "state": "NORMAL", "beat": next(beats)},
                       on_update=on_update) for i in range(count)]


def run(scenario: Any) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 30))


async def watched_after_a_failure(nameserver: FakeNameServer) -> tuple[NameServerSession, list[Membership]]:
    """Two memberships of a session, watched until the second round went out after the first failed."""
    session = NameServerSession(nameserver, interval_s=1000, window_s=0.0)  # type: ignore[arg-type]
    fleet = members(session, 2)
    for member in fleet:
        await member.beat()
        session.watch(member)
    await nameserver.rounds_sent(2)
    assert session.watch_failed
    return session, fleet


async def unwatched(session: NameServerSession, fleet: list[Membership]) -> None:
    for member in fleet:
        session.unwatch(member)
    await session.close()


def test_a_failed_round_of_watches_goes_again_at_once_and_a_second_failure_waits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_module, "WATCH_RETRY_S", 1000.0)  # a wait no round below may take

    async def scenario() -> None:
        nameserver = FakeNameServer(failing=2)
        session, fleet = await watched_after_a_failure(nameserver)  # the first failed: the second went at once
        await asyncio.sleep(10 * session_module.WINDOW_S)  # a round every WINDOW_S, were there no wait
        assert len(nameserver.rounds) == 2, "a second failure in a row waits before the next round"
        await unwatched(session, fleet)

    run(scenario)


def test_a_round_out_a_while_after_a_failed_one_turns_alive_beats_back_on_before_it_ends(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One connect timeout made a whole process beat in full until the next round ended, up to a watch's timeout."""
    monkeypatch.setattr(session_module, "WATCH_HELD_S", 0.5)

    async def scenario() -> None:
        nameserver = FakeNameServer(failing=1)
        session, fleet = await watched_after_a_failure(nameserver)  # the second round is held (1000 s)
        await asyncio.sleep(1.0)
        assert not session.watch_failed and len(nameserver.rounds) == 2
        await unwatched(session, fleet)

    run(scenario)


def test_a_membership_whose_heartbeat_failed_stays_in_the_rounds_of_watches() -> None:
    async def scenario() -> None:
        nameserver = FakeNameServer()
        session = NameServerSession(nameserver, interval_s=1000, window_s=0.0)  # type: ignore[arg-type]
        fleet = members(session, 3)
        for member in fleet:
            await member.beat()
        nameserver.heartbeats_fail = True
        assert await fleet[0].beat() is None
        for member in fleet:
            session.watch(member)
        await nameserver.rounds_sent(1)
        assert nameserver.rounds[-1] == ["c0", "c1", "c2"]
        for member in fleet:
            session.unwatch(member)
        await session.close()

    run(scenario)


def test_a_heartbeat_sent_before_the_round_out_that_sets_its_membership_back_starts_a_new_round() -> None:
    async def scenario() -> None:
        nameserver = FakeNameServer()
        session = NameServerSession(nameserver, interval_s=1000, window_s=0.0)  # type: ignore[arg-type]
        fleet = members(session, 2)
        for member in fleet:
            await member.beat()
        nameserver.held = asyncio.Event()
        nameserver.switch = False  # read before the switch came on (as the name server would have)
        beat = asyncio.ensure_future(fleet[0].beat())
        await nameserver.beats_held()
        for member in fleet:
            session.watch(member)
        await nameserver.rounds_sent(1)
        assert nameserver.known == [[True, True]]  # the switch on, as a watch's answer said
        nameserver.held.set()
        await beat  # answered after the round went out: it sets c0 back
        await nameserver.rounds_sent(2)
        assert nameserver.known[1] == [False, True]
        nameserver.switch = True
        await fleet[0].beat()  # sent after the round out, so newer than what it asks: that round answers it
        await asyncio.sleep(10 * session_module.WINDOW_S)  # a new round would have gone by now
        assert len(nameserver.rounds) == 2
        for member in fleet:
            session.unwatch(member)
        await session.close()

    run(scenario)


def test_a_watch_answer_older_than_the_clients_change_acts_on_the_groups_settings_not_on_its_flag() -> None:
    async def scenario() -> None:
        applied: list[tuple[str, bool, str | None]] = []

        async def on_update(answer: HeartbeatAnswer) -> None:
            applied.append(("update", answer.gray_switch, answer.desired_lane))

        async def on_settings(answer: HeartbeatAnswer) -> None:
            applied.append(("settings", answer.gray_switch, answer.desired_lane))

        session = NameServerSession(FakeNameServer(), interval_s=1000, window_s=0.0)  # type: ignore[arg-type]
        member = Membership(session, group=GROUP, client_id="c0", role="consumer", labels={}, declared_gray=None,
                            interval_s=1000, report=lambda: {"gray": False, "state": "NORMAL"}, on_update=on_update,
                            on_settings=on_settings)
        await member.beat()
        body, sent_epoch = member.watch_body(), member.epoch
        assert body is not None
        member.changed()  # the client changed after the round was sent
        switched = HeartbeatAnswer.from_json(heartbeat_answer_json(client_id="c0", gray_switch=False,
                                                                   desired_gray=True, desired_lane="gray"))
        await member.watched(body, switched, sent_epoch)
        assert applied[1:] == [("settings", False, "gray")]
        await member.watched(member.watch_body() or {}, HeartbeatAnswer.from_json(heartbeat_answer_json(
            client_id="c0")), member.epoch)
        assert applied[2:] == [("update", True, None)]
        await session.close()

    run(scenario)


def test_a_change_following_an_answer_makes_stale_only_the_requests_sent_before_that_answer_came() -> None:
    async def scenario() -> None:
        applied: list[tuple[str, bool]] = []

        async def on_update(answer: HeartbeatAnswer) -> None:
            applied.append(("update", answer.gray_switch))

        async def on_settings(answer: HeartbeatAnswer) -> None:
            applied.append(("settings", answer.gray_switch))

        def answer(switch: bool) -> HeartbeatAnswer:
            return HeartbeatAnswer.from_json(heartbeat_answer_json(client_id="c0", gray_switch=switch))

        beats = itertools.count()
        session = NameServerSession(FakeNameServer(), interval_s=1000, window_s=0.0)  # type: ignore[arg-type]
        member = Membership(session, group=GROUP, client_id="c0", role="consumer", labels={}, declared_gray=None,
                            interval_s=1000, report=lambda: {"gray": False, "state": "NORMAL", "beat": next(beats)},
                            on_update=on_update, on_settings=on_settings)  # every beat in full
        await member.beat()
        before, sent_before = member.watch_body() or {}, member.epoch  # a round out when the next answer comes
        await member.beat()
        since, sent_since = member.watch_body() or {}, member.epoch  # a round sent after it came
        member.changed(after=member.answer_epoch)  # a flip following that answer
        await member.watched(before, answer(False), sent_before)
        await member.watched(since, answer(False), sent_since)
        assert applied[2:] == [("settings", False), ("update", False)]
        mine, sent_mine = member.watch_body() or {}, member.epoch
        member.changed()  # a change of the client's own: every answer to a request sent before it is stale
        await member.watched(mine, answer(True), sent_mine)
        assert applied[4:] == [("settings", True)]
        await session.close()

    run(scenario)


def test_a_poll_answered_goes_again_alone_and_the_other_polls_stay_out() -> None:
    """A change wakes only the polls holding its clients: cancelling the others with the first answer had their
    clients learn it a round gap and a first read later (seconds for a flip at 5,000 clients)."""
    async def scenario() -> None:
        nameserver = WakingNameServer()
        session = NameServerSession(nameserver, interval_s=1000, window_s=0.0, max_batch=2)  # type: ignore[arg-type]
        fleet = members(session, 4)
        for member in fleet:
            await member.beat()
            session.watch(member)
        await nameserver.rounds_sent(2)
        assert sorted(nameserver.rounds) == [["c0", "c1"], ["c2", "c3"]]
        nameserver.wake("c2")
        await nameserver.rounds_sent(3)
        assert (nameserver.rounds[2], nameserver.known[2]) == (["c2", "c3"], [False, True])
        await asyncio.sleep(10 * session_module.WINDOW_S)
        assert len(nameserver.rounds) == 3 and nameserver.cancelled == 0, "the poll of c0 and c1 stays out"
        assert [member.last.gray_switch for member in fleet if member.last is not None] == [True, True, False, True]
        assert nameserver.since == [{}, {}, {GROUP: "r.2"}]  # the answer's versions: each knows what it vouched for
        await unwatched(session, fleet)

    run(scenario)
