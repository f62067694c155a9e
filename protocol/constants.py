"""Names shared by broker and clients: reserved message properties, system topics, tag hashing."""

from __future__ import annotations

import zlib

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")  # GRAYMQ_LOG_LEVEL of every process

# Reserved message property names (stored in the record's properties section).
PROPERTY_TAGS = "TAGS"
PROPERTY_KEYS = "KEYS"  # keys joined by KEY_SEPARATOR
PROPERTY_MSG_ID = "UNIQ_KEY"
PROPERTY_TRACE_ID = "TRACE_ID"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"  # original topic of a message sent back for retry
PROPERTY_ORIGIN_MSG_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_DELAY_LEVEL = "DELAY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"  # a delayed message's topic and queue, while it waits in SCHEDULE_TOPIC
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_START_DELIVER_TIME = "__STARTDELIVERTIME"  # ms since the epoch a delayed message is due (RocketMQ's name)
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_PRODUCER_SEQUENCE = "PSEQ"  # "<producer id hex>:<sequence>:<messages>" on a request's first record
# A stock producer's lane mark (a user property naming a lane), also read as an entry of W3C ``baggage``
PROPERTY_LANE = "graymq.lane"
PROPERTY_BAGGAGE = "baggage"  # the W3C baggage header, as OpenTelemetry propagators put it in a message's properties
KEY_SEPARATOR = " "
# Reserved names a producer's message may not carry as its own (why each is stripped or refused: the docstring of
# protocol/properties.py, which checks them).
STRIPPED_PROPERTIES = frozenset({
    PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_MSG_ID, PROPERTY_TRACE_ID, PROPERTY_PRODUCER_GROUP,
    PROPERTY_PRODUCER_SEQUENCE, PROPERTY_RETRY_TOPIC, PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID,
})
_NO_DELAY = "graymq does not delay a message by this property (a stock SDK's delivery_timestamp on the gRPC port does)"
REFUSED_PROPERTIES: dict[str, str] = {PROPERTY_DELAY_LEVEL: _NO_DELAY, PROPERTY_START_DELIVER_TIME: _NO_DELAY}
# Idempotent sends: a broker keeps the last SEQUENCES_KEPT stored sequences per (producer, topic, queue)
# (broker_ext/processors/producer_table.py), so a producer keeps its unresolved ones within that span
# (client/send_window.py).
SEQUENCES_KEPT = 5

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"

SUB_ALL = "*"
TAG_SEPARATOR = "||"

# Delay levels as in RocketMQ: level n (1-based) waits DELAY_LEVELS_S[n - 1] seconds.
DELAY_LEVELS_S: tuple[float, ...] = (
    1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200,
)
DEFAULT_MAX_RECONSUME_TIMES = 16


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def tag_hash(tag: str) -> int:
    """Stable hash of a tag, as stored in consume-queue units (0 for no tag)."""
    if not tag:
        return 0
    return zlib.crc32(tag.encode("utf-8")) or 1


def parse_sub_expression(expression: str) -> frozenset[str] | None:
    """Tags of a subscription expression (``"*"`` or ``"a || b"``); ``None`` means every tag."""
    expression = (expression or SUB_ALL).strip()
    if expression == SUB_ALL or not expression:
        return None
    tags = frozenset(t.strip() for t in expression.split(TAG_SEPARATOR) if t.strip())
    return tags or None
