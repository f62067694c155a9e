"""RocketMQ 5 status codes: a refused request is answered with one (``Status`` in the response body), never a hang."""

from __future__ import annotations

from collections.abc import Callable

from graymq.broker_ext.topic_config import TopicConfig
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import GrayMQError, IllegalPropertyError, PropertiesTooLargeError
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2

# graymq error codes -> RocketMQ 5 codes; anything else is INTERNAL_ERROR
_CODES: dict[int, int] = {
    pb.BAD_REQUEST: v2.BAD_REQUEST,
    pb.TOPIC_NOT_EXIST: v2.TOPIC_NOT_FOUND,
    pb.QUEUE_NOT_EXIST: v2.BAD_REQUEST,
    pb.MESSAGE_TOO_LARGE: v2.MESSAGE_BODY_TOO_LARGE,
    pb.NO_PERMISSION: v2.FORBIDDEN,
    pb.UNAUTHORIZED: v2.UNAUTHORIZED,
    pb.FORBIDDEN: v2.FORBIDDEN,
    pb.SYSTEM_BUSY: v2.TOO_MANY_REQUESTS,
    pb.DISK_FULL: v2.INTERNAL_SERVER_ERROR,
    pb.FLUSH_TIMEOUT: v2.MASTER_PERSISTENCE_TIMEOUT,
    pb.REPLICATION_TIMEOUT: v2.SLAVE_PERSISTENCE_TIMEOUT,
    pb.TIMEOUT: v2.PROXY_TIMEOUT,  # stored, but its durability unconfirmed (a leader fenced while it waited)
    pb.NOT_LEADER: v2.HA_NOT_AVAILABLE,
    pb.SERVICE_NOT_AVAILABLE: v2.HA_NOT_AVAILABLE,
}

# a message's properties refused by the broker's send path (BAD_REQUEST on graymq's wire): RocketMQ's own codes
_PROPERTY_CODES: dict[type[GrayMQError], int] = {
    PropertiesTooLargeError: v2.MESSAGE_PROPERTIES_TOO_LARGE,
    IllegalPropertyError: v2.ILLEGAL_MESSAGE_PROPERTY_KEY,
}


class RocketMQStatusError(Exception):
    """A request refused with RocketMQ status ``code``; the endpoint answers it in the response's ``status``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @classmethod
    def from_graymq(cls, error: GrayMQError) -> RocketMQStatusError:
        code = _PROPERTY_CODES.get(type(error)) or _CODES.get(int(error.code), v2.INTERNAL_ERROR)
        return cls(code, error.message)

    def to_status(self) -> v2.Status:
        return status(self.code, self.message)


def status(code: int, message: str = "OK") -> v2.Status:
    return v2.Status(code=code, message=message)  # type: ignore[arg-type]


OK = status(v2.OK)


def existing_topic(topic_of: Callable[[str], TopicConfig | None], topic: str, broker_name: str) -> TopicConfig:
    """``topic``'s config on this broker, or the request refused with ``TOPIC_NOT_FOUND``."""
    config = topic_of(topic)
    if config is None:
        raise RocketMQStatusError(v2.TOPIC_NOT_FOUND, f"topic {topic} does not exist on broker {broker_name}")
    return config
