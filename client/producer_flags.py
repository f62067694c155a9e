"""What a producer tells the name server and what it takes from the answer: its gray flag, whether it honours
messages' gray marks, and the group's gray switch. Shared by ``Producer`` and ``BlockingProducer``.

A producer reports gray while one of its gray sends is unresolved, even after its flag flipped normal: a promote
reads "normal" as "no gray message is stored after this", and a send chosen gray before the flip may still be
stored after it (a retry of an attempt whose outcome is unknown goes to the same gray queue under the same
sequence, at its broker set's new leader once one is elected). Reported normal at once, a gray consumer could
drain and flip before that retry lands, stranding the message on a gray queue no consumer holds any more.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Protocol

from graymq.client.context import propagated_mark
from graymq.client.message import Message, MessageExt
from graymq.core.gray_side import Mark, send_lane
from graymq.core.queue_layout import GRAY_LANE
from graymq.nameserver_api.membership import new_client_id
from graymq.nameserver_api.records import HeartbeatAnswer

log = logging.getLogger(__name__)


class _Topics(Protocol):
    def topics(self) -> list[str]: ...


class _Poke(Protocol):
    def poke(self) -> None: ...


class ProducerFlags:
    """Mixin: ``_report`` (the heartbeat's body), ``_on_update`` (the answer applied) and ``_side`` (a send's side
    under them), for a producer holding these attributes."""

    group: str
    client_id: str
    gray: bool
    lane: str | None  # with ``gray``: the lane (None: ``gray``)
    gray_switch: bool
    lane_marks: bool  # messages' marks honoured (those of ``frozen_lanes`` excepted)
    frozen_lanes: tuple[str, ...]  # lanes whose promote or rollback covers this producer: their marks are not honoured
    started: bool
    routes: _Topics
    membership: _Poke

    def _init_flags(self, group: str, client_id: str | None, gray: bool | None, lane: str | None = None) -> None:
        """The producer's identity and starting flags: gray as declared, marks not honoured until the name server
        says so, the switch on until it says otherwise."""
        self.group = group
        self.client_id = client_id or new_client_id("producer")
        self.gray = bool(gray) or lane is not None
        self.lane = lane
        self.gray_switch = True
        self.lane_marks = False
        self.frozen_lanes = ()
        self._gray_sends = 0  # gray sends started and not answered or given up yet
        self._sending_lane = GRAY_LANE  # the lane of the latest of them
        self._gray_sends_lock = threading.Lock()  # a BlockingProducer sends from its callers' threads

    @property
    def gray_marks(self) -> bool:
        """Whether messages' marks of the lane ``gray`` are honoured now."""
        return self.lane_marks and GRAY_LANE not in self.frozen_lanes

    def _report(self) -> dict[str, Any]:
        # a stopped producer sends nothing: it cannot send gray; one still sending gray reports gray (see above)
        gray = (self.gray and self.started) or self._sending_gray()
        return {"gray": gray, "state": "GRAY" if gray else "NORMAL", "topics": self.routes.topics(), "queues": [],
                "gray_marks": self.lane_marks, "frozen_lanes": list(self.frozen_lanes),
                "lane": None if not gray else (self.lane or GRAY_LANE) if self.gray else self._sending_lane}

    async def _on_update(self, response: HeartbeatAnswer) -> None:
        desired, marks, frozen = response.desired_lane, response.lane_marks, response.frozen_lanes
        self.gray_switch = response.gray_switch
        if (desired is not None) != self.gray or (desired and desired != (self.lane or GRAY_LANE)) \
                or marks != self.lane_marks or frozen != self.frozen_lanes:
            log.info("producer %s of %s: lane %s -> %s, marks honoured %s -> %s, frozen lanes %s -> %s", self.client_id,
                     self.group, (self.lane or GRAY_LANE) if self.gray else None, desired, self.lane_marks, marks,
                     list(self.frozen_lanes), list(frozen))
            self.gray, self.lane, self.lane_marks, self.frozen_lanes = desired is not None, desired, marks, frozen
            if desired is None and self._sending_gray():
                log.info("producer %s of %s reports gray until its gray sends under way are answered",
                         self.client_id, self.group)
            self.membership.poke()  # report the applied values at once

    def _side(self, message: Message, handling: MessageExt | None) -> Mark:
        """The send's side (``gray_side.send_lane``): False base, True the ``gray`` lane, else a lane's name. While
        the name server lets this producer honour marks, the message's explicit mark, else that of the message
        being handled (``handling``, from ``current_message()``), else the producer's lane; otherwise the
        producer's lane alone."""
        lane = send_lane(self.lane or self.gray, message.lane or message.gray, propagated_mark(handling),
                         marks_honoured=self.lane_marks, gray_switch=self.gray_switch, frozen=self.frozen_lanes)
        return True if lane == GRAY_LANE else lane or False

    def _sending_gray(self) -> bool:
        """Whether a gray send is under way (started, not yet answered or given up)."""
        with self._gray_sends_lock:
            return self._gray_sends > 0

    def _gray_send_side(self, message: Message, handling: MessageExt | None) -> Mark:
        """``_side`` for a send about to start, a gray one counted under way (until ``_gray_send_ended``) in the same
        step: a flip to normal reported between the two would miss it."""
        with self._gray_sends_lock:
            gray = self._side(message, handling)
            if gray:
                self._gray_sends += 1
                self._sending_lane = GRAY_LANE if gray is True else str(gray)
        return gray

    def _gray_send_began(self, side: Mark) -> None:
        with self._gray_sends_lock:
            self._gray_sends += 1
            self._sending_lane = GRAY_LANE if side is True else str(side)

    def _gray_send_ended(self) -> None:
        """A gray send was answered or given up; the last one ends a flipped producer's gray report at once."""
        with self._gray_sends_lock:
            self._gray_sends -= 1
            last = self._gray_sends == 0
        if last and not self.gray:
            self._report_soon()

    def _report_soon(self) -> None:
        """Heartbeat as soon as possible (from the thread the membership runs on)."""
        self.membership.poke()
