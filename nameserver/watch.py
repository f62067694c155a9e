"""Group change notification: what lets a client's watch return the moment its desired flag may have changed.

Every audited change of a group (a client's flag, a rule, the switch, the orphan policy) marks the
group in its session; once the transaction commits, the group's watchers on this process wake
up and re-read their view. On PostgreSQL the committing transaction also sends
``NOTIFY graymq_group_changed, '<group>'`` and every replica LISTENs on that channel, so a
change made through one replica wakes the watchers of all of them. A replica whose listening
connection drops wakes all its watchers when it reconnects (it may have missed a change), and every
group's version (``GroupChanges.version``) changes then; between the two a watch without ``since`` still
re-reads at its own timeout, one with it at the reconnect.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
from collections.abc import Callable
from typing import Any

import psycopg
from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

log = logging.getLogger(__name__)

CHANNEL = "graymq_group_changed"
_CHANGED_KEY = "graymq_changed_groups"
RECONNECT_S = 1.0
# Keys of ``GroupChanges`` beside group names (which never hold a '/'): the topic table or deletion log changed
# (brokers' watches wake), a broker registration changed a route (a broker new, moved, back from an expired lease,
# or reporting other topics or layouts; a renewal alone changes none) or a broker set elected a leader (cached
# routes are dropped, a topic create waiting for brokers wakes).
TOPIC_TABLE_CHANGED = "/topics"
BROKER_REGISTERED = "/brokers"
# A lane took or gave back a slot of a topic (routes change).
LANE_SLOTS_CHANGED = "/lanes"
# A change of every group (an all-groups rule; a lane's first slot taken or its last given back, which changes the
# lanes every group's ``lanes`` shows): every watcher wakes. Such changes are rare (once per lane).
EVERY_GROUP = "/groups"


class _Change(asyncio.Event):
    """The event a group's next change sets, numbered (``GroupChanges.version``)."""

    def __init__(self, serial: int) -> None:
        super().__init__()
        self.serial = serial


def mark_changed(session: Session, group: str) -> None:
    """Record that this transaction changes ``group`` (its watchers wake once it commits)."""
    session.info.setdefault(_CHANGED_KEY, set()).add(group)


class GroupChanges:
    """Per-group wake-ups for the watch requests of this process.

    ``changed(group)`` is the event the next change of the group sets; a watcher takes it before
    reading its view and waits on it after, so a change committed in between is not missed.
    ``publish`` may be called from any thread (the sync routes run in a thread pool); ``subscribe``d listeners
    hear every publication in the publishing thread, before any watcher wakes.
    """

    def __init__(self) -> None:
        self._events: dict[str, _Change] = {}
        self._serials = itertools.count(1)
        self._replica = secrets.token_hex(4)  # versions of another replica, or of this one before a restart, differ
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listeners: list[Callable[[set[str] | None], None]] = []
        self.closing = False

    def subscribe(self, listener: Callable[[set[str] | None], None]) -> None:
        """Call ``listener(keys)`` with the keys of every change published (None: any may have changed)."""
        self._listeners.append(listener)

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serve on ``loop`` (the application's startup)."""
        self._loop = loop
        self.closing = False

    def changed(self, group: str) -> asyncio.Event:
        return self._change(group)

    def version(self, group: str) -> str:
        """The version of ``group`` that ``changed(group)`` names: the same until its next change (on this replica;
        any may have changed once a replica's listening connection dropped: every version changes then)."""
        return f"{self._replica}.{self._change(group).serial}"

    def _change(self, group: str) -> _Change:
        event = self._events.get(group)
        if event is None:
            event = self._events[group] = _Change(next(self._serials))
        return event

    def publish(self, groups: set[str] | None) -> None:
        """Wake the watchers of ``groups`` (None, or ``EVERY_GROUP`` among them: of every group);
        thread-safe."""
        for listener in self._listeners:
            listener(groups)
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._wake(groups)
        else:
            loop.call_soon_threadsafe(self._wake, groups)

    def close(self) -> None:
        """Shutting down: every watcher returns now, and new ones do not wait."""
        self.closing = True
        self.publish(None)

    def _wake(self, groups: set[str] | None) -> None:
        if groups is None or EVERY_GROUP in groups:
            names = list(self._events)
        else:
            names = [g for g in groups if g in self._events]
        for name in names:
            self._events.pop(name).set()

    def install(self, sessions: sessionmaker[Session], postgres: bool) -> None:
        """Publish the groups a session marked once it commits (on PostgreSQL, NOTIFY them in the transaction)."""

        def before_commit(session: Session) -> None:
            for group in sorted(session.info.get(_CHANGED_KEY, ())):
                session.execute(text("SELECT pg_notify(:channel, :group)"), {"channel": CHANNEL, "group": group})

        def after_commit(session: Session) -> None:
            groups = session.info.pop(_CHANGED_KEY, None)
            if groups:
                self.publish(groups)

        def after_rollback(session: Session) -> None:
            session.info.pop(_CHANGED_KEY, None)

        if postgres:
            event.listen(sessions, "before_commit", before_commit)
        event.listen(sessions, "after_commit", after_commit)
        event.listen(sessions, "after_rollback", after_rollback)

    async def listen(self, db_url: str) -> None:
        """LISTEN for the changes committed through every replica (PostgreSQL); runs until cancelled."""
        connect_args = _connect_args(db_url)
        reported = False
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(**connect_args, autocommit=True)
                async with conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    if reported:
                        log.info("listening for group changes again")
                    reported = False
                    self.publish(None)  # changes made while we were not listening
                    async for notify in conn.notifies():
                        self.publish({notify.payload})
            except (psycopg.Error, OSError) as exc:
                if not reported:
                    log.warning("not listening for group changes (%s); retrying every %gs", exc, RECONNECT_S)
                    reported = True
            await asyncio.sleep(RECONNECT_S)


def _connect_args(db_url: str) -> dict[str, Any]:
    url = make_url(db_url)
    translated = url.translate_connect_args(database="dbname", username="user")
    args: dict[str, Any] = {k: v for k, v in translated.items() if v}
    args.update(url.query)
    args.setdefault("connect_timeout", 2)
    args["application_name"] = "graymq-nameserver-listen"
    return args


async def wait_changed(changed: asyncio.Event, timeout_s: float) -> None:
    """Wait for ``changed`` at most ``timeout_s`` seconds."""
    try:
        async with asyncio.timeout(timeout_s):
            await changed.wait()
    except TimeoutError:
        pass
