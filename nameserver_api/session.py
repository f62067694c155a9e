"""Heartbeats and watches of many memberships, batched over one name-server client (a ``MembershipLink``).

The memberships beat on one grid of the interval (``Membership(aligned=True)``), so those due together arrive here
within ``window_s`` of each other (a broker's stock clients: ``WINDOW_S``; a ``ClientInstance``'s clients: one
turn of the loop) and go out as one ``POST /v1/clients/heartbeats`` of at most ``max_batch``: one request per
session and interval for a whole fleet's registrations, where each used to send its own. Each heartbeat in it is
checked and stored as a single one would be; one refused alone (403: another principal's client, a group beyond
the rights; 409: no free slot for a lane) fails alone, with the error a single heartbeat gets.

Their watches are one long poll per ``max_batch`` memberships (``POST /v1/clients/watches``), answered as soon as
one of them changes, when each changed membership acts on its answer as on its own watch's (``Membership.watched``)
and that poll goes again (the others stay out), sent with the answer's ``versions`` while each of its memberships
knows what the answer said (the name server then reads nothing before it waits; unchanged watches are answered 304).
A membership added or gone starts every poll again (a round), and so does the answer of a heartbeat sent before the
poll out now that differs from what the poll says its membership knows (a heartbeat the name server read before a
switch flipped, answered after the watch carried the flip, sets the client back: the next poll gets the flip again
at once, not at the poll's end). A round whose poll failed goes again at once, and after ``WATCH_RETRY_S`` when it
failed again (the heartbeats carry changes meanwhile): one connection lost costs a flip no wait. A name server
without the batched routes (404 for the route itself) gets single heartbeats and watches. Unregistrations go through
as they are, at once: a client stopped leaves its group then, while one whose process died goes stale as a single
one would.

A membership whose report is the one its last full heartbeat carried (the name server answered it 200) beats
"alive": the ``alive_id`` that answer gave, under the request's ``alive_ids`` (an int: a process's unchanged clients
go in one request, refreshed by one statement), or its key under ``alive`` when its health changed (or the name
server gives no ids); the name server refreshes its ``last_seen`` and computes no answer, and the beat returns None
(``MembershipLink``: act on the latest answer again). A consumer's ``health``, which grows with every message
consumed, rides along in the alive entry rather than making the report differ. A full
heartbeat still goes out after ``FULL_EVERY`` alive ones in a row (its answer retries what a missed watch would
have carried), whenever the report changed, while this session's watches fail (they alone carry changes to alive
clients), and at once after an alive beat refused with 404 (the client expired, or the name server forgot it). A
name server without alive beats (422, or an answer without ``alive``) gets full heartbeats only.

A membership whose report changed beats at once rather than on the grid (``poke``); beats due in the same moment
share a request here as the periodic ones do, one request of a session is in flight at a time and a membership has
one beat in flight at most, so a burst of changes costs a few requests, not one per change. A failed request is
logged once until one goes through again (its memberships log nothing: ``Membership(log_failures=False)``); each
membership's report goes again with its next beat.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from dataclasses import dataclass, field
from typing import Any

from graymq.nameserver_api.client import WATCH_GRACE_S, NameServerClient, NotFoundError, status_error
from graymq.nameserver_api.membership import WATCH_RETRY_S, WATCH_S, Membership
from graymq.nameserver_api.records import HeartbeatAnswer
from graymq.protocol.aio import cancel_and_wait
from graymq.protocol.errors import BadRequestError, GrayMQError

log = logging.getLogger(__name__)

WINDOW_S = 0.02  # heartbeats arriving within it share a request (the default)
MAX_BATCH = 100  # heartbeats a request (the name server takes up to 500; a request stays far below its body limit)
MAX_ALIVE_IDS = 5000  # alive ids a request (the name server's limit: an int each)
PER_HEARTBEAT_S = 0.05  # a batch's read timeout grows by this per heartbeat in it
PATH = "/v1/clients/heartbeats"
WATCHES_PATH = "/v1/clients/watches"
# Rounds of watches start this far apart at least: while a fleet starts, answers and members change many times a
# second, and each new round has the name server read every watched client's view again (a flip still goes out at
# once: the round before it started long ago).
ROUND_GAP_S = 0.5
# Alive beats of a membership in a row before a full heartbeat (a consumer: one a minute). Every 30 s, full heartbeats
# were a third of the name server's steady time at 5,000 clients; changes reach clients by their watches.
FULL_EVERY = 11
# After a failed round, the next one counts as working once out this long without failing (its connection made, the
# name server waiting on it): until then each beat goes in full. Waiting for that round to end (up to WATCH_S) kept
# a whole process's clients on full heartbeats for a minute after one connect timeout: at 5,000 clients, most
# processes most of the time, and the full heartbeats kept the name server too busy to accept connections in time.
WATCH_HELD_S = 5.0

Pending = tuple[dict[str, Any], asyncio.Future[HeartbeatAnswer | None]]
Key = tuple[str, str, str]  # group, client id, role


@dataclass
class Acked:
    """A membership's last full heartbeat the name server answered 200 (its health as last stored), the id it gave
    to beat alive with (None: an older name server), and the alive beats sent since."""

    body: dict[str, Any]
    alive_id: int | None = None
    alive_beats: int = 0


def key_of(body: dict[str, Any]) -> Key:
    return body.get("group", ""), body.get("client_id", ""), body.get("role", "")


def first_phase(key: Key) -> int:
    """The alive beats a membership's first cycle counts as gone already, from its key: ``FULL_EVERY + 1`` phases,
    so the clients of a process started together send their full heartbeats spread over the beats of a cycle, not
    all on one (a 250-client process sent three 100-heartbeat requests every sixth beat, each taking seconds to
    store at a busy name server).

    >>> sorted({first_phase(("G", f"c{i}", "consumer")) for i in range(100)}) == list(range(FULL_EVERY + 1))
    True
    """
    return zlib.crc32("\0".join(key).encode()) % (FULL_EVERY + 1)


def alive_entry(body: dict[str, Any], acked: Acked | None) -> dict[str, Any] | None:
    """The alive entry of ``body`` when it is ``acked``'s but for its health (carried along when it differs), and
    fewer than ``FULL_EVERY`` alive beats went since; else None (a full heartbeat).

    >>> acked = Acked({"group": "G", "client_id": "c", "role": "consumer", "gray": False, "health": {"n": 1}})
    >>> alive_entry({**acked.body, "health": {"n": 2}}, acked)
    {'group': 'G', 'client_id': 'c', 'role': 'consumer', 'health': {'n': 2}}
    >>> spent = Acked(acked.body, alive_beats=FULL_EVERY)
    >>> alive_entry({**acked.body, "gray": True}, acked), alive_entry(acked.body, spent)
    (None, None)
    """
    if acked is None or acked.alive_beats >= FULL_EVERY:
        return None
    if {k: v for k, v in body.items() if k != "health"} != {k: v for k, v in acked.body.items() if k != "health"}:
        return None
    group, client_id, role = key_of(body)
    entry: dict[str, Any] = {"group": group, "client_id": client_id, "role": role}
    if body.get("health") != acked.body.get("health"):
        entry["health"] = body.get("health")
    return entry
Watched = tuple[Membership, dict[str, Any], int]  # a membership, its watch body, its epoch when sent

NOT_MODIFIED = 304  # a watch's result under ``since``: its view is what its known says


@dataclass
class Vouched:
    """What a watch poll's answer vouches for: its ``versions`` (group -> version) and what each of its memberships
    knew then (key -> known)."""

    versions: dict[str, str]
    known: dict[Key, dict[str, Any]] = field(default_factory=dict)

    def since(self, entries: list[Watched]) -> dict[str, str]:
        """The versions to send with ``entries`` when each knows what was vouched for (else none: each is read).

        >>> body = {"group": "G", "client_id": "c", "role": "consumer", "known": {"gray_switch": True}}
        >>> vouched = Vouched({"G": "r.1"}, {("G", "c", "consumer"): {"gray_switch": True}})
        >>> vouched.since([(None, body, 0)]), vouched.since([(None, {**body, "known": {"gray_switch": False}}, 0)])
        ({'G': 'r.1'}, {})
        """
        return self.versions if all(self.known.get(key_of(body)) == body["known"] for _, body, _ in entries) else {}


@dataclass
class Batch:
    """The heartbeats of one request: in full, alive by key (with its entry), alive by id (with the id)."""

    full: list[Pending] = field(default_factory=list)
    by_key: list[tuple[Pending, dict[str, Any]]] = field(default_factory=list)
    by_id: list[tuple[Pending, int]] = field(default_factory=list)

    @property
    def all(self) -> list[Pending]:
        return [*self.full, *(item for item, _ in self.by_key), *(item for item, _ in self.by_id)]


class NameServerSession:
    """A ``MembershipLink`` over ``nameserver`` whose heartbeats and watches are batched; ``await close()`` closes
    it (and ``nameserver``). ``label`` names whose heartbeats these are in its log lines, ``log`` is its logger."""

    label = "clients'"
    log = log

    def __init__(self, nameserver: NameServerClient, interval_s: float = 3.0, *, window_s: float = WINDOW_S,
                 max_batch: int = MAX_BATCH, timeout_s: float = 3.0, spread_full: bool = True) -> None:
        self.nameserver = nameserver
        self.spread_full = spread_full  # False: every membership's first cycle is a whole one (``first_phase``)
        self.timeout_s = timeout_s  # one heartbeat's read timeout (a batch's grows with its size)
        self.window_s = window_s  # 0: the beats of one loop turn share a request
        self.max_batch = max_batch
        self.interval_s = interval_s  # the memberships' heartbeat interval: a membership not answered yet waits it
        self.requests = 0  # batched heartbeat requests sent
        self._pending: list[Pending] = []
        self._in_flight: set[tuple[str, str]] = set()  # (group, client id) of the heartbeats of the request out now
        self._landed = asyncio.Condition()  # notified when a request came back
        self._sender: asyncio.Task[None] | None = None
        self._batched = True  # False once the name server answered that it has no batched route
        self._alive = True  # False once the name server showed it takes no alive beats
        self._alive_ids = True  # False once it showed it takes them by key only
        self._acked: dict[Key, Acked] = {}  # a membership's last full heartbeat answered 200
        self.watch_failed = False  # the last round of watches failed: no alive beats (nothing carries changes)
        self.alive_beats = 0  # alive beats the name server refreshed
        self._failing = False  # the latest heartbeat request failed (logged once until one goes through)
        self._watched: dict[int, Membership] = {}  # id -> a membership watched by this session
        self._members_changed = asyncio.Event()  # set: a new round of watches (members, or what one knows, changed)
        self._asked: dict[Key, tuple[int, dict[str, Any]]] = {}  # membership -> (its poll out now, what it knows)
        self._rounds = 0  # polls of watches sent
        self._watch_failures = 0  # polls failed in a row: the first goes again at once (a connection just closed)
        self._watcher: asyncio.Task[None] | None = None
        self._applying: dict[asyncio.Task[None], int] = {}  # a membership acting on a watch's answer -> its id

    def watch(self, membership: Membership) -> None:
        """Watch for ``membership`` (started with ``watch=False``) until ``unwatch``."""
        self._watched[id(membership)] = membership
        self._members_changed.set()
        if self._watcher is None:
            self._watcher = asyncio.get_running_loop().create_task(self._watch_rounds(), name=f"{self.label} watches")

    def unwatch(self, membership: Membership) -> None:
        """No more watching for ``membership``; an answer it is acting on is cancelled (as its own watch was)."""
        if self._watched.pop(id(membership), None) is not None:
            self._members_changed.set()
        for task, member in list(self._applying.items()):
            if member == id(membership):
                task.cancel()

    async def client_heartbeat(self, body: dict[str, Any]) -> HeartbeatAnswer | None:
        """The heartbeat's answer, or None when it went alive (the membership's latest answer holds)."""
        if not self._batched:
            return await self.nameserver.client_heartbeat(body)
        future: asyncio.Future[HeartbeatAnswer | None] = asyncio.get_running_loop().create_future()
        self._pending.append((body, future))
        if self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(self._send(), name=f"{self.label} heartbeats")
        return await future

    async def watch_client(self, body: dict[str, Any], timeout_s: float) -> HeartbeatAnswer:
        return await self.nameserver.watch_client(body, timeout_s)

    async def unregister_client(self, group: str, client_id: str, role: str) -> None:
        """Unregister once no heartbeat of the client is on its way (one landing later would register it again;
        one not sent yet was cancelled with its membership's task, and is left out of its request)."""
        async with self._landed:
            await self._landed.wait_for(lambda: (group, client_id) not in self._in_flight)
        self._acked.pop((group, client_id, role), None)
        await self.nameserver.unregister_client(group, client_id, role)

    async def close(self) -> None:
        if self._watcher is not None:
            await cancel_and_wait(self._watcher)
        for task in list(self._applying):
            await cancel_and_wait(task)
        if self._sender is not None:
            self._sender.cancel()
            await asyncio.gather(self._sender, return_exceptions=True)
        for _, future in self._pending:
            future.cancel()
        await self.nameserver.close()

    async def _send(self) -> None:
        try:
            await asyncio.sleep(self.window_s)
            while self._pending:
                batch = self._take()
                self._in_flight = {(body.get("group", ""), body.get("client_id", "")) for body, _ in batch.all}
                try:
                    if batch.all:
                        await self._send_batch(batch)
                finally:
                    self._in_flight = set()
                    async with self._landed:
                        self._landed.notify_all()
        finally:
            self._sender = None

    def _take(self) -> Batch:
        """The next request's heartbeats, in order of arrival: those going alive by id (up to ``MAX_ALIVE_IDS``: an
        int each) and up to ``max_batch`` others, full or alive by key; the rest wait for the next."""
        batch, rest = Batch(), []
        for item in self._pending:
            body, future = item
            if future.done():
                continue
            acked = self._acked.get(key_of(body))
            entry = alive_entry(body, acked) if self._alive and not self.watch_failed else None
            if entry is not None and "health" not in entry and acked is not None and acked.alive_id is not None \
                    and self._alive_ids:
                if len(batch.by_id) < MAX_ALIVE_IDS:
                    batch.by_id.append((item, acked.alive_id))
                    continue
            elif len(batch.full) + len(batch.by_key) < self.max_batch:
                if entry is None:
                    batch.full.append(item)
                else:
                    batch.by_key.append((item, entry))
                continue
            rest.append(item)
        self._pending = rest
        return batch

    async def _send_batch(self, batch: Batch) -> None:
        request: dict[str, Any] = {"heartbeats": [body for body, _ in batch.full]}
        rounds = self._rounds
        if batch.by_key:
            request["alive"] = [entry for _, entry in batch.by_key]
        if batch.by_id:
            request["alive_ids"] = [alive_id for _, alive_id in batch.by_id]
        try:
            answer = await self.nameserver.request("POST", PATH, json=request,
                                                   timeout_s=self._timeout_s(len(batch.full)))
        except NotFoundError:
            self.log.info("the name server has no %s: %s heartbeats go one by one", PATH, self.label)
            self._batched = False
            await asyncio.gather(*(self._single(body, future) for body, future in batch.all))
            return
        except BadRequestError as exc:
            if batch.by_key or batch.by_id:  # a name server from before alive beats (422); a bad report fails in full
                self._without_alive(f"it refused them: {exc.message}", batch.all)
            else:
                self._fail(batch.full, exc)
            return
        except GrayMQError as exc:
            self._fail(batch.all, exc)
            return
        self._heard(None)
        self.requests += 1
        self._answered(batch.full, answer["results"], rounds)
        if batch.by_key and "alive" not in answer:
            self._without_alive("its answer has none", [item for item, _ in batch.by_key + batch.by_id])
            return
        self._alive_answered([item for item, _ in batch.by_key], answer.get("alive", []))
        if batch.by_id and "alive_missing" not in answer:
            self.log.info("the name server takes no alive ids: %s alive beats go by key", self.label)
            self._alive_ids = False
            self._pending[:0] = [item for item, _ in batch.by_id]
            return
        missing = set(answer.get("alive_missing", ()))
        self._alive_answered([item for item, _ in batch.by_id],
                             [{"status_code": 404 if alive_id in missing else 200} for _, alive_id in batch.by_id])

    def _fail(self, batch: list[Pending], exc: GrayMQError) -> None:
        """The request of ``batch`` failed: each heartbeat fails with ``exc``."""
        self._heard(exc)
        for _, future in batch:
            if not future.done():
                future.set_exception(exc)

    def _answered(self, full: list[Pending], results: list[dict[str, Any]], rounds: int) -> None:
        """Settle the futures of full heartbeats with their ``results``; remember each body answered 200."""
        for (body, future), result in zip(full, results, strict=True):
            if result["status_code"] < 300:
                phase = first_phase(key_of(body)) if self.spread_full and key_of(body) not in self._acked else 0
                self._acked[key_of(body)] = Acked(body, result.get("alive_id"), phase)
                answer = HeartbeatAnswer.from_json(result["answer"])
                self._answer_known(body, answer, rounds)
                if not future.done():
                    future.set_result(answer)
                continue
            self._acked.pop(key_of(body), None)
            if not future.done():
                future.set_exception(self._refused(body, result))

    def _answer_known(self, body: dict[str, Any], answer: HeartbeatAnswer, rounds: int) -> None:
        """A heartbeat's ``answer`` (sent when ``rounds`` polls of watches were) becomes what its membership knows.
        Sent before the membership's poll out now, it may be older than what the poll asks about (read before a
        change whose watch answer came first, it undoes that change at the client): when it differs, a new round
        asks with it, so the name server answers at once with what changed rather than at the poll's end. One sent
        after is newer: the poll out answers it by itself."""
        asked = self._asked.get(key_of(body))
        if asked is not None and rounds < asked[0] and any(
                getattr(answer, key) != value for key, value in asked[1].items()):
            self._members_changed.set()

    def _alive_answered(self, alive: list[Pending], results: list[dict[str, Any]]) -> None:
        """Settle the futures of alive beats: None when refreshed; a 404 sends the full heartbeat in the next
        request (the client expired or is unknown there); another refusal fails as a full heartbeat's would."""
        for (body, future), result in zip(alive, results, strict=True):
            if result["status_code"] < 300:
                if (acked := self._acked.get(key_of(body))) is not None:
                    acked.alive_beats += 1
                    acked.body = body  # its health is stored now
                self.alive_beats += 1
                if not future.done():
                    future.set_result(None)
                continue
            self._acked.pop(key_of(body), None)
            if result["status_code"] == 404:
                self._pending.append((body, future))
            elif not future.done():
                future.set_exception(self._refused(body, result))

    def _without_alive(self, why: str, again: list[Pending]) -> None:
        """The name server takes no alive beats: full heartbeats from now on, ``again`` in the next request."""
        self.log.info("the name server takes no alive beats (%s): %s heartbeats all go in full", why, self.label)
        self._alive = False
        self._pending[:0] = again

    @staticmethod
    def _refused(body: dict[str, Any], result: dict[str, Any]) -> GrayMQError:
        text = f"{result.get('error')}: {result.get('detail')}"
        return status_error(result["status_code"], f"POST {PATH} ({body['client_id']})", text, result.get("detail"))

    def _timeout_s(self, heartbeats: int) -> float:
        """A batch's read timeout: one heartbeat's, and ``PER_HEARTBEAT_S`` more per heartbeat (the name server
        stores them one after the other)."""
        return self.timeout_s + heartbeats * PER_HEARTBEAT_S

    def _heard(self, failure: GrayMQError | None) -> None:
        """Log the first transient failure of the heartbeats' requests, and the first success after it."""
        if failure is not None and not failure.permanent and not self._failing:
            self.log.warning("%s heartbeats to the name server failed: %s; each goes again with its next beat",
                             self.label, failure.message)
            self._failing = True
        elif failure is None and self._failing:
            self.log.info("%s heartbeats reach the name server again", self.label)
            self._failing = False

    async def _single(self, body: dict[str, Any], future: asyncio.Future[HeartbeatAnswer | None]) -> None:
        rounds = self._rounds
        try:
            answer = await self.nameserver.client_heartbeat(body)
        except GrayMQError as exc:
            self._heard(exc)
            if not future.done():
                future.set_exception(exc)
        else:
            self._heard(None)
            self._answer_known(body, answer, rounds)
            if not future.done():
                future.set_result(answer)

    async def _watch_rounds(self) -> None:
        """Every watched membership in long polls of ``max_batch``, each going again by itself once answered
        (``_polls``): a change wakes only the polls holding its group's clients, and the others stay out (cancelled
        with the first one answered, their clients heard of the change a gap and a first read later: seconds, at
        5,000 clients). Memberships added or gone, or a heartbeat's answer older than what a poll asks, start every
        poll again; so does a failed poll, after ``WATCH_RETRY_S`` when the one before failed too."""
        loop, began = asyncio.get_running_loop(), -ROUND_GAP_S
        while True:
            # memberships added or gone together start one round, and rounds start ROUND_GAP_S apart at most
            await asyncio.sleep(max(WINDOW_S, began + ROUND_GAP_S - loop.time()))
            began = loop.time()
            self._members_changed.clear()
            members = list(self._watched.values())
            self._asked = {}
            polls = [asyncio.ensure_future(self._polls(members[i:i + self.max_batch]))
                     for i in range(0, len(members), self.max_batch)]
            changed = asyncio.ensure_future(self._members_changed.wait())
            try:
                if self.watch_failed:  # a poll out this long without failing is held by the name server
                    done, _ = await asyncio.wait([*polls, changed], timeout=WATCH_HELD_S,
                                                 return_when=asyncio.FIRST_COMPLETED)
                    if not done:
                        self.watch_failed = False
                await asyncio.wait([*polls, changed], return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (*polls, changed):
                    task.cancel()
                await asyncio.gather(*polls, changed, return_exceptions=True)
            failed = [t for t in polls if t.done() and not t.cancelled() and t.exception() is not None]
            for task in failed:
                self.log.debug("%s watch failed (%s); heartbeats carry changes", self.label, task.exception())
            if failed:
                self.watch_failed = True  # no alive beats until a poll goes through again
                self._watch_failures += 1
                if self._watch_failures > 1:
                    await asyncio.sleep(max(self.interval_s, WATCH_RETRY_S))

    async def _polls(self, members: list[Membership]) -> None:
        """Long polls for ``members``, one after another (``ROUND_GAP_S`` apart at least), each asking what its
        memberships know then; returns only by raising a poll's failure. A poll holding a membership no name server
        answered yet ends within an interval, so it joins the next (as its own watch would). A poll whose every
        membership knows what the last answer vouched for sends that answer's versions (``since``): the name server
        then reads no view before it waits."""
        loop, began = asyncio.get_running_loop(), -ROUND_GAP_S
        vouched: Vouched | None = None
        while True:
            await asyncio.sleep(max(0.0, began + ROUND_GAP_S - loop.time()))
            began = loop.time()
            entries = [(m, body, m.epoch) for m in members if (body := m.watch_body()) is not None]
            self._rounds += 1
            self._asked.update({key_of(body): (self._rounds, body["known"]) for _, body, _ in entries})
            timeout_s = WATCH_S if len(entries) == len(members) else self.interval_s
            if not entries:
                await asyncio.sleep(timeout_s)
                continue
            since = vouched.since(entries) if vouched is not None else {}
            vouched = await self._poll(entries, timeout_s, since)
            self.watch_failed, self._watch_failures = False, 0

    async def _poll(self, entries: list[Watched], timeout_s: float, since: dict[str, str]) -> Vouched | None:
        """One long poll for ``entries``; each changed membership acts on its answer. Returns what the answer's
        versions vouch for (None from a name server without them)."""
        if self._batched:
            try:
                answer = await self.nameserver.request(
                    "POST", WATCHES_PATH, json={"watches": [body for _, body, _ in entries], "timeout_s": timeout_s,
                                                "since": since}, timeout_s=timeout_s + WATCH_GRACE_S)
            except NotFoundError:
                self.log.info("the name server has no %s: %s watches go one by one", WATCHES_PATH, self.label)
                self._batched = False
            else:
                vouched = Vouched(answer.get("versions") or {})
                for (membership, body, epoch), result in zip(entries, answer["results"], strict=True):
                    if result["status_code"] == NOT_MODIFIED:
                        vouched.known[key_of(body)] = body["known"]
                    elif result["status_code"] < 300:
                        view = HeartbeatAnswer.from_json(result["answer"])
                        vouched.known[key_of(body)] = {key: getattr(view, key) for key in body["known"]}
                        self._apply_soon(membership, body, view, epoch)
                return vouched if "versions" in answer else None
        await asyncio.gather(*(self._single_watch(entry, timeout_s) for entry in entries))
        return None

    async def _single_watch(self, entry: Watched, timeout_s: float) -> None:
        membership, body, epoch = entry
        self._apply_soon(membership, body, await self.nameserver.watch_client(body, timeout_s), epoch)

    def _apply_soon(self, membership: Membership, body: dict[str, Any], answer: HeartbeatAnswer, epoch: int) -> None:
        """``membership`` acts on a watch's answer in a task of its own: one client's flip (a drain, a broker round
        trip) neither waits for another's nor holds the next round, and a round ending does not cancel it."""
        if all(getattr(answer, key) == value for key, value in body["known"].items()):
            return
        task = asyncio.get_running_loop().create_task(membership.watched(body, answer, epoch),
                                                      name=f"watched {membership.client_id}")
        self._applying[task] = id(membership)
        task.add_done_callback(self._applied)

    def _applied(self, task: asyncio.Task[None]) -> None:
        self._applying.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            self.log.error("%s %s: acting on a watch's answer failed", self.label, task.get_name(),
                           exc_info=task.exception())
