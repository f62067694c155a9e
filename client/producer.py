"""Producer: route lookup, gray queue selection, retries across brokers; sync, async, one-way and batch sends.

The producer's gray flag comes from the name server (explicit per-client value, gray rules,
the group's switch) and changes live; the producer reports the flag it applies in its next
heartbeat, which is how the controller knows no new gray message will be sent.

A message's gray mark (``Message(gray=True)``, or that of the message being handled) is a request the
release decides, not an override: the name server's ``gray_marks`` says whether this producer may honour
marks (switch on, no promote/rollback of its producer group running, no explicit normal flag, a right naming
the producer group). Once a promote or rollback has told a producer to be normal, nothing it sends lands in
the gray queues. The rule per source and group state is the table in ``client/gray_side.py`` and the README's
cutover runbook; a ``SendResult``'s ``gray`` is the side the message really took.

Auto batching (RocketMQ 5's autoBatch, without its linger; on by default, ``auto_batch=False`` turns it
off): ``send()`` calls made during one turn of the event loop for the same topic, gray side and sharding
key leave as one SEND_BATCH at the end of that turn — a message is never held back waiting for others,
and a lone send is still a plain SEND_MESSAGE. Concurrent senders (many tasks, ``send_async``) then cost
one request per turn instead of one per message. A batch the broker refuses as a whole is resent one
message at a time, so each sender gets its own answer.

Idempotent retries: every request carries the producer's id (random, one per ``Producer``) and a sequence
number per (broker, topic, queue). A request whose outcome is unknown (a timeout, a connection lost after it
was written, a sync flush that timed out) is retried to the same broker and queue with the same number, and
the broker answers a request it stored already with the first result instead of storing it again. Only a
request known not to be stored (no connection could be made, a refusal) goes to another broker, under that
queue's next number.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from graymq.client.broker_client import BrokerClient
from graymq.client.context import current_message
from graymq.client.gray_side import send_side
from graymq.client.membership import Membership, new_client_id
from graymq.client.message import Message, MessageExt, MessageQueue, SendResult, SendStatus
from graymq.client.nameserver_client import NameServerClient
from graymq.client.route import TopicRoute
from graymq.client.route_cache import SharedRouteCache
from graymq.client.selector import GrayQueueSelector
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.aio import with_timeout
from graymq.protocol.errors import (
    BadRequestError,
    ConnectFailedError,
    ConnectionClosedError,
    FlushTimeoutError,
    GrayMQError,
    NotLeaderError,
    ReplicationTimeoutError,
    RequestTimeoutError,
    TopicNotExistError,
)
from graymq.protocol.retry import Backoff

log = logging.getLogger(__name__)
_HOST = socket.gethostname()
_SendRequest: TypeAlias = pb.SendRequest | pb.SendBatchRequest
_BatchKey = tuple[str, bool, str | None]  # topic, gray, sharding key
# Backoff while a broker does not know a topic the route has (created moments ago): doubling, capped, jittered.
TOPIC_WAIT_FIRST_S = 0.05
TOPIC_WAIT_MAX_S = 0.5
LEADER_WAIT_S = 0.2  # between asking the name server who leads a broker set that lost its leader


def new_msg_id() -> str:
    return secrets.token_hex(16).upper()


def outcome_unknown(exc: GrayMQError) -> bool:
    """Whether the request may have been stored: sent, then no answer (timeout, connection lost), a sync
    flush or a sync replication that timed out. A connection that could not be opened sent nothing; a broker's
    refusal stored nothing."""
    if isinstance(exc, ConnectionClosedError):
        return not isinstance(exc, ConnectFailedError)
    return isinstance(exc, RequestTimeoutError | FlushTimeoutError | ReplicationTimeoutError)


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


class _OpenBatch:
    """Messages waiting for the end of this turn of the loop, each with the future of its send()."""

    __slots__ = ("items", "size")

    def __init__(self) -> None:
        self.items: list[tuple[dict[str, Any], asyncio.Future[SendResult]]] = []
        self.size = 0


async def _settle(future: asyncio.Future[SendResult], send: Any) -> None:
    """Await ``send`` and hand its outcome to ``future`` (unless the caller gave up on it)."""
    try:
        result = await send
    except Exception as exc:  # noqa: BLE001 - delivered to the caller awaiting the future
        if not future.done():
            future.set_exception(exc)
        return
    if not future.done():
        future.set_result(result)


class _MemoSelector(GrayQueueSelector):
    """``GrayQueueSelector`` with each route's candidate queues computed once, not at every send.

    Routes are immutable and a refresh makes a new object, so the memo is keyed by the route
    object (held, so its id cannot be reused) and the flags that choose the set.
    """

    def __init__(self) -> None:
        super().__init__()
        self._memo: dict[tuple[int, bool, bool], tuple[TopicRoute, list[MessageQueue]]] = {}

    def candidates(self, route: TopicRoute, gray: bool, gray_switch: bool) -> list[MessageQueue]:
        key = (id(route), gray, gray_switch)
        hit = self._memo.get(key)
        if hit is not None and hit[0] is route:
            return hit[1]
        queues = super().candidates(route, gray, gray_switch)
        if len(self._memo) >= 256:  # old routes: drop them all, the live ones come back at once
            self._memo.clear()
        self._memo[key] = (route, queues)
        return queues


class Producer:
    """Async producer. ``await start()`` before sending, ``await stop()`` at the end (it sends the open batches).

    ``auto_batch`` (default on) joins the sends of one loop turn into SEND_BATCH requests of at most
    ``batch_max_messages`` messages / ``batch_max_bytes`` body bytes; ``send(timeout_s=...)`` always goes alone.

    A send makes up to ``1 + retry_times`` attempts within ``send_timeout_s`` (or its ``timeout_s``); each
    attempt may use an equal share of the time left, so a timed-out attempt leaves time for its retry.
    """

    def __init__(
        self,
        group: str,
        nameserver: str | list[str] | None = None,
        *,
        client_id: str | None = None,
        labels: dict[str, str] | None = None,
        gray: bool | None = None,
        retry_times: int = 2,
        send_timeout_s: float = 3.0,
        heartbeat_interval_s: float = 2.0,
        route_ttl_s: float = 30.0,
        auto_batch: bool = True,
        batch_max_messages: int = 64,
        batch_max_bytes: int = 1 << 20,
        token: str | None = None,
    ) -> None:
        if retry_times < 0:
            raise BadRequestError("retry_times must be >= 0")
        self.group = group
        self.client_id = client_id or new_client_id("producer")
        self.retry_times = retry_times
        self.send_timeout_s = send_timeout_s
        self.gray = bool(gray)
        self.gray_switch = True
        self.gray_marks = False  # honour messages' gray marks: only once the name server says so
        self.nameserver = NameServerClient(nameserver, token=token)  # token: GRAYMQ_TOKEN by default
        self.routes = SharedRouteCache(self.nameserver, route_ttl_s)
        self.brokers = BrokerClient(token=token)
        self.selector: GrayQueueSelector = _MemoSelector()
        self.ids = MessageIds()
        self.producer_id = secrets.randbits(64) or 1  # one per instance: a restarted producer is a new one
        self._sequences: dict[tuple[str, str, int], int] = {}  # (broker, topic, queue id) -> next sequence
        self.membership = Membership(
            self.nameserver, group=group, client_id=self.client_id, role="producer", labels=dict(labels or {}),
            declared_gray=gray, interval_s=heartbeat_interval_s, report=self._report, on_update=self._on_update,
        )
        self._pending: set[asyncio.Task[Any]] = set()
        self.started = False
        self.auto_batch = auto_batch
        self.batch_max_messages = max(1, batch_max_messages)
        self.batch_max_bytes = batch_max_bytes
        self._open_batches: dict[_BatchKey, _OpenBatch] = {}

    def _report(self) -> dict[str, Any]:
        gray = self.gray and self.started  # a stopped producer sends nothing: it cannot send gray
        return {"gray": gray, "state": "GRAY" if gray else "NORMAL", "topics": self.routes.topics(), "queues": [],
                "gray_marks": self.gray_marks}

    async def _on_update(self, response: dict[str, Any]) -> None:
        desired = bool(response.get("desired_gray", self.gray))
        marks = bool(response.get("gray_marks", True))  # a name server without the field honours them
        self.gray_switch = bool(response.get("gray_switch", self.gray_switch))
        if desired != self.gray or marks != self.gray_marks:
            log.info("producer %s of %s: gray flag %s -> %s, gray marks honoured %s -> %s", self.client_id,
                     self.group, self.gray, desired, self.gray_marks, marks)
            self.gray, self.gray_marks = desired, marks
            self.membership.poke()  # report the applied values at once

    async def start(self) -> None:
        await self.membership.beat()
        self.membership.start()
        self.started = True

    async def stop(self) -> None:
        """Send what is batched and in flight, then leave the group in the name server and close."""
        for key, batch in list(self._open_batches.items()):
            self._close_batch(key, batch)
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        await self.membership.stop()
        self.started = False
        await self.membership.unregister()  # so a promote does not wait for this producer to go stale
        await self.routes.close()
        await self.brokers.close()
        await self.nameserver.close()

    # -- sending ---------------------------------------------------------------------------
    def _side(self, message: Message, handling: MessageExt | None) -> bool:
        """Gray or not (``gray_side.send_side``): while the name server lets this producer honour marks, the
        message's explicit mark, else that of the message being handled (``handling``, from ``current_message()``),
        else the producer's flag; otherwise the producer's flag alone."""
        return send_side(self.gray, message.gray, None if handling is None else handling.gray,
                         marks_honoured=self.gray_marks, gray_switch=self.gray_switch)

    def _fields(self, message: Message, gray: bool, born_ms: int, handling: MessageExt | None) -> dict[str, Any]:
        """The ``pb.Message`` of ``message`` as constructor fields (a request built from dicts costs a third of
        one built from message objects, which protobuf copies); empty fields are left out. ``handling``: the
        message being handled (its trace id is inherited)."""
        if not message.topic:
            raise BadRequestError("message without topic")
        trace_id = message.trace_id or (handling.trace_id if handling else "") or self.ids.trace_id()
        fields: dict[str, Any] = {
            "topic": message.topic, "body": message.body, "gray": gray, "trace_id": trace_id,
            "msg_id": self.ids.msg_id(), "born_timestamp": born_ms, "born_host": _HOST,
        }
        if message.tags:
            fields["tags"] = message.tags
        if message.keys:
            fields["keys"] = message.keys
        if message.properties:
            fields["properties"] = message.properties
        return fields

    async def send(self, message: Message, timeout_s: float | None = None) -> SendResult:
        handling = current_message()
        gray = self._side(message, handling)
        fields = self._fields(message, gray, int(time.time() * 1000), handling)
        if self.auto_batch and timeout_s is None and self.started:
            key = (message.topic, gray, message.sharding_key)
            batch = self._open_batches.get(key)
            if batch is not None:
                return await self._add_to_batch(key, batch, message, fields)
            return await self._lead_batch(key, message, fields)
        return await self._send_one(message.topic, gray, message.sharding_key, fields, timeout_s)

    async def _send_one(self, topic: str, gray: bool, sharding_key: str | None, fields: dict[str, Any],
                        timeout_s: float | None) -> SendResult:
        req = pb.SendRequest(producer_group=self.group, message=fields, producer_id=self.producer_id)
        mq, resp = await self._with_retries(topic, gray, sharding_key, req, timeout_s)
        return SendResult(SendStatus.SEND_OK, resp.msg_id, mq, resp.queue_offset, gray, resp.commit_log_offset)

    async def _send_batch_request(self, topic: str, gray: bool, sharding_key: str | None,
                                  messages: list[dict[str, Any]], timeout_s: float | None) -> list[SendResult]:
        req = pb.SendBatchRequest(producer_group=self.group, topic=topic, messages=messages,
                                  producer_id=self.producer_id)
        mq, resp = await self._with_retries(topic, gray, sharding_key, req, timeout_s)
        first = resp.first_queue_offset
        if first < 0:  # a duplicate stored longer ago than the broker remembers where
            return [SendResult(SendStatus.SEND_OK, msg_id, mq, -1, gray) for msg_id in resp.msg_ids]
        return [SendResult(SendStatus.SEND_OK, msg_id, mq, first + i, gray) for i, msg_id in enumerate(resp.msg_ids)]

    # -- auto batching -----------------------------------------------------------------------
    async def _lead_batch(self, key: _BatchKey, message: Message, fields: dict[str, Any]) -> SendResult:
        """``send()`` opening a batch: the other sends of this loop turn join it; alone, the message leaves from
        this coroutine as a plain send (no task, one loop turn later), else the batch leaves from a task."""
        batch = self._open_batches[key] = _OpenBatch()
        future = self._add_to_batch(key, batch, message, fields)
        try:
            await asyncio.sleep(0)
        finally:  # cancelled too: the messages that joined still leave
            alone = self._open_batches.get(key) is batch and len(batch.items) == 1
            if alone:
                del self._open_batches[key]
            else:
                self._close_batch(key, batch)
        if alone:
            return await self._send_one(*key, fields, None)
        return await future

    def _join_batch(self, message: Message, gray: bool, fields: dict[str, Any]) -> asyncio.Future[SendResult]:
        """Add the message to the open batch of its (topic, gray, sharding key); the batch leaves at the end of
        this turn of the loop, or at once when full."""
        key = (message.topic, gray, message.sharding_key)
        batch = self._open_batches.get(key)
        if batch is None:
            batch = self._open_batches[key] = _OpenBatch()
            asyncio.get_running_loop().call_soon(self._close_batch, key, batch)
        return self._add_to_batch(key, batch, message, fields)

    def _add_to_batch(self, key: _BatchKey, batch: _OpenBatch, message: Message,
                      fields: dict[str, Any]) -> asyncio.Future[SendResult]:
        future: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()
        batch.items.append((fields, future))
        batch.size += len(message.body)
        if len(batch.items) >= self.batch_max_messages or batch.size >= self.batch_max_bytes:
            self._close_batch(key, batch)
        return future

    def _close_batch(self, key: _BatchKey, batch: _OpenBatch) -> None:
        if self._open_batches.get(key) is not batch:
            return  # closed already (full)
        del self._open_batches[key]
        task = asyncio.get_running_loop().create_task(self._send_closed_batch(*key, batch.items))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _send_closed_batch(self, topic: str, gray: bool, sharding_key: str | None,
                                 items: list[tuple[dict[str, Any], asyncio.Future[SendResult]]]) -> None:
        if len(items) == 1:
            fields, future = items[0]
            await _settle(future, self._send_one(topic, gray, sharding_key, fields, None))
            return
        try:
            results = await self._send_batch_request(topic, gray, sharding_key, [f for f, _ in items], None)
        except GrayMQError as exc:
            if exc.retriable:
                for _, future in items:
                    if not future.done():
                        future.set_exception(exc)
                return
            # Refused as a whole (the broker stores nothing of a refused batch): send them one by one so
            # each message gets its own answer and one bad message does not fail the others.
            for fields, future in items:
                await _settle(future, self._send_one(topic, gray, sharding_key, fields, None))
            return
        except BaseException as exc:
            for _, future in items:
                if not future.done():
                    future.set_exception(exc)
            raise
        for (_, future), result in zip(items, results, strict=True):
            if not future.done():
                future.set_result(result)

    async def send_batch(self, messages: Sequence[Message], timeout_s: float | None = None) -> list[SendResult]:
        """All messages go to one queue of one topic in one request (same gray side, same key)."""
        if not messages:
            return []
        topic = messages[0].topic
        handling = current_message()
        gray = self._side(messages[0], handling)
        born_ms = int(time.time() * 1000)
        fields = []
        for m in messages:
            if m.topic != topic or self._side(m, handling) != gray:
                raise BadRequestError("a batch must share one topic and one gray mark")
            fields.append(self._fields(m, gray, born_ms, handling))
        return await self._send_batch_request(topic, gray, messages[0].sharding_key, fields, timeout_s)

    def send_async(self, message: Message,
                   callback: Callable[[SendResult | None, BaseException | None], None] | None = None
                   ) -> asyncio.Future[SendResult]:
        """Start a send and return its future (a task, or with ``auto_batch`` the message's place in the open
        batch: no task per message); ``callback(result, error)`` runs when it completes."""
        future: asyncio.Future[SendResult]
        if self.auto_batch and self.started:
            handling = current_message()
            gray = self._side(message, handling)
            future = self._join_batch(message, gray, self._fields(message, gray, int(time.time() * 1000), handling))
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

    def _next_sequence(self, mq: MessageQueue) -> int:
        key = (mq.broker_name, mq.topic, mq.queue_id)
        sequence = self._sequences.get(key, 0)
        self._sequences[key] = sequence + 1
        return sequence

    async def _with_retries(self, topic: str, gray: bool, sharding_key: str | None, req: _SendRequest,
                            timeout_s: float | None) -> tuple[MessageQueue, Any]:
        """Send ``req`` (SEND_MESSAGE or SEND_BATCH) to a queue of the message's side; on a retriable error, again,
        up to ``retry_times`` more, within the timeout. Returns the queue and response.

        An attempt whose outcome is unknown (``outcome_unknown``) is repeated to the same broker and queue under
        the same sequence, so the broker stores the request once — at the new leader of its broker set when that
        broker is gone or no longer leads (the followers hold what it stored, sequence included); one that certainly
        stored nothing (no connection, a refusal) goes to another broker under the next sequence of the queue chosen
        there. Each
        attempt may take the time left divided by the attempts left.

        A broker that does not know the topic yet (just created: it learns topics when it registers with the
        name server) is asked again after a short backoff until the timeout, without counting against
        ``retry_times``; the route is asked again of the name server first, so a deleted topic fails at once.
        """
        if not self.started:
            raise BadRequestError("producer not started: await producer.start() first")
        deadline = time.monotonic() + (timeout_s or self.send_timeout_s)
        send = self.brokers.send_batch if isinstance(req, pb.SendBatchRequest) else self.brokers.send
        last_broker: str | None = None
        error: GrayMQError | None = None
        retries = 0
        topic_wait = Backoff(TOPIC_WAIT_FIRST_S, TOPIC_WAIT_MAX_S)
        unknown: tuple[MessageQueue, str] | None = None  # queue and address of an attempt that may have stored
        moved = False  # that attempt's broker is gone or no longer leads its set: find its set's leader
        route: TopicRoute | None = None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            if unknown is not None:
                mq, address = unknown
                if moved:  # the broker set's leader changed: ask the new one, same queue and sequence
                    try:
                        route = await with_timeout(self.routes.get(topic, refresh=True), remaining)
                    except TimeoutError:
                        break
                    address = route.address_of(mq.broker_name) or address
                    unknown, moved = (mq, address), False
            else:
                route = self.routes.fresh(topic) if error is None else None
                if isinstance(error, TopicNotExistError):
                    try:  # does the name server still know the topic? (a hung one must not outlast the timeout)
                        route = await with_timeout(self.routes.get(topic, refresh=True), remaining)
                    except TimeoutError:
                        break
                elif route is None:
                    try:  # the first lookup, or one after a failed attempt: bounded like the refresh above
                        route = await with_timeout(self.routes.get(topic), remaining)
                    except TimeoutError:
                        break
                mq = self.selector.select(route, gray, gray_switch=self.gray_switch, last_broker=last_broker,
                                          sharding_key=sharding_key)
                found = route.address_of(mq.broker_name)
                assert found is not None
                address = found
                req.queue_id = mq.queue_id
                req.sequence = self._next_sequence(mq)
            try:
                attempt_s = max(deadline - time.monotonic(), 0.001) / (1 + self.retry_times - retries)
                return mq, await send(address, req, attempt_s)  # type: ignore[arg-type]
            except TopicNotExistError as exc:
                error = exc
                unknown = None
                last_broker = mq.broker_name
                backoff_s = topic_wait.next()
                log.info("%s does not know topic %s yet; asking again in %.2fs", mq.broker_name, topic, backoff_s)
                await asyncio.sleep(min(backoff_s, max(deadline - time.monotonic(), 0.0)))
            except GrayMQError as exc:
                if not exc.retriable:
                    raise
                error = exc
                retries += 1
                if outcome_unknown(exc):
                    unknown = (mq, address)
                elif unknown is not None and (isinstance(exc, NotLeaderError) or (
                        isinstance(exc, ConnectFailedError) and _replicated(route, mq.broker_name))):
                    moved = True  # it may be stored on that broker set: only its new leader can say
                    retries -= 1  # waiting for a new leader, bounded by the timeout, not by retry_times
                    self.routes.invalidate(topic)
                    await asyncio.sleep(min(LEADER_WAIT_S, max(deadline - time.monotonic(), 0.0)))
                else:
                    unknown = None
                    last_broker = mq.broker_name
                    self.routes.invalidate(topic)
                if retries > self.retry_times:
                    break
                log.info("send to %s failed (%s), retrying %s", mq, exc.message,
                         f"the same queue (sequence {req.sequence})" if unknown else "on another broker")
        if error is None:
            raise RequestTimeoutError(f"send to {topic} timed out")
        raise error


def _replicated(route: TopicRoute | None, broker_name: str) -> bool:
    """Whether ``broker_name`` is a broker set with replicas (one that is gone has a successor)."""
    broker = route.broker(broker_name) if route is not None else None
    return broker is not None and broker.replicas > 1
