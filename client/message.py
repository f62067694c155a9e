"""Client-side value types: Message, MessageQueue, SendResult, PullResult and friends."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NamedTuple

from graymq.core.message_queue import MessageQueue
from graymq.protocol.record import MessageExt

__all__ = ["Message", "MessageExt", "MessageQueue", "SendResult", "SendStatus", "PullResult", "PullStatus",
           "ConsumeStatus"]


@dataclass(slots=True)
class Message:
    """A message to send. ``gray=None`` means: inherit (handler context, else the producer's flag)."""

    topic: str
    body: bytes
    tags: str = ""
    keys: list[str] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    gray: bool | None = None
    trace_id: str = ""
    sharding_key: str | None = None  # ordered messages: same key -> same queue inside the gray/normal set
    lane: str | None = None  # a lane mark (``gray=True`` is the lane ``gray``); the release decides, as for gray


class SendStatus(enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"


def named_lane(side: bool | str | None) -> str | None:
    """The lane a ``SendResult`` names for a send's side: a lane other than ``gray`` (that one ``gray`` says)."""
    return side if isinstance(side, str) and side != "gray" else None


class SendResult(NamedTuple):
    """Where a sent message was stored. A named tuple (immutable, built at a fraction of a frozen dataclass's
    cost): a batch makes one per message."""

    status: SendStatus
    msg_id: str
    queue: MessageQueue
    queue_offset: int
    gray: bool
    commit_log_offset: int = -1
    lane: str | None = None  # the lane it was sent in (None: base or the ``gray`` lane, as ``gray`` says)


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt]


class ConsumeStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"
