"""A push consumer following its desired flag: normal → gray at once, gray → normal after draining its gray queues.

- normal → gray: applied at once; the normal queues it held are released (offsets committed)
  and the other normal clients take them over from there; nothing to drain.
- gray → normal: DRAINING — it keeps consuming its gray queues until, for every gray queue of
  every subscribed topic (retry topic included, delayed retries counted), the group's
  committed offset equals the max offset; then it reports normal to the name server first,
  heartbeats the brokers (which push "group changed") and rebalances onto normal queues.
  A drain that times out leaves the client gray and says why; nothing is lost.
- with the group's gray switch off every queue is normal, so a flip needs no drain.
- lane A → lane B: A's queues are drained first (the client is normal a moment), then it becomes gray in B; a
  client is in one lane at a time, so no message of A is left to a consumer of B.

``GrayFlip`` is pure, like ``GrayState`` whose transitions it applies: each call takes what the
consumer observed (the desired flag, the gray backlog, whether the name server heard) and returns
the ``FlipAction`` to do next; the consumer does it (``flip_runner.FlipRunner``).
"""

from __future__ import annotations

import enum

from graymq.core.gray_side import Mark, mark_lane
from graymq.core.gray_state import GrayState, Step


class FlipAction(enum.Enum):
    """What the consumer does next about its flag."""

    NONE = enum.auto()  # nothing (more) to do
    BECOME_GRAY = enum.auto()  # release every queue held, then call ``became_gray`` and announce the flag
    START_DRAIN = enum.auto()  # start a drain (``begin_drain``) in the background
    CANCEL_DRAIN = enum.auto()  # cancel the drain under way (the state is already GRAY again)
    CHECK_BACKLOG = enum.auto()  # commit the offsets, read the gray backlog, pass it to ``backlog_read``
    WAIT = enum.auto()  # wait ``drain_poll_s``, then CHECK_BACKLOG
    REPORT_NORMAL = enum.auto()  # beat the name server, pass whether it answered to ``report_heard``
    HAND_OVER = enum.auto()  # release the gray queues (not those held by adoption), announce the flag
    TIMED_OUT = enum.auto()  # the drain failed: the client stays gray, ``last_drain_error`` says why


class GrayFlip:
    """The flip's decisions and bookkeeping: state, drain deadline, why the latest drain timed out.

    >>> flip = GrayFlip(gray=True, drain_timeout_s=60, drain_poll_s=0.05)
    >>> flip.follow_changes(); flip.follow(False, draining=False)
    <FlipAction.START_DRAIN: 3>
    >>> flip.begin_drain(None, now=0.0, gray_switch=True), flip.backlog_read(3, now=1.0)
    (<FlipAction.CHECK_BACKLOG: 5>, <FlipAction.WAIT: 6>)
    >>> flip.backlog_read(0, now=2.0), flip.report_heard(True, now=2.0), flip.gray_state.gray
    (<FlipAction.REPORT_NORMAL: 7>, <FlipAction.HAND_OVER: 8>, False)
    >>> flip.follow("v3", draining=False), flip.lane
    (<FlipAction.BECOME_GRAY: 2>, 'v3')
    """

    def __init__(self, gray: Mark, *, drain_timeout_s: float, drain_poll_s: float) -> None:
        self.lane = mark_lane(gray)  # the lane this client is (or last was) gray in
        self.gray_state = GrayState(self.lane is not None)
        self.drain_timeout_s = drain_timeout_s
        self.drain_poll_s = drain_poll_s
        self.last_drain_error = ""
        self._following = False
        self._drains_queues = False  # the latest drain reads the backlog (the gray switch was on)
        self._backlog: int | None = None  # the latest gray backlog read

    def follow_changes(self) -> None:
        """From now on a change of the desired flag flips (until then nothing was consumed: it is taken as is)."""
        self._following = True

    @property
    def in_lane(self) -> str | None:
        """The lane the client is in now (a draining client still is); None when normal."""
        return self.lane if self.gray_state.gray else None

    def follow(self, desired: Mark, *, draining: bool) -> FlipAction:
        """What to do about the desired flag or lane (``True``: the ``gray`` lane); ``draining``: a drain the
        consumer can cancel is under way. Another lane than the client's is reached through normal: drain first."""
        want = mark_lane(desired)
        if not self._following:
            self.gray_state.adopt(want is not None)
            self.lane = want or self.lane
            return FlipAction.NONE
        other_lane = want is not None and self.gray_state.gray and want != self.lane
        step = self.gray_state.follow(want is not None and not other_lane, draining=draining)
        if step is Step.BECOME_GRAY:
            self.lane = want
            return FlipAction.BECOME_GRAY
        if step is Step.ABANDON_DRAIN:
            self.gray_state.abandon_drain()
            return FlipAction.CANCEL_DRAIN
        if step is Step.DRAIN:
            return FlipAction.START_DRAIN
        return FlipAction.NONE

    def became_gray(self) -> None:
        """Every queue is released: the client is gray."""
        self.gray_state.become_gray()

    def begin_drain(self, timeout_s: float | None, now: float, *, gray_switch: bool) -> FlipAction:
        """Start a drain of ``timeout_s`` (default ``drain_timeout_s``); with the gray switch off, flip at once."""
        if not self.gray_state.gray:
            return FlipAction.NONE
        self._drains_queues = gray_switch
        if not gray_switch:
            self.gray_state.flip_to_normal()
            return FlipAction.REPORT_NORMAL
        self.gray_state.begin_drain(self.drain_timeout_s if timeout_s is None else timeout_s, now)
        return FlipAction.CHECK_BACKLOG

    def backlog_read(self, backlog: int | None, now: float) -> FlipAction:
        """The gray backlog (None: unknown, a broker unreachable): flip when it is 0, else wait or time out."""
        self._backlog = backlog
        if backlog == 0:
            self.gray_state.flip_to_normal()
            return FlipAction.REPORT_NORMAL
        return self._wait_or_time_out(now)

    def report_heard(self, heard: bool, now: float) -> FlipAction:
        """Whether a name server heard the flip to normal; if none did, the client drains on and reports again."""
        if heard:
            return FlipAction.HAND_OVER
        self.gray_state.normal_unheard()
        return self._wait_or_time_out(now) if self._drains_queues else FlipAction.NONE

    def _wait_or_time_out(self, now: float) -> FlipAction:
        if not self.gray_state.timed_out(now):
            return FlipAction.WAIT
        self.gray_state.drain_timed_out()
        left = self._backlog if self._backlog is not None else "an unknown number of"
        self.last_drain_error = (f"drain timed out with {left} gray messages left (are gray producers still "
                                 "sending? is a broker or the name server down?)")
        return FlipAction.TIMED_OUT
