"""What a producer does between a failed send attempt and the next, after ``send_retry.after_failure`` chose the
step: the route marked stale, a log line, and how long to wait. The waiting itself is the caller's
(``asyncio.sleep`` in ``Producer``, ``time.sleep`` in ``BlockingProducer``)."""

from __future__ import annotations

import logging
from typing import Protocol

from graymq.client.message import MessageQueue
from graymq.client.send_retry import RetryState, Step
from graymq.core.route import TopicRoute
from graymq.core.selector import GrayQueueSelector, Side
from graymq.protocol.retry import Backoff

log = logging.getLogger(__name__)
LEADER_WAIT_S = 0.2  # between asking the name server who leads a broker set that lost its leader


class _Invalidate(Protocol):
    def invalidate(self, topic: str) -> None: ...


def pause_s(state: RetryState, mq: MessageQueue, sequence: int, backoff: Backoff, routes: _Invalidate,
            left_s: float) -> float:
    """Seconds to wait before the attempt ``state`` describes (at most ``left_s``), the route of ``mq``'s topic
    marked for refresh when the step reads it again; ``sequence``: the failed attempt's, for the log; ``backoff``:
    the send's, for a topic or a leader waited for."""
    assert state.error is not None
    if state.step is Step.RECHECK_TOPIC:
        backoff_s = backoff.next()
        log.info("%s does not know topic %s yet; asking again in %.2fs", mq.broker_name, mq.topic, backoff_s)
        return min(backoff_s, left_s)
    if state.step is Step.WAIT_LEADER:  # nothing stored, nowhere else to go: the set's election is waited for
        routes.invalidate(mq.topic)
        backoff_s = backoff.next()
        log.info("broker set %s has no leader (%s); reading the route again in %.2fs", mq.broker_name,
                 state.error.message, backoff_s)
        return min(backoff_s, left_s)
    if state.step is Step.NEW_LEADER:  # it may be stored on that broker set: only its new leader can say
        routes.invalidate(mq.topic)
        return min(LEADER_WAIT_S, left_s)
    if state.step is not Step.STOP:
        if state.step is Step.NEW_QUEUE:
            routes.invalidate(mq.topic)
        log.info("send to %s failed (%s), retrying %s", mq, state.error.message,
                 f"the same queue (sequence {sequence})" if state.resending else "on another broker")
    return 0.0


def send_brokers(selector: GrayQueueSelector, route: TopicRoute, gray: Side, gray_switch: bool,
                 mq: MessageQueue, fixed: bool) -> frozenset[str]:
    """The brokers a send to ``mq`` may go to after a refusal: only ``mq``'s when its queue is ``fixed`` (a
    sharding key, a pinned queue), else every broker with a writable queue of its side."""
    if fixed:
        return frozenset((mq.broker_name,))
    return frozenset(queue.broker_name for queue in selector.candidates(route, gray, gray_switch))
