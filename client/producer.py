"""Producer: route lookup, gray queue selection, retries across brokers; sync, async, one-way and batch sends.

The producer's gray flag comes from the name server (explicit per-client value, gray rules,
the group's switch) and changes live; the producer reports the flag it applies in its next
heartbeat, which is how the controller knows no new gray message will be sent.

A message's gray mark (``Message(gray=True)``, or that of the message being handled) is a request the
release decides, not an override: the name server's ``gray_marks`` says whether this producer may honour
marks (switch on, no promote/rollback of its producer group running, no explicit normal flag, a right naming
the producer group). Once a promote or rollback has told a producer to be normal, nothing it sends lands in
the gray queues. The rule per source and group state is the table in ``core/gray_side.py`` and the README's
cutover runbook; a ``SendResult``'s ``gray`` is the side the message really took.

Auto batching (on by default, ``auto_batch=False`` turns it off; client/accumulator.py): ``send()`` calls made
during one turn of the event loop for the same topic, gray side and sharding key leave as one SEND_BATCH at the
end of that turn; a lone send is still a plain SEND_MESSAGE.

Idempotent retries: every request carries the producer's id (random, one per ``Producer``) and a sequence
number per (broker, topic, queue). A request whose outcome is unknown (a timeout, a connection lost after it
was written, a sync flush that timed out) is retried to the same broker and queue with the same number, and
the broker answers a request it stored already with the first result instead of storing it again. Only a
request known not to be stored (no connection could be made, a refusal) goes to another broker, under that
queue's next number. The decision is client/send_retry.py's; which error calls for what is its class's
``send_retry`` (protocol/errors.py).

Its name servers, token and TLS come from a ``ClientConfig`` (``config=``: the producers and consumers given
the same one share a name-server client, route cache and broker connections), else from the keyword
arguments and ``ClientConfig.from_env()``; its tuning from ``ProducerSettings`` (``settings=`` or keywords).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from graymq.client.accumulator import MessageAccumulator
from graymq.client.config import ClientConfig, client_config
from graymq.client.context import current_message
from graymq.client.instance import ClientInstance
from graymq.client.lane_slots import route_with_slot
from graymq.client.message import Message, MessageExt, MessageQueue, SendResult, SendStatus, named_lane
from graymq.client.producer_flags import ProducerFlags
from graymq.client.producer_settings import ProducerSettings, producer_settings
from graymq.client.send_fields import message_fields
from graymq.client.send_pause import pause_s, send_brokers
from graymq.client.send_retry import RetryState, Step, after_failure, attempt_timeout
from graymq.client.send_window import QueueKey, SendWindow, queue_key, select_with_room
from graymq.client.tracing import send_span, tracer
from graymq.core.gray_side import Mark
from graymq.core.route import TopicRoute
from graymq.core.selector import GrayQueueSelector, MemoSelector
from graymq.nameserver_api.membership import Membership
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.aio import with_timeout
from graymq.protocol.errors import (
    BadRequestError,
    GrayMQError,
    LaneSlotError,
    RequestTimeoutError,
    ServiceNotAvailableError,
)
from graymq.protocol.retry import Backoff

log = logging.getLogger(__name__)
_SendRequest: TypeAlias = pb.SendRequest | pb.SendBatchRequest
# Backoff while a broker does not know a topic the route has (created moments ago): doubling, capped, jittered.
TOPIC_WAIT_FIRST_S = 0.05
TOPIC_WAIT_MAX_S = 0.5
_FIRST_ATTEMPT = RetryState()  # frozen: every send starts from the same state
_NO_QUEUE = MessageQueue("", "", -1)  # before the first attempt chose one


def new_msg_id() -> str:
    return secrets.token_hex(16).upper()


class MessageIds:
    """Msg ids (32 upper-case hex digits) and trace ids (16 hex digits) without a system call per message:
    a random prefix drawn once per producer, then a counter. Unique, not unpredictable — they name
    messages, they do not guard anything."""

    def __init__(self) -> None:
        self._msg_prefix = secrets.token_hex(8).upper()
        self._trace_prefix = secrets.token_hex(4)
        self._counter = itertools.count(int.from_bytes(secrets.token_bytes(4), "big"))

    def msg_id(self) -> str:
        return f"{self._msg_prefix}{next(self._counter) & 0xFFFF_FFFF_FFFF_FFFF:016X}"

    def trace_id(self) -> str:
        return f"{self._trace_prefix}{next(self._counter) & 0xFFFF_FFFF:08x}"


class Producer(ProducerFlags):
    """Async producer. ``await start()`` before sending, ``await stop()`` at the end (it sends the open batches).

    ``auto_batch`` (default on) joins the sends of one loop turn into SEND_BATCH requests of at most
    ``batch_max_messages`` messages / ``batch_max_bytes`` body bytes; ``send(timeout_s=...)`` always goes alone.

    A send makes up to ``1 + retry_times`` attempts within ``send_timeout_s`` (or its ``timeout_s``); each
    attempt may use an equal share of the time left, so a timed-out attempt leaves time for its retry.
    ``settings`` holds the tuning (each ``ProducerSettings`` field is also a keyword argument, which wins);
    ``config`` the name servers, token and TLS (``nameserver`` and ``token`` are then not to be given).
    """

    def __init__(
        self,
        group: str,
        nameserver: str | list[str] | None = None,
        *,
        client_id: str | None = None,
        labels: dict[str, str] | None = None,
        gray: bool | None = None,
        lane: str | None = None,
        token: str | None = None,
        settings: ProducerSettings | None = None,
        config: ClientConfig | None = None,
        **keywords: Any,
    ) -> None:
        self.settings = s = producer_settings(settings, keywords)
        self._init_flags(group, client_id, gray, lane)
        self.client = ClientInstance.of(client_config(config, nameserver, token, route_ttl_s=s.route_ttl_s))
        self.nameserver = self.client.nameserver
        self.routes = self.client.route_view()
        self.brokers = self.client.brokers
        self.selector: GrayQueueSelector = MemoSelector()
        self.ids = MessageIds()
        self.producer_id = secrets.randbits(64) or 1  # one per instance: a restarted producer is a new one
        self.window = SendWindow()  # sequences per (broker, topic, queue), at most SEQUENCES_KEPT unresolved
        self.membership = Membership(
            self.client.session, group=group, client_id=self.client_id, role="producer", labels=dict(labels or {}),
            declared_gray=lane or gray, interval_s=s.heartbeat_interval_s, report=self._report,
            on_update=self._on_update, aligned=True, log_failures=False,  # the instance's session logs failures
        )
        self._pending: set[asyncio.Task[Any]] = set()
        self.started = False
        self._left = False
        self.accumulator = MessageAccumulator(
            lambda topic, gray, key, fields: self._send_one(topic, gray, key, fields, None),
            lambda topic, gray, key, messages: self._send_batch_request(topic, gray, key, messages, None),
            max_messages=s.batch_max_messages, max_bytes=s.batch_max_bytes)

    @property
    def retry_times(self) -> int:
        return self.settings.retry_times

    @property
    def send_timeout_s(self) -> float:
        return self.settings.send_timeout_s

    @property
    def auto_batch(self) -> bool:
        return self.settings.auto_batch

    async def start(self) -> None:
        """Register and heartbeat (unless ``register=False``: the flag stays as given, no name server hears of it)."""
        if self.settings.register:
            await self.membership.beat(first=True)
            self.client.start_membership(self.membership)
        self.started = True

    async def stop(self) -> None:
        """Send what is batched and in flight, then leave the group in the name server and close."""
        await self.accumulator.flush()
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        await self.client.stop_membership(self.membership)
        self.started = False
        await self.membership.unregister()  # so a promote does not wait for this producer to go stale
        await self.routes.close()
        if not self._left:
            self._left = True
            await self.client.leave()

    # -- sending ---------------------------------------------------------------------------
    def _fields(self, message: Message, gray: Mark, born_ms: int, handling: MessageExt | None,
                properties: dict[str, str]) -> dict[str, Any]:
        return message_fields(message, gray, born_ms, handling, properties, self.ids)

    async def send(self, message: Message, timeout_s: float | None = None) -> SendResult:
        handling = current_message()
        gray = self._side(message, handling)
        if tracer() is None:  # the common case: no span, not even an empty one
            return await self._store(message, gray, handling, message.properties, timeout_s)
        with send_span(message.topic, self.group, self.client_id, gray, message.properties,
                       tags=message.tags) as sending:
            result = await self._store(message, gray, handling, sending.properties, timeout_s)
            sending.stored(result.msg_id, result.queue.broker_name, result.queue.queue_id)
            return result

    async def _store(self, message: Message, gray: Mark, handling: MessageExt | None, properties: dict[str, str],
                     timeout_s: float | None) -> SendResult:
        """One message sent: in the open batch of its topic, side and key (``auto_batch``), else alone."""
        fields = self._fields(message, gray, int(time.time() * 1000), handling, properties)
        if self.auto_batch and timeout_s is None and self.started:
            return await self.accumulator.send((message.topic, gray, message.sharding_key), fields, len(message.body))
        return await self._send_one(message.topic, gray, message.sharding_key, fields, timeout_s)

    async def _send_one(self, topic: str, gray: Mark, sharding_key: str | None, fields: dict[str, Any],
                        timeout_s: float | None) -> SendResult:
        req = pb.SendRequest(producer_group=self.group, message=fields, producer_id=self.producer_id)
        mq, resp = await self._with_retries(topic, gray, sharding_key, req, timeout_s)
        return SendResult(SendStatus.SEND_OK, resp.msg_id, mq, resp.queue_offset, bool(gray), resp.commit_log_offset,
                          named_lane(gray))

    async def _send_batch_request(self, topic: str, gray: Mark, sharding_key: str | None,
                                  messages: list[dict[str, Any]], timeout_s: float | None) -> list[SendResult]:
        req = pb.SendBatchRequest(producer_group=self.group, topic=topic, messages=messages,
                                  producer_id=self.producer_id)
        mq, resp = await self._with_retries(topic, gray, sharding_key, req, timeout_s)
        return _batch_results(mq, resp, gray)

    async def send_batch_to(self, mq: MessageQueue, messages: Sequence[Message], sequence: int, *, gray: Mark,
                            msg_ids: Sequence[str], timeout_s: float | None = None) -> list[SendResult]:
        """A replayable request: ``messages`` (with ``msg_ids``) to ``mq`` numbered ``sequence``, every attempt to
        that queue under that number, so the same call repeated under the same ``producer_id`` — by this producer
        or another one given that id — is stored once. The caller picks ``mq`` among the side's queues
        (``selector.candidates``) and numbers its requests per queue in ascending order."""
        born_ms = int(time.time() * 1000)
        fields = [self._fields(m, gray, born_ms, None, m.properties) for m in messages]
        for one, msg_id in zip(fields, msg_ids, strict=True):
            one["msg_id"] = msg_id
        req = pb.SendBatchRequest(producer_group=self.group, topic=mq.topic, messages=fields,
                                  producer_id=self.producer_id, queue_id=mq.queue_id, sequence=sequence)
        _, resp = await self._with_retries(mq.topic, gray, None, req, timeout_s, pinned=mq)
        return _batch_results(mq, resp, gray)

    async def send_batch(self, messages: Sequence[Message], timeout_s: float | None = None) -> list[SendResult]:
        """All messages go to one queue of one topic in one request (same gray side, same key)."""
        if not messages:
            return []
        topic = messages[0].topic
        handling = current_message()
        gray = self._side(messages[0], handling)
        key = messages[0].sharding_key
        if tracer() is None:
            return await self._send_batch_request(topic, gray, key, self._batch_fields(messages, gray, handling, {}),
                                                  timeout_s)
        with send_span(topic, self.group, self.client_id, gray, {}, batch_size=len(messages)) as sending:
            fields = self._batch_fields(messages, gray, handling, sending.properties)
            results = await self._send_batch_request(topic, gray, key, fields, timeout_s)
            sending.stored(results[0].msg_id, results[0].queue.broker_name, results[0].queue.queue_id)
            return results

    def _batch_fields(self, messages: Sequence[Message], gray: Mark, handling: MessageExt | None,
                      context: dict[str, str]) -> list[dict[str, Any]]:
        """Each message's fields, the batch's span ``context`` added to its properties (each delivery is that span's
        child); refused unless every message shares the first one's topic and side."""
        topic, born_ms = messages[0].topic, int(time.time() * 1000)
        fields = []
        for m in messages:
            if m.topic != topic or self._side(m, handling) != gray:
                raise BadRequestError("a batch must share one topic and one gray mark")
            fields.append(self._fields(m, gray, born_ms, handling, {**m.properties, **context} if context else
                                       m.properties))
        return fields

    def send_async(self, message: Message,
                   callback: Callable[[SendResult | None, BaseException | None], None] | None = None
                   ) -> asyncio.Future[SendResult]:
        """Start a send and return its future (a task, or with ``auto_batch`` the message's place in the open
        batch: no task per message); ``callback(result, error)`` runs when it completes."""
        future: asyncio.Future[SendResult]
        if self.auto_batch and self.started and tracer() is None:  # traced: a task, whose span lasts the send
            handling = current_message()
            gray = self._side(message, handling)
            fields = self._fields(message, gray, int(time.time() * 1000), handling, message.properties)
            future = self.accumulator.append((message.topic, gray, message.sharding_key), fields, len(message.body))
        else:
            future = asyncio.get_running_loop().create_task(self.send(message))
            self._pending.add(future)

        def done(f: asyncio.Future[SendResult]) -> None:
            self._pending.discard(f)
            error = f.exception() if not f.cancelled() else asyncio.CancelledError()
            if callback is not None:
                callback(None if error else f.result(), error)
            elif error is not None:
                log.warning("async send to %s failed: %s", message.topic, error)

        future.add_done_callback(done)
        return future

    def send_oneway(self, message: Message) -> None:
        """Fire and forget: errors are logged, never raised."""
        self.send_async(message)

    async def _with_retries(self, topic: str, gray: Mark, sharding_key: str | None, req: _SendRequest,
                            timeout_s: float | None, pinned: MessageQueue | None = None) -> tuple[MessageQueue, Any]:
        """Send ``req`` (SEND_MESSAGE or SEND_BATCH) to a queue of the message's side until it is answered, the
        retry decision (``send_retry.after_failure``) stops or the timeout passes. Returns the queue and response.

        Before each attempt the step says where it goes: a new queue (the route as cached; read again from the
        name server after a broker did not know the topic, so a deleted topic fails at once), the same queue and
        sequence, or the same queue and sequence at its broker set's new leader (the route read again). A
        ``pinned`` request (``send_batch_to``) keeps its queue and sequence on every attempt. The sequence is the
        send window's (client/send_window.py), held until the send ends or moves to another queue.
        """
        if not self.started:
            raise BadRequestError("producer not started: await producer.start() first")
        deadline = time.monotonic() + (timeout_s or self.send_timeout_s)
        send = self.brokers.send_batch if isinstance(req, pb.SendBatchRequest) else self.brokers.send
        state, backoff = _FIRST_ATTEMPT, None  # made when a topic or a leader is first waited for
        mq, address, held = _NO_QUEUE, "", None
        if gray:  # no await since the side was chosen (or the accumulator held it): no report can miss it
            self._gray_send_began(gray)
        try:
            while state.step is not Step.STOP and (remaining := deadline - time.monotonic()) > 0:
                if state.step is not Step.SAME_QUEUE:
                    route = self.routes.fresh(topic) if state.error is None else None  # the common case, no await
                    if route is None:
                        try:
                            route = await self._route(topic, state, remaining)
                        except TimeoutError:  # a hung name server must not outlast the timeout
                            break
                    try:
                        mq, address = self._target(route, state, gray, sharding_key, mq, address, pinned)
                    except LaneSlotError as missing:  # the lane's first send to the topic
                        route = await with_timeout(route_with_slot(self.nameserver, self.routes, missing), remaining)
                        mq, address = self._target(route, state, gray, sharding_key, mq, address, pinned)
                    if state.step is not Step.NEW_LEADER:
                        held, address = await self._numbered(req, mq, address, held, deadline, pinned)
                try:
                    timeout = attempt_timeout(state, deadline - time.monotonic(), self.retry_times)
                    return mq, await send(address, req, timeout)  # type: ignore[arg-type]
                except GrayMQError as exc:
                    state = after_failure(state, exc, broker_name=mq.broker_name, retry_times=self.retry_times,
                                          replicated=_replicated(self.routes.cached(topic), mq.broker_name),
                                          brokers=send_brokers(self.selector, route, gray, self.gray_switch, mq,
                                                               fixed=sharding_key is not None or pinned is not None))
                    backoff = backoff or Backoff(TOPIC_WAIT_FIRST_S, TOPIC_WAIT_MAX_S)
                    await self._pause(state, mq, req.sequence, backoff, deadline)
            raise state.error or RequestTimeoutError(f"send to {topic} timed out")
        finally:
            if held is not None:
                self.window.release(*held)
            if gray:
                self._gray_send_ended()

    def _sending_gray(self) -> bool:
        """A gray send under way, or gray messages in an auto batch not yet answered."""
        return super()._sending_gray() or self.accumulator.holds(gray=True)

    async def _numbered(self, req: _SendRequest, mq: MessageQueue, address: str, held: tuple[QueueKey, int] | None,
                        deadline: float, pinned: MessageQueue | None) -> tuple[tuple[QueueKey, int], str]:
        """``req`` numbered for ``mq`` (a pinned one keeps its number), the sequence ``held`` before released (its
        attempt stored nothing); waits while ``mq``'s window is full, then reads ``mq``'s broker address again.
        Returns the sequence now held and the address."""
        if held is not None:
            self.window.release(*held)
        key, fixed = queue_key(mq), req.sequence if pinned is not None else None
        sequence = self.window.take_now(key, fixed, again=held is not None)
        if sequence is None:
            sequence = await self.window.take(key, deadline, fixed)
            route = self.routes.cached(mq.topic)
            address = (route.address_of(mq.broker_name) if route is not None else None) or address
        req.queue_id = mq.queue_id
        req.sequence = sequence
        return (key, sequence), address

    async def _route(self, topic: str, state: RetryState, remaining_s: float) -> TopicRoute:
        """The route the next attempt reads: cached while fresh on a first attempt, asked again of the name server
        when the step says so, else the cache's (refreshed in the background when due)."""
        if state.error is None and (route := self.routes.fresh(topic)) is not None:
            return route
        refresh = state.step in (Step.NEW_LEADER, Step.WAIT_LEADER, Step.RECHECK_TOPIC)
        return await with_timeout(self.routes.get(topic, refresh=refresh), remaining_s)

    def _target(self, route: TopicRoute, state: RetryState, gray: Mark, sharding_key: str | None,
                mq: MessageQueue, address: str, pinned: MessageQueue | None = None) -> tuple[MessageQueue, str]:
        """The queue and broker address of the next attempt: the same queue at its set's leader, or a queue
        selected (away from ``state.avoid_broker``, one with room in the send window preferred)."""
        if state.step is Step.NEW_LEADER:
            return mq, route.address_of(mq.broker_name) or address
        if pinned is not None:
            if (pinned_address := route.address_of(pinned.broker_name)) is None:
                raise ServiceNotAvailableError(f"broker {pinned.broker_name} is not in the route of {pinned.topic}")
            return pinned, pinned_address
        mq = select_with_room(self.selector, self.window, route, gray, self.gray_switch, state.avoid_broker,
                              sharding_key)
        found = route.address_of(mq.broker_name)
        assert found is not None
        return mq, found

    async def _pause(self, state: RetryState, mq: MessageQueue, sequence: int, backoff: Backoff,
                     deadline: float) -> None:
        """Between a failed attempt and the next (``send_pause.pause_s``): a stale route, a log line, a wait."""
        delay_s = pause_s(state, mq, sequence, backoff, self.routes, max(deadline - time.monotonic(), 0.0))
        if delay_s > 0:
            await asyncio.sleep(delay_s)

def _batch_results(mq: MessageQueue, resp: Any, side: Mark) -> list[SendResult]:
    """One ``SendResult`` per message of a SEND_BATCH answer (offsets -1: a duplicate stored longer ago than the
    broker remembers where)."""
    first, gray, lane = resp.first_queue_offset, bool(side), named_lane(side)
    if first < 0:
        return [SendResult(SendStatus.SEND_OK, msg_id, mq, -1, gray, -1, lane) for msg_id in resp.msg_ids]
    return [SendResult(SendStatus.SEND_OK, msg_id, mq, first + i, gray, -1, lane)
            for i, msg_id in enumerate(resp.msg_ids)]


def _replicated(route: TopicRoute | None, broker_name: str) -> bool:
    """Whether ``broker_name`` is a broker set with replicas (one that is gone has a successor)."""
    broker = route.broker(broker_name) if route is not None else None
    return broker is not None and broker.replicas > 1
