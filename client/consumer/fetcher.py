"""The fetcher of a push consumer: one long-polling pull loop per queue held, the listener's batches dispatched,
failed batches sent back to the broker (retry topic, then dead-letter queue), and the offsets committed.

A record that does not decode is skipped, logged at ERROR and counted in ``skipped_records``; the queue
flows on. A failed pull is retried after a capped, jittered backoff, after acting on what it means
(another client holds the queue, the route is stale, the broker lost this client's heartbeat).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable

from graymq.client.consumer.assignment import Assignment
from graymq.client.consumer.consume_service import ListenerRunner
from graymq.client.consumer.eager import run_eagerly
from graymq.client.consumer.health import ConsumeHealth
from graymq.client.consumer.offset_store import OffsetStore
from graymq.client.consumer.process_queue import ProcessQueue, Stop, parted_at
from graymq.client.consumer.pulled_records import decode_pulled, log_damaged
from graymq.client.consumer.runtime import ConsumerRuntime
from graymq.client.message import MessageExt
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.constants import PROPERTY_RETRY_TOPIC, parse_sub_expression, retry_topic
from graymq.protocol.errors import (
    ConnectionClosedError,
    GrayIsolationError,
    GrayMQError,
    NotLeaderError,
    QueueLockedError,
    QueueNotExistError,
    RequestTimeoutError,
    SubscriptionNotExistError,
    TopicNotExistError,
)
from graymq.protocol.retry import Backoff

log = logging.getLogger(__name__)

PULL_BACKOFF = (0.1, 3.0)  # seconds: first retry delay and cap of a failing pull
# A failed pull of these may mean the route is stale (broker moved, queues changed, another replica leads: a leader
# cut off from the name servers is deposed while its clients still reach it): ask the name server again.
ROUTE_SUSPECT = (ConnectionClosedError, RequestTimeoutError, TopicNotExistError, QueueNotExistError, NotLeaderError)

Lost = Callable[[ProcessQueue, GrayMQError], None]
Rejoin = Callable[[], Awaitable[None]]


class Fetcher:
    """Pulls, dispatches and commits the queues of ``assignment``; ``on_lost`` hears of a queue another client
    holds now, ``rejoin`` heartbeats the brokers again (one restarted and lost this client)."""

    def __init__(self, runtime: ConsumerRuntime, assignment: Assignment, offset_store: OffsetStore,
                 runner: ListenerRunner, *, orderly: bool, on_lost: Lost, rejoin: Rejoin) -> None:
        self.runtime = runtime
        self.assignment = assignment
        self.offset_store = offset_store
        self.runner = runner
        self.orderly = orderly
        self.on_lost = on_lost
        self.rejoin = rejoin
        self.health = ConsumeHealth()  # per side: consumed, failed, sent back, dead-lettered, latency
        self.consumed = 0
        self.skipped_records = 0
        self._slots = asyncio.Semaphore(runtime.settings.max_threads * 2)
        self.moved = asyncio.Event()  # set when a queue's commit offset may have moved: the persist loop's cue

    def fetch(self, pq: ProcessQueue) -> None:
        """Start pulling ``pq`` (a restart after an unexpected error pulls again from its commit offset)."""
        self.moved.set()  # its start offset, never committed perhaps
        pq.task = self.runtime.tasks.spawn(f"pull {pq.mq}", functools.partial(self._pull_loop, pq),
                                           on_restart=pq.rewind)

    # -- pulling ---------------------------------------------------------------------------
    def _pull_request(self, pq: ProcessQueue) -> pb.PullRequest:
        """The queue's request, its changing fields set before each pull (the client serializes it at once)."""
        rt, mq = self.runtime, pq.mq
        return pb.PullRequest(
            consumer_group=rt.group, client_id=rt.client_id, topic=mq.topic, queue_id=mq.queue_id,
            max_msg_nums=rt.settings.pull_batch_size, suspend_timeout_ms=int(rt.settings.long_poll_s * 1000),
            adopted=pq.adopted, sub_expression=rt.subscriptions[mq.topic],
        )

    async def _pull_loop(self, pq: ProcessQueue) -> None:
        mq, rt = pq.mq, self.runtime
        request = self._pull_request(pq)
        tags = parse_sub_expression(request.sub_expression)
        backoff = Backoff(*PULL_BACKOFF)
        while not pq.dropped:
            if not pq.space.is_set():  # room in flight (usually): no wait coroutine per pull
                await pq.space.wait()
            request.queue_offset = pulled_from = pq.pull_offset
            request.gray_flag = rt.gray
            request.lane = rt.wire_lane
            request.commit_offset = -1 if rt.broadcasting else pq.commit_offset()
            try:
                response = await rt.brokers.pull(pq.address, request)
            except GrayMQError as exc:
                if not await self._pull_failed(pq, exc):
                    return
                await asyncio.sleep(backoff.next())
                continue
            if backoff.attempts:
                log.info("pull of topic %s queue %d from broker %s works again after %d failed attempt(s)",
                         mq.topic, mq.queue_id, mq.broker_name, backoff.attempts)
                backoff.reset()
            if pq.dropped:
                return
            next_offset = response.next_begin_offset
            if response.status != pb.FOUND:
                if next_offset != pq.pull_offset:
                    pq.advance(next_offset)
                    self.moved.set()
                continue
            messages, damaged = decode_pulled(response.records, mq.broker_name, tags, pulled_from, next_offset)
            if damaged:
                self.skipped_records += len(damaged)
                log_damaged(mq, pq.address, damaged)
            pq.add([m.queue_offset for m in messages], next_offset, rt.settings.max_in_flight_per_queue, messages)
            self.moved.set()
            if messages:
                await self._dispatch(pq, messages)

    async def parted_at(self, pq: ProcessQueue, stop: Stop) -> int:
        """Where ``pq`` (at its committed offset) resumes on its broker after this client stopped at ``stop`` on
        another: ``stop.offset`` when the broker holds what this client consumed up to there, else the first offset
        where its log parts from what was consumed (a new leader's messages at offsets read from the old leader's
        uncopied tail), or the committed offset when what was consumed since is not all known. Read with pulls
        not held and committing nothing."""
        start = pq.pull_offset
        if start < stop.read_from:
            return start
        rt, offset = self.runtime, start
        held: list[tuple[int, str]] = []
        request = self._pull_request(pq)
        request.suspend_timeout_ms, request.commit_offset = 0, -1  # not held, committing nothing
        request.gray_flag, request.lane = rt.gray, rt.wire_lane
        tags = parse_sub_expression(request.sub_expression)
        while offset < stop.offset:
            request.queue_offset = offset
            response = await rt.brokers.pull(pq.address, request)
            if response.status == pb.FOUND:
                messages, _ = decode_pulled(response.records, pq.mq.broker_name, tags, offset,
                                            response.next_begin_offset)
                held.extend((m.queue_offset, m.msg_id) for m in messages if m.queue_offset < stop.offset)
            if response.status not in (pb.FOUND, pb.NO_MATCHED_MSG) or response.next_begin_offset <= offset:
                break  # its log ends here (or the offset is no longer held)
            offset = response.next_begin_offset
        return parted_at([r for r in stop.read if r[0] >= start], held, offset, stop.offset)

    async def _pull_failed(self, pq: ProcessQueue, exc: GrayMQError) -> bool:
        """Act on a failed pull before it is retried (after a backoff); False when the pull loop ends instead."""
        mq, rt = pq.mq, self.runtime
        if isinstance(exc, QueueLockedError):
            self.on_lost(pq, exc)
            return False
        if isinstance(exc, GrayIsolationError):  # this client's flag or the allocation changed meanwhile
            log.info("%s: %s; rebalancing", mq, exc.message)
            rt.rebalance_now.set()
            return True
        if isinstance(exc, SubscriptionNotExistError):  # the broker lost this client's heartbeat (restarted)
            await self.rejoin()
            return rt.failure is None
        what = f"pull of topic {mq.topic} queue {mq.queue_id} from broker {mq.broker_name} ({pq.address})"
        if isinstance(exc, TopicNotExistError) and await self._topic_deleted(mq.topic):
            rt.fail(TopicNotExistError(f"topic {mq.topic} was deleted (the name server has no route for it): "
                                       f"{exc.message}"), what)
            return False
        if isinstance(exc, ROUTE_SUSPECT):
            rt.routes.invalidate(mq.topic)
            rt.rebalance_now.set()
        return rt.retry_later(exc, what, ("pull", mq, exc.code, exc.message))

    async def _topic_deleted(self, topic: str) -> bool:
        """Whether the name server has no route for ``topic`` any more (a broker saying so may only lag behind)."""
        try:
            await self.runtime.routes.get(topic, refresh=True)
        except TopicNotExistError:
            return True
        except GrayMQError:
            return False
        return False

    # -- consuming -------------------------------------------------------------------------
    async def _dispatch(self, pq: ProcessQueue, messages: list[MessageExt]) -> None:
        """Hand the messages to the listener in batches; stops at a queue being handed over (what was not
        dispatched stays uncommitted and goes with the queue)."""
        size = 1 if self.orderly else self.runtime.settings.consume_batch_size
        for i in range(0, len(messages), size):
            if pq.dropped:
                return
            batch = messages[i : i + size]
            if self.orderly:
                pq.in_listener = True
                try:
                    await self._consume(pq, batch)
                finally:
                    pq.in_listener = False
                continue
            await self._slots.acquire()
            if pq.dropped:
                self._slots.release()
                return
            self._start(pq, batch)

    def _start(self, pq: ProcessQueue, batch: list[MessageExt]) -> None:
        """Run the batch at once; only one whose listener waits gets a task, tracked so a hand-over waits for it."""
        try:
            task = run_eagerly(self._consume(pq, batch))
        except Exception:  # _consume handles the listener's failures: this is a bug, logged as a task's would be
            self._slots.release()
            log.exception("consumer %s: a batch of %s ended with an unexpected error", self.runtime.client_id, pq.mq)
            return
        if task is None:
            self._slots.release()
            return
        self.assignment.track(pq, task)
        task.add_done_callback(functools.partial(self._consumed, pq))

    def _consumed(self, pq: ProcessQueue, task: asyncio.Task[None]) -> None:
        self.assignment.finished(pq, task)
        self._slots.release()
        self.runtime.tasks.report(task)

    async def _consume(self, pq: ProcessQueue, batch: list[MessageExt]) -> None:
        """Run the listener until the batch succeeds or is sent back; a cancelled batch, or a failed one of a
        queue handed over meanwhile, stays uncommitted.

        The listener's own exceptions are failures of the batch (see ``ListenerRunner``); anything else
        raised here is a bug, logged at ERROR, and the batch is retried like a failed one.
        """
        rt, delay = self.runtime, 0.2
        while True:
            try:
                started = time.monotonic()
                accepted = await self.runner.run(batch, pq.lane)
                (self.health.consumed if accepted else self.health.failed)(rt.gray, len(batch),
                                                                           time.monotonic() - started, rt.lane)
                if accepted or (not self.orderly and not rt.flip.gray_state.draining
                                and await self._send_back(pq, batch)):
                    break
            except Exception as exc:
                rt.tasks.unexpected(f"consume of {pq.mq}", exc, delay)
            if pq.dropped:  # handed over: the next owner consumes the batch again
                return
            await asyncio.sleep(delay)  # orderly, draining, or send-back failed: retry here
            delay = min(delay * 2, 5.0)
        self.consumed += len(batch)
        pq.done([m.queue_offset for m in batch], rt.settings.max_in_flight_per_queue)
        self.moved.set()

    async def _send_back(self, pq: ProcessQueue, batch: list[MessageExt]) -> bool:
        rt = self.runtime
        try:
            for message in batch:
                await rt.brokers.send_back(pq.address, pb.SendBackRequest(
                    consumer_group=rt.group, commit_log_offset=message.commit_log_offset,
                    max_reconsume_times=rt.settings.max_reconsume_times, gray_flag=rt.gray, lane=rt.wire_lane,
                    origin_topic=origin_topic(message, rt.group),
                ))
            out_of_retries = sum(1 for m in batch if m.reconsume_times + 1 > rt.settings.max_reconsume_times)
            self.health.sent_back(rt.gray, len(batch), out_of_retries, rt.lane)
        except GrayMQError as exc:
            mq = pq.mq
            what = (f"send back of {len(batch)} failed message(s) of topic {mq.topic} queue {mq.queue_id} to broker "
                    f"{mq.broker_name} ({pq.address})")
            rt.retry_later(exc, what, ("send back", mq, exc.code, exc.message))
            return False
        return True

    # -- offsets ---------------------------------------------------------------------------
    async def commit(self, pq: ProcessQueue) -> None:
        """Commit what ``pq`` consumed (the lowest offset not consumed), if it moved since the last commit."""
        offset = pq.commit_offset()
        if offset == pq.committed:
            return
        try:
            await self.offset_store.write(pq.mq, pq.address, offset)
            pq.committed = offset
        except QueueLockedError as exc:
            self.on_lost(pq, exc)
        except GrayMQError as exc:
            mq = pq.mq
            what = f"commit of topic {mq.topic} queue {mq.queue_id} at offset {offset} to broker {mq.broker_name}"
            self.runtime.retry_later(exc, what, ("commit", mq, exc.code, exc.message))

    async def flush_offsets(self) -> None:
        try:
            await self.offset_store.flush()
        except GrayMQError as exc:
            self.moved.set()  # the persist loop tries again
            self.runtime.retry_later(exc, f"writing the offsets of group {self.runtime.group}",
                                     ("flush", exc.code, exc.message))

    async def persist_offsets(self) -> None:
        """Commit every queue held whose offset moved (no coroutine for the others), then flush the offset store; a
        commit that failed is tried again at the persist loop's next turn."""
        for pq in self.assignment:
            if pq.commit_offset() != pq.committed:
                await self.commit(pq)
        await self.flush_offsets()
        if any(pq.commit_offset() != pq.committed for pq in self.assignment):
            self.moved.set()

    async def persist_loop(self) -> None:
        """Persist the offsets every ``persist_interval_s`` while they move; an idle consumer's loop sleeps until a
        pull or a finished batch moves one (4,000 idle consumers are not 4,000 timers a second)."""
        while True:
            await self.moved.wait()
            self.moved.clear()
            await asyncio.sleep(self.runtime.settings.persist_interval_s)
            await self.persist_offsets()


def origin_topic(message: MessageExt, group: str) -> str:
    """The topic a failed message stands for: its own, or on the group's retry topic the ``RETRY_TOPIC`` the
    broker wrote there; a ``RETRY_TOPIC`` on any other topic is a producer's, not trusted."""
    if message.topic == retry_topic(group):
        return message.properties.get(PROPERTY_RETRY_TOPIC, message.topic)
    return message.topic
