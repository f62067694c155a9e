"""Where a send goes next after an attempt failed: a pure decision of (attempt state, error) -> next step.

No I/O and no asyncio: the async ``Producer`` drives it (client/producer.py), and so can a producer without
an event loop. What each error class calls for is its ``send_retry`` attribute (protocol/errors.py); this
module adds what the attempt's state says:

- an attempt that may have stored the request (``SendRetry.SAME_QUEUE``: a timeout, a connection lost after
  the write, a sync flush or replication that timed out) is repeated to the same queue under the same
  sequence, so the broker stores it once;
- a resend of such a request that finds its broker gone or no longer leading (``SendRetry.NEW_LEADER``) on a
  replicated broker set waits for the set's new leader, which holds what the old one stored — not counted
  against ``retry_times``, bounded by the send's timeout;
- a request that certainly stored nothing (no connection, a refusal) goes to another broker under that
  queue's next sequence;
- but one refused because its replicated broker set has no leader now (``SendRetry.NEW_LEADER``: not leading,
  no connection to the old leader, shutting down), with no other broker to go to (one broker set, an ordered or
  pinned send, or every other set refused so too), waits for the election: a backoff, the route read again,
  a new queue — not counted, bounded by the send's timeout;
- a broker that does not know the topic yet (``SendRetry.WAIT_TOPIC``) is asked again after a backoff, the
  route read again first, not counted;
- a non-retriable error, or more than ``retry_times`` counted failures, stops.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from enum import Enum

from graymq.protocol.errors import GrayMQError, SendRetry


class Step(Enum):
    """The next attempt of a send."""

    NEW_QUEUE = "new_queue"  # select a queue (away from ``avoid_broker``), under that queue's next sequence
    SAME_QUEUE = "same_queue"  # the same queue, broker and sequence
    NEW_LEADER = "new_leader"  # read the route again, then the same queue and sequence at its set's leader
    WAIT_LEADER = "wait_leader"  # back off, read the route again, then a new queue (nothing was stored)
    RECHECK_TOPIC = "recheck_topic"  # back off, ask the name server for the route again, then a new queue
    STOP = "stop"  # raise ``error``


@dataclass(frozen=True, slots=True)
class RetryState:
    """A send's attempts so far. The first attempt is ``RetryState()``; each failure makes the next one.

    >>> from graymq.protocol.errors import RequestTimeoutError
    >>> after_failure(RetryState(), RequestTimeoutError(), broker_name="b", replicated=False, retry_times=2).step
    <Step.SAME_QUEUE: 'same_queue'>
    """

    step: Step = Step.NEW_QUEUE
    retries: int = 0  # failures counted against ``retry_times``
    avoid_broker: str | None = None  # the broker a new queue is chosen away from
    error: GrayMQError | None = None  # the last failure (raised when the send stops or runs out of time)
    leaderless: frozenset[str] = frozenset()  # broker sets that refused this send for want of a leader

    @property
    def resending(self) -> bool:
        """Whether the next attempt repeats a request that may be stored (same queue and sequence)."""
        return self.step in (Step.SAME_QUEUE, Step.NEW_LEADER)


def after_failure(state: RetryState, error: GrayMQError, *, broker_name: str, replicated: bool,
                  retry_times: int, brokers: Collection[str] | None = None) -> RetryState:
    """The state after the attempt ``state`` described failed with ``error`` at ``broker_name`` (``replicated``:
    whether the route shows that broker as a set with replicas; ``brokers``: those the send may go to, None when
    unknown: taken as some other)."""
    kind = error.send_retry
    if kind is SendRetry.STOP:
        return replace(state, step=Step.STOP, error=error)
    if kind is SendRetry.WAIT_TOPIC:
        return replace(state, step=Step.RECHECK_TOPIC, avoid_broker=broker_name, error=error)
    if kind is SendRetry.NEW_LEADER and replicated:
        if state.resending:
            return replace(state, step=Step.NEW_LEADER, error=error)  # waiting for a leader: not counted
        leaderless = state.leaderless | {broker_name}
        if brokers is not None and not set(brokers) - leaderless:  # nowhere else to go: wait, not counted
            return replace(state, step=Step.WAIT_LEADER, avoid_broker=broker_name, error=error,
                           leaderless=leaderless)
        state = replace(state, leaderless=leaderless)
    retries = state.retries + 1
    if retries > retry_times:
        return replace(state, step=Step.STOP, retries=retries, error=error)
    if kind is SendRetry.SAME_QUEUE:
        return replace(state, step=Step.SAME_QUEUE, retries=retries, error=error)
    return RetryState(Step.NEW_QUEUE, retries, broker_name, error, state.leaderless)


def attempt_timeout(state: RetryState, remaining_s: float, retry_times: int) -> float:
    """The time one attempt may take: an equal share of what is left among the counted attempts left, so a
    timed-out attempt leaves time for its retry.

    >>> attempt_timeout(RetryState(), 3.0, retry_times=2)
    1.0
    """
    return max(remaining_s, 0.001) / (1 + retry_times - state.retries)
