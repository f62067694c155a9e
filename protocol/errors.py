"""The graymq error hierarchy: one root, a retriable flag, wire codes mapped to classes in one registry."""

from __future__ import annotations

from enum import Enum
from typing import ClassVar, TypeVar

from graymq.protocol import graymq_pb2 as pb

_E = TypeVar("_E", bound="type[GrayMQError]")
_BY_CODE: dict[int, type[GrayMQError]] = {}


class SendRetry(Enum):
    """What a producer does after a send attempt failed with an error of a class (its ``send_retry``); the
    decision itself, which also weighs the attempt's state, is ``client/send_retry.py``."""

    STOP = "stop"  # no repeat of the same request can succeed: the caller gets the error
    SAME_QUEUE = "same_queue"  # sent, no answer (it may be stored): the same queue under the same sequence
    ROTATE = "rotate"  # certainly stored nothing: another broker, under its queue's next sequence
    NEW_LEADER = "new_leader"  # the broker is gone or no longer leads: a request that may be stored on its
    # (replicated) set goes to the set's new leader, same queue and sequence; one that stored nothing rotates,
    # or waits for that leader when there is no other broker to go to; an unreplicated broker's rotates
    WAIT_TOPIC = "wait_topic"  # the broker does not know the topic yet: back off, ask the name server again


class GrayMQError(Exception):
    """Root of every error graymq raises on purpose.

    ``code`` is the wire ``ErrorCode``; ``retriable`` says whether the same call may succeed
    when repeated (on another broker, or later). ``permanent`` says that no repeat can succeed
    until an operator acts (rights, credentials, an invalid request or configuration): a
    long-running client (a push consumer's loops) stops on it instead of retrying. An error that
    is neither (an internal broker error, a malformed frame, a stale route) is retried by such a
    client with backoff, though a one-shot call does not repeat it.
    """

    code: ClassVar[int] = pb.SYSTEM_ERROR
    retriable: ClassVar[bool] = False
    permanent: ClassVar[bool] = False
    send_retry: ClassVar[SendRetry] = SendRetry.STOP

    def __init_subclass__(cls, **kwargs: object) -> None:
        """A class that sets ``retriable`` without ``send_retry`` rotates when retriable, else stops."""
        super().__init_subclass__(**kwargs)
        if "retriable" in vars(cls) and "send_retry" not in vars(cls):
            cls.send_retry = SendRetry.ROTATE if cls.retriable else SendRetry.STOP

    def __init__(self, message: str = "") -> None:
        super().__init__(message or type(self).__name__)
        self.message = message or type(self).__name__

    @property
    def code_name(self) -> str:
        return pb.ErrorCode.Name(self.code)


def register(cls: _E) -> _E:
    """Class decorator: make ``cls`` the class raised for its wire code."""
    if cls.code in _BY_CODE:
        raise ValueError(f"error code {cls.code} is registered twice")
    _BY_CODE[cls.code] = cls
    return cls


def error_from_code(code: int, message: str) -> GrayMQError:
    """The error instance for a wire code; unknown codes become a plain ``GrayMQError``."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return GrayMQError(f"error code {code}: {message}")
    return cls(message)


register(GrayMQError)



@register
class SystemBusyError(GrayMQError):
    code = pb.SYSTEM_BUSY
    retriable = True


@register
class UnknownMethodError(GrayMQError):
    code = pb.UNKNOWN_METHOD


@register
class BadRequestError(GrayMQError):
    code = pb.BAD_REQUEST
    permanent = True


class PropertyError(BadRequestError):
    """A message's properties refused (protocol/properties.py): answered as ``BAD_REQUEST`` with one line naming
    the property and the limit; the gRPC endpoint answers each subclass with RocketMQ's own code."""


class PropertiesTooLargeError(PropertyError):
    """Too many properties, or a property, tag, key or the whole over its size limit."""


class IllegalPropertyError(PropertyError):
    """A property name out of bounds, or one of the reserved names a producer may not set."""


@register
class TopicNotExistError(GrayMQError):
    code = pb.TOPIC_NOT_EXIST
    send_retry = SendRetry.WAIT_TOPIC


@register
class QueueNotExistError(GrayMQError):
    code = pb.QUEUE_NOT_EXIST


@register
class MessageTooLargeError(GrayMQError):
    code = pb.MESSAGE_TOO_LARGE


@register
class NoPermissionError(GrayMQError):
    code = pb.NO_PERMISSION
    permanent = True


@register
class DiskFullError(GrayMQError):
    code = pb.DISK_FULL
    retriable = True


@register
class GrayIsolationError(GrayMQError):
    """A normal client pulled a gray queue (or the reverse) while the group's gray switch is on."""

    code = pb.GRAY_ISOLATION_VIOLATION


class LaneSlotError(GrayMQError):
    """A lane's send to a topic whose route gives that lane no slot: the sender takes one from the name server
    (a client-side error, never on the wire)."""

    def __init__(self, topic: str, lane: str) -> None:
        super().__init__(f"lane {lane} holds no slot on topic {topic}: the name server gives one to its first "
                         "client or message")
        self.topic = topic
        self.lane = lane


@register
class SubscriptionNotExistError(GrayMQError):
    code = pb.SUBSCRIPTION_NOT_EXIST


@register
class ConsumerNotOnlineError(GrayMQError):
    code = pb.CONSUMER_NOT_ONLINE


@register
class OffsetIllegalError(GrayMQError):
    code = pb.OFFSET_ILLEGAL


@register
class ServiceNotAvailableError(GrayMQError):
    """Refused, nothing stored (a broker shutting down): a replicated set's leader going away, so it is handled
    as ``NEW_LEADER``, which rotates for a broker without replicas."""

    code = pb.SERVICE_NOT_AVAILABLE
    retriable = True
    send_retry = SendRetry.NEW_LEADER


@register
class FlushTimeoutError(GrayMQError):
    code = pb.FLUSH_TIMEOUT
    retriable = True
    send_retry = SendRetry.SAME_QUEUE


@register
class RequestTimeoutError(GrayMQError):
    code = pb.TIMEOUT
    retriable = True
    send_retry = SendRetry.SAME_QUEUE


@register
class ConnectionClosedError(GrayMQError):
    code = pb.CONNECTION_CLOSED
    retriable = True
    send_retry = SendRetry.SAME_QUEUE


class ConnectFailedError(ConnectionClosedError):
    """No connection could be opened: nothing was sent (a plain ``ConnectionClosedError`` may follow a write)."""

    send_retry = SendRetry.NEW_LEADER


@register
class ProtocolError(GrayMQError):
    """A frame that breaks the wire format: wrong token, bad length, truncated, undecodable."""

    code = pb.PROTOCOL_ERROR


@register
class MessageNotFoundError(GrayMQError):
    code = pb.MESSAGE_NOT_FOUND


@register
class UnauthorizedError(GrayMQError):
    """No valid token: the caller is unknown (``UNAUTHORIZED``). Clients send ``GRAYMQ_TOKEN`` (or ``token=``),
    brokers ``GRAYMQ_BROKER_TOKEN``, admin commands ``GRAYMQ_ADMIN_TOKEN``."""

    code = pb.UNAUTHORIZED
    permanent = True


@register
class ForbiddenError(UnauthorizedError):
    """A valid token whose principal lacks the right the message names (``FORBIDDEN``)."""

    code = pb.FORBIDDEN


@register
class QueueLockedError(GrayMQError):
    """Another client of the group holds the queue's lease: this one may not pull or commit it now."""

    code = pb.QUEUE_LOCKED


@register
class NotLeaderError(GrayMQError):
    """A follower of a broker set, or a leader fenced by a newer epoch: it takes no writes; the route names the
    leader (clients read it again and retry)."""

    code = pb.NOT_LEADER
    retriable = True
    send_retry = SendRetry.NEW_LEADER


@register
class ReplicationTimeoutError(GrayMQError):
    """Sync replication: the in-sync followers did not store the message in time. Not acknowledged; a retry of
    the same request is stored once (idempotent producer)."""

    code = pb.REPLICATION_TIMEOUT
    retriable = True
    send_retry = SendRetry.SAME_QUEUE


class NameServerError(GrayMQError):
    """Every configured name server failed or answered with an error."""

    retriable = True


class ConfigError(GrayMQError):
    """Invalid configuration or arguments."""

    permanent = True


class DrainTimeoutError(GrayMQError):
    """A gray client could not drain the gray queues in time; it stays gray (nothing is lost)."""

    retriable = True
