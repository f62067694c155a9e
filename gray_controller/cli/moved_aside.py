"""What a deposed replica moved aside (``STORE/moved-aside/epoch-E-FROM-TO.log``, see ``replica_log.move_aside``):
read it back, and publish it again.

A file holds commit-log bytes as they were: records, and where the log rolled, an end-of-segment marker and the
rest of that segment. Publishing a record again sends its topic, body, tags, keys and properties anew (a delayed
retry to its real topic); the original msg id goes along as ``ORIGIN_MSG_ID``, so a consumer can tell a message it
already saw (the producer may have stored it on the new leader too, after retrying). A file published is renamed
``*.republished``, so it is not published twice.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graymq.broker_ext.store.commitlog import BLANK_MAGIC, SIZE_AND_MAGIC
from graymq.protocol.constants import (
    PROPERTY_KEYS,
    PROPERTY_MSG_ID,
    PROPERTY_ORIGIN_MSG_ID,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    SCHEDULE_TOPIC,
)
from graymq.protocol.errors import GrayMQError
from graymq.protocol.record import RECORD_MAGIC, MessageExt, decode_record

_NAME = re.compile(r"^epoch-(\d+)-(\d+)-(\d+)\.log$")
_RESERVED = {PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_MSG_ID, PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID}


@dataclass
class MovedAside:
    path: Path
    epoch: int
    start: int
    end: int
    messages: list[MessageExt] = field(default_factory=list)
    damaged: str = ""  # why reading stopped early ("" when every byte was read)

    def to_json(self) -> dict[str, Any]:
        return {"file": self.path.name, "epoch": self.epoch, "from_offset": self.start, "to_offset": self.end,
                "messages": len(self.messages), "topics": dict(Counter(topic_of(m) for m in self.messages)),
                "damaged": self.damaged}


def read_moved_aside(store: Path) -> list[MovedAside]:
    """Every file not published yet under ``store/moved-aside``, oldest epoch first."""
    found = []
    for path in sorted((store / "moved-aside").glob("epoch-*.log")):
        match = _NAME.match(path.name)
        if match is None:
            continue
        epoch, start, end = (int(g) for g in match.groups())
        entry = MovedAside(path, epoch, start, end)
        try:
            entry.messages = list(_records(path.read_bytes()))
        except (GrayMQError, ValueError) as exc:
            entry.damaged = str(exc)
        found.append(entry)
    return found


def _records(data: bytes) -> Iterator[MessageExt]:
    pos = 0
    while pos + SIZE_AND_MAGIC.size <= len(data):
        size, magic = SIZE_AND_MAGIC.unpack_from(data, pos)
        if magic == BLANK_MAGIC:
            pos += size  # the end-of-segment marker and the rest of that segment
            continue
        if magic != RECORD_MAGIC or size <= 0:
            raise ValueError(f"no record at byte {pos}")
        yield decode_record(data, pos)
        pos += size


def topic_of(message: MessageExt) -> str:
    """Where the message goes when published again (a delayed retry: its real topic)."""
    return message.properties.get(PROPERTY_REAL_TOPIC, message.topic) if message.topic == SCHEDULE_TOPIC \
        else message.topic


def republish_fields(message: MessageExt) -> dict[str, Any]:
    """Keyword arguments of ``client.Message`` that publish ``message`` again."""
    properties = {k: v for k, v in message.properties.items() if k not in _RESERVED}
    properties[PROPERTY_ORIGIN_MSG_ID] = message.msg_id
    return {"topic": topic_of(message), "body": message.body, "tags": message.tags, "keys": list(message.keys),
            "properties": properties, "gray": message.gray}
