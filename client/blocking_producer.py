"""BlockingProducer: the producer for synchronous code (Django, Flask, scripts, Celery tasks), on plain sockets.

A send runs in the caller's thread from start to end: the queue chosen as the async ``Producer`` chooses it
(core/selector.py, the gray side of core/gray_side.py), the request written to a socket of the caller's own
(client/blocking_brokers.py) and its answer read there, retried as ``Producer`` retries (client/send_retry.py:
the same producer id and sequence numbers, so a retry after a timeout is stored once). No event loop and no
thread hop on the send path; one producer may be shared by many threads.

What stays async runs on the event loop of its ``ClientInstance`` (client/instance.py; graymq's shared loop,
client/loop_thread.py, when it is the instance's first client): the membership in the name server, heartbeating
and watched with the instance's other clients through its one session (one batched request per interval for a
process's BlockingProducer and async clients given one config), and route lookups — a send waits for one only
for a topic without a cached route; a route due for refresh is served while the loop refreshes it.

Not here (use ``Producer``): auto batching across calls (each ``send`` is one request; ``send_batch`` joins
messages) and tracing spans.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import ssl
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from graymq.client.blocking_brokers import BlockingBrokers
from graymq.client.config import ClientConfig, client_config
from graymq.client.context import current_message
from graymq.client.instance import ClientInstance
from graymq.client.lane_slots import route_with_slot
from graymq.client.loop_thread import LoopThread, shared_loop
from graymq.client.message import Message, MessageQueue, SendResult, SendStatus, named_lane
from graymq.client.producer import TOPIC_WAIT_FIRST_S, TOPIC_WAIT_MAX_S, MessageIds
from graymq.client.producer_flags import ProducerFlags
from graymq.client.producer_settings import ProducerSettings, producer_settings
from graymq.client.route_cache import RouteCache
from graymq.client.send_fields import message_fields, message_wire
from graymq.client.send_pause import pause_s, send_brokers
from graymq.client.send_retry import RetryState, Step, after_failure, attempt_timeout
from graymq.client.send_window import BlockingSendWindow, QueueKey, queue_key, select_with_room
from graymq.client.send_wire import WireSend
from graymq.core.gray_side import Mark
from graymq.core.route import TopicRoute
from graymq.core.selector import MemoSelector
from graymq.nameserver_api.membership import Membership
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import BadRequestError, GrayMQError, LaneSlotError, RequestTimeoutError
from graymq.protocol.retry import Backoff
from graymq.protocol.tls import broker_tls

log = logging.getLogger(__name__)
_FIRST_ATTEMPT = RetryState()
_NO_QUEUE = MessageQueue("", "", -1)
# enum members read once: each Step.X / SendStatus.X costs ~0.1 us on CPython 3.11
_STOP, _SAME_QUEUE, _NEW_LEADER = Step.STOP, Step.SAME_QUEUE, Step.NEW_LEADER
_SEND_OK = SendStatus.SEND_OK
REFRESH_ASK_S = 1.0  # a route due for refresh: the loop is asked at most this often per topic


class BlockingProducer(ProducerFlags):
    """Blocking producer: ``start()``, ``send``/``send_batch``, ``stop()``, or ``with BlockingProducer(...) as p``.

    Arguments as ``Producer``'s (``settings``/keywords: ``retry_times``, ``send_timeout_s``,
    ``heartbeat_interval_s``, ``route_ttl_s``; ``config``: name servers, token, TLS). It joins the ``ClientInstance``
    of its ``config`` (its name-server client and session, shared with the async clients given that config) and
    keeps its own routes (read on the caller's thread) and broker sockets.
    """

    def __init__(self, group: str, nameserver: str | list[str] | None = None, *, client_id: str | None = None,
                 labels: dict[str, str] | None = None, gray: bool | None = None, lane: str | None = None,
                 token: str | None = None,
                 settings: ProducerSettings | None = None, config: ClientConfig | None = None,
                 **keywords: Any) -> None:
        self.settings = s = producer_settings(settings, keywords)
        self._init_flags(group, client_id, gray, lane)
        self.config = c = client_config(config, nameserver, token, route_ttl_s=s.route_ttl_s)
        self.client = ClientInstance.of(c)
        self.nameserver = self.client.nameserver
        self.routes = RouteCache(self.nameserver, c.route_ttl_s)
        self.brokers = BlockingBrokers(timeout_s=c.broker_timeout_s, token=(c.token or "").strip(),
                                       tls=c.tls if isinstance(c.tls, ssl.SSLContext) else broker_tls(c.tls))
        self.selector = MemoSelector()
        self.ids = MessageIds()
        self.producer_id = secrets.randbits(64) or 1  # one per instance: a restarted producer is a new one
        self.window = BlockingSendWindow()  # sequences per (broker, topic, queue), at most SEQUENCES_KEPT unresolved
        self._refresh_asked: dict[str, float] = {}
        self.membership = Membership(
            self.client.session, group=group, client_id=self.client_id, role="producer", labels=dict(labels or {}),
            declared_gray=lane or gray, interval_s=s.heartbeat_interval_s, report=self._report,
            on_update=self._on_update, aligned=True, log_failures=False)  # the session logs failures
        self._loop = LoopThread(f"graymq-producer {self.client_id}")
        self.started = False
        self._left = False

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> BlockingProducer:
        """Register in the name server (its answer sets the gray flag) and start heartbeating; a refusal (bad token,
        missing right) raises its error and leaves nothing running. Started already: nothing more."""
        if self.started:
            return self
        if self._left:
            raise BadRequestError("producer stopped: build a new one")
        self._loop.start(self._instance_loop())
        try:
            self._loop.run(self.membership.beat(first=True))
            self._loop.run(self._start_membership())
        except BaseException:
            self._loop.stop()
            raise
        self.started = True
        return self

    def _instance_loop(self) -> asyncio.AbstractEventLoop:
        """The loop the instance's clients run on; graymq's shared loop while none of them has started."""
        loop = self.client.loop
        return loop if loop is not None and loop.is_running() else shared_loop()

    async def _start_membership(self) -> None:
        self.client.start_membership(self.membership)

    def stop(self) -> None:
        """Leave the group in the name server (at once) and the instance; close every broker connection."""
        if self._left:
            return
        if self._loop.loop is None:  # not started (or its start failed): leave the instance all the same
            self._loop.start(self._instance_loop())
        registered, self.started, self._left = self.started, False, True
        try:
            self._loop.run(self._leave(registered))
        finally:
            self._loop.stop()
            self.brokers.close()

    def _report_soon(self) -> None:
        """Heartbeat as soon as possible: the membership runs on the loop thread, a send ends on its caller's."""
        loop = self._loop.loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self.membership.poke)
        except RuntimeError:  # closed by a stop() in another thread just now: the producer left the group
            log.debug("producer %s: stopped before its flag was reported", self.client_id)

    async def _leave(self, registered: bool) -> None:
        if registered:
            await self.client.stop_membership(self.membership)
            await self.membership.unregister()  # so a promote does not wait for this producer to go stale
        await self.routes.close()
        await self.client.leave()

    def __enter__(self) -> BlockingProducer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    # -- sending ----------------------------------------------------------------------------
    def send(self, message: Message, timeout_s: float | None = None) -> SendResult:
        """Store one message (one SEND_MESSAGE), retried within ``timeout_s`` (default ``send_timeout_s``)."""
        handling = current_message()
        gray = self._gray_send_side(message, handling)  # counted under way from here when gray
        try:
            req = WireSend(self.group, message_wire(message, gray, int(time.time() * 1000), handling, self.ids),
                           self.producer_id)
            mq, (_, msg_id, queue_offset, commit_log_offset) = self._with_retries(
                message.topic, gray, message.sharding_key, req, timeout_s)
        finally:
            if gray:
                self._gray_send_ended()
        return SendResult(_SEND_OK, msg_id, mq, queue_offset, bool(gray), commit_log_offset, named_lane(gray))

    def send_batch(self, messages: Sequence[Message], timeout_s: float | None = None) -> list[SendResult]:
        """All messages to one queue of one topic in one request (same topic, gray side and key)."""
        if not messages:
            return []
        topic, key, born_ms = messages[0].topic, messages[0].sharding_key, int(time.time() * 1000)
        handling = current_message()
        gray = self._gray_send_side(messages[0], handling)  # counted under way from here when gray
        try:
            fields = []
            for m in messages:
                if m.topic != topic or self._side(m, handling) != gray:
                    raise BadRequestError("a batch must share one topic and one gray mark")
                fields.append(message_fields(m, gray, born_ms, handling, m.properties, self.ids))
            req = pb.SendBatchRequest(producer_group=self.group, topic=topic, messages=fields,
                                      producer_id=self.producer_id)
            mq, resp = self._with_retries(topic, gray, key, req, timeout_s)
        finally:
            if gray:
                self._gray_send_ended()
        first = resp.first_queue_offset
        return [SendResult(_SEND_OK, msg_id, mq, first + i if first >= 0 else -1, bool(gray), -1, named_lane(gray))
                for i, msg_id in enumerate(resp.msg_ids)]

    def _with_retries(self, topic: str, gray: Mark, sharding_key: str | None,
                      req: WireSend | pb.SendBatchRequest, timeout_s: float | None) -> tuple[MessageQueue, Any]:
        """``req`` sent until answered, the retry decision stops or the time is up (``Producer._with_retries``'s
        steps, in this thread)."""
        if not self.started:
            raise BadRequestError("producer not started: call producer.start() first")
        deadline = time.monotonic() + (timeout_s or self.settings.send_timeout_s)
        retry_times = self.settings.retry_times
        state, backoff = _FIRST_ATTEMPT, None
        mq, address, held = _NO_QUEUE, "", None
        try:
            while (step := state.step) is not _STOP and (remaining := deadline - time.monotonic()) > 0:
                if step is not _SAME_QUEUE:
                    try:
                        route = self._route(topic, state, remaining)
                    except TimeoutError:  # a hung name server must not outlast the timeout
                        break
                    if step is _NEW_LEADER:  # the same queue and sequence, at its set's leader
                        address = route.address_of(mq.broker_name) or address
                    else:  # a queue away from state.avoid_broker, one with room in the send window preferred
                        try:
                            mq = select_with_room(self.selector, self.window, route, gray, self.gray_switch,
                                                  state.avoid_broker, sharding_key)
                        except LaneSlotError as missing:  # the lane's first send to the topic
                            route = self._loop.run(route_with_slot(self.nameserver, self.routes, missing), remaining)
                            mq = select_with_room(self.selector, self.window, route, gray, self.gray_switch,
                                                  state.avoid_broker, sharding_key)
                        found = route.address_of(mq.broker_name)
                        assert found is not None
                        held, address = self._numbered(req, mq, found, held, deadline)
                try:
                    timeout = attempt_timeout(state, deadline - time.monotonic(), retry_times)
                    if isinstance(req, WireSend):
                        return mq, self.brokers.send_message(address, req.envelope(), timeout)
                    return mq, self.brokers.call(address, pb.SEND_BATCH, req, timeout)
                except GrayMQError as exc:
                    cached = self.routes.cached(topic)
                    broker = cached.broker(mq.broker_name) if cached is not None else None
                    state = after_failure(state, exc, broker_name=mq.broker_name, retry_times=retry_times,
                                          replicated=broker is not None and broker.replicas > 1,
                                          brokers=send_brokers(self.selector, route, gray, self.gray_switch, mq,
                                                               fixed=sharding_key is not None))
                    backoff = backoff or Backoff(TOPIC_WAIT_FIRST_S, TOPIC_WAIT_MAX_S)  # made once it is needed
                    self._pause(state, mq, req.sequence, backoff, deadline)
            raise state.error or RequestTimeoutError(f"send to {topic} timed out")
        finally:
            if held is not None:
                self.window.release(*held)

    def _numbered(self, req: WireSend | pb.SendBatchRequest, mq: MessageQueue, address: str,
                  held: tuple[QueueKey, int] | None, deadline: float) -> tuple[tuple[QueueKey, int], str]:
        """``req`` numbered for ``mq`` by the send window, the sequence ``held`` before released (its attempt stored
        nothing); waits while ``mq``'s window is full, then reads ``mq``'s broker address again. Returns the
        sequence now held and the address."""
        if held is not None:
            self.window.release(*held)
        key = queue_key(mq)
        sequence = self.window.take_now(key)
        if sequence is None:
            sequence = self.window.take(key, deadline)
            route = self.routes.cached(mq.topic)
            address = (route.address_of(mq.broker_name) if route is not None else None) or address
        req.queue_id = mq.queue_id
        req.sequence = sequence
        return (key, sequence), address

    def _route(self, topic: str, state: RetryState, remaining_s: float) -> TopicRoute:
        """The route of the next attempt: the cached one on a first attempt (a refresh asked of the loop when due,
        not waited for); the name server's answer, waited for, when there is none or the step says so."""
        if state.error is None:
            try:
                route = self.routes.fresh(topic)
            except KeyError:  # the loop is storing the topic's first route right now
                route = None
            if route is not None:
                return route
            cached = self.routes.cached(topic)
            if cached is not None:
                self._refresh_soon(topic)
                return cached
        refresh = state.step in (Step.NEW_LEADER, Step.WAIT_LEADER, Step.RECHECK_TOPIC)
        return self._loop.run(self.routes.get(topic, refresh=refresh), remaining_s)

    def _refresh_soon(self, topic: str) -> None:
        now = time.monotonic()
        if now - self._refresh_asked.get(topic, -REFRESH_ASK_S) >= REFRESH_ASK_S:
            self._refresh_asked[topic] = now
            self._loop.submit(self.routes.get(topic))  # starts the refresh; the cached route serves meanwhile

    def _pause(self, state: RetryState, mq: MessageQueue, sequence: int, backoff: Backoff,
               deadline: float) -> None:
        """Between a failed attempt and the next (``send_pause.pause_s``): a stale route, a log line, a wait."""
        delay_s = pause_s(state, mq, sequence, backoff, self.routes, max(deadline - time.monotonic(), 0.0))
        if delay_s > 0:
            time.sleep(delay_s)
