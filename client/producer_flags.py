"""What a producer tells the name server and what it takes from the answer: its gray flag, whether it honours
messages' gray marks, and the group's gray switch. Shared by ``Producer`` and ``BlockingProducer``."""

from __future__ import annotations

import logging
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
    gray_marks: bool
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
        self.gray_marks = False

    def _report(self) -> dict[str, Any]:
        gray = self.gray and self.started  # a stopped producer sends nothing: it cannot send gray
        return {"gray": gray, "state": "GRAY" if gray else "NORMAL", "topics": self.routes.topics(), "queues": [],
                "gray_marks": self.gray_marks, "lane": (self.lane or GRAY_LANE) if gray else None}

    async def _on_update(self, response: HeartbeatAnswer) -> None:
        desired, marks = response.desired_lane, response.gray_marks
        self.gray_switch = response.gray_switch
        if (desired is not None) != self.gray or (desired and desired != (self.lane or GRAY_LANE)) \
                or marks != self.gray_marks:
            log.info("producer %s of %s: lane %s -> %s, gray marks honoured %s -> %s", self.client_id, self.group,
                     (self.lane or GRAY_LANE) if self.gray else None, desired, self.gray_marks, marks)
            self.gray, self.lane, self.gray_marks = desired is not None, desired, marks
            self.membership.poke()  # report the applied values at once

    def _side(self, message: Message, handling: MessageExt | None) -> Mark:
        """The send's side (``gray_side.send_lane``): False base, True the ``gray`` lane, else a lane's name. While
        the name server lets this producer honour marks, the message's explicit mark, else that of the message
        being handled (``handling``, from ``current_message()``), else the producer's lane; otherwise the
        producer's lane alone."""
        lane = send_lane(self.lane or self.gray, message.lane or message.gray, propagated_mark(handling),
                         marks_honoured=self.gray_marks, gray_switch=self.gray_switch)
        return True if lane == GRAY_LANE else lane or False

