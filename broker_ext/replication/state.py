"""What a leader hands its followers besides the log: consumer offsets, the schedule's delivery offsets and the
queue leases (holder, time left), encoded once here for both sides."""

from __future__ import annotations

import json

from graymq.broker_ext.groups.offset_manager import ConsumerOffsetManager
from graymq.broker_ext.groups.queue_leases import QueueLocks
from graymq.broker_ext.processors.send_back import ScheduleMessageService


class ReplicaState:
    def __init__(self, offsets: ConsumerOffsetManager, schedule: ScheduleMessageService, locks: QueueLocks) -> None:
        self._offsets = offsets
        self._schedule = schedule
        self._locks = locks

    def encode(self) -> bytes:
        """The leader's side: the state as sent in a fetch response."""
        return json.dumps({"offsets": [list(item) for item in self._offsets.items()],
                           "delay": self._schedule.snapshot(),
                           "leases": [list(item) for item in self._locks.snapshot()]},
                          separators=(",", ":")).encode()

    def apply(self, raw: bytes) -> bool:
        """The follower's side: take the leader's state as is; whether it carried the queue leases (a leader of an
        older version sends none)."""
        state = json.loads(raw)
        self._offsets.replace((str(g), str(t), int(q), int(o)) for g, t, q, o in state["offsets"])
        self._schedule.replace_offsets({int(k): int(v) for k, v in state["delay"].items()})
        if "leases" not in state:
            return False
        self._locks.replace((str(g), str(t), int(q), str(c), float(left)) for g, t, q, c, left in state["leases"])
        return True
