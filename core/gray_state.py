"""Drain-then-flip: the gray state machine a push consumer and a Spark job both follow.

The name server holds a client's desired flag; the client reports its effective flag and state
(``ClientState``). The transitions::

    NORMAL   --desired gray------------------------> GRAY      become_gray: nothing to drain
    GRAY     --desired normal----------------------> DRAINING  begin_drain: consume the gray queues dry
    DRAINING --gray backlog 0, normal reported-----> NORMAL    flip_to_normal
    GRAY     --desired normal, gray switch off-----> NORMAL    flip_to_normal: every queue is normal
    NORMAL   --the name server did not hear it-----> DRAINING  normal_unheard: drain on, report again
    DRAINING --desired gray again------------------> GRAY      abandon_drain
    DRAINING --drain timeout-----------------------> GRAY      drain_timed_out: nothing lost, retried later

``GrayState`` is pure (no I/O, no clock of its own): it holds the state and the drain deadline
and says what to do next; the caller stops queries or drops queues and reports to the name
server. Every transition sets its target whatever the current state, so a race between a
drain and a flag change ends where the latest call says.
"""

from __future__ import annotations

import enum

from graymq.protocol.membership import ClientState


class Step(enum.Enum):
    """What a client does about its desired flag (``GrayState.follow``)."""

    STAY = enum.auto()
    BECOME_GRAY = enum.auto()
    DRAIN = enum.auto()
    ABANDON_DRAIN = enum.auto()


class GrayState:
    """A client's gray state and drain deadline; see the module docstring for the transitions.

    >>> s = GrayState(gray=True)
    >>> s.follow(desired=False)
    <Step.DRAIN: 3>
    >>> s.begin_drain(timeout_s=300, now=0.0), s.state
    (300.0, <ClientState.DRAINING: 'DRAINING'>)
    >>> s.timed_out(now=301.0)
    True
    >>> s.flip_to_normal(); (s.gray, s.state)
    (False, <ClientState.NORMAL: 'NORMAL'>)
    """

    def __init__(self, gray: bool) -> None:
        self.state = ClientState.settled(gray)
        self.deadline: float | None = None  # of the latest drain, in the caller's clock (monotonic seconds)

    @property
    def gray(self) -> bool:
        """The effective flag: a draining client is still gray."""
        return self.state is not ClientState.NORMAL

    @property
    def draining(self) -> bool:
        return self.state is ClientState.DRAINING

    def follow(self, desired: bool, *, draining: bool = False) -> Step:
        """What to do about the desired flag; ``draining``: a drain the caller can abandon is under way.

        Gray wanted by a normal client: become gray at once. Gray wanted again during a drain:
        abandon it. Normal wanted by a gray client with no drain under way: drain.
        """
        if desired and not self.gray:
            return Step.BECOME_GRAY
        if desired and draining:
            return Step.ABANDON_DRAIN
        if not desired and self.gray and not draining:
            return Step.DRAIN
        return Step.STAY

    def adopt(self, desired: bool) -> None:
        """Take the desired flag as is: only before the client has consumed anything."""
        self.state = ClientState.settled(desired)

    def become_gray(self) -> None:
        self.state = ClientState.GRAY

    def begin_drain(self, timeout_s: float, now: float) -> float:
        """Start draining; returns the deadline, ``timeout_s`` after ``now``."""
        self.state = ClientState.DRAINING
        self.deadline = now + timeout_s
        return self.deadline

    def timed_out(self, now: float) -> bool:
        """Whether the latest drain is past its deadline (a flip to normal not heard keeps that deadline)."""
        return self.deadline is not None and now > self.deadline

    def flip_to_normal(self) -> None:
        """The gray queues are drained (or the gray switch is off): the client is normal."""
        self.state = ClientState.NORMAL

    def normal_unheard(self) -> None:
        """No name server heard the flip to normal: the client drains on and reports it again later."""
        self.state = ClientState.DRAINING

    def abandon_drain(self) -> None:
        """The desired flag went back to gray during the drain."""
        self.state = ClientState.GRAY

    def drain_timed_out(self) -> None:
        """The drain did not finish in time: the client stays gray, the next desired normal drains again."""
        self.state = ClientState.GRAY
