"""Envelopes: requests and responses of the broker protocol, and which body type each method carries."""

from __future__ import annotations

from google.protobuf.message import DecodeError
from google.protobuf.message import Message as PbMessage

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import GrayMQError, ProtocolError, error_from_code

# method -> (request body type, response body type)
METHOD_TYPES: dict[int, tuple[type[PbMessage], type[PbMessage]]] = {
    pb.SEND_MESSAGE: (pb.SendRequest, pb.SendResponse),
    pb.SEND_BATCH: (pb.SendBatchRequest, pb.SendBatchResponse),
    pb.PULL_MESSAGE: (pb.PullRequest, pb.PullResponse),
    pb.HEARTBEAT: (pb.HeartbeatRequest, pb.HeartbeatResponse),
    pb.UNREGISTER_CLIENT: (pb.UnregisterRequest, pb.Empty),
    pb.QUERY_CONSUMER_OFFSET: (pb.QueryConsumerOffsetRequest, pb.QueryConsumerOffsetResponse),
    pb.UPDATE_CONSUMER_OFFSET: (pb.UpdateConsumerOffsetRequest, pb.Empty),
    pb.GET_MIN_OFFSET: (pb.QueueRequest, pb.OffsetResponse),
    pb.GET_MAX_OFFSET: (pb.QueueRequest, pb.OffsetResponse),
    pb.SEARCH_OFFSET_BY_TIME: (pb.SearchOffsetRequest, pb.OffsetResponse),
    pb.GET_CONSUMER_LIST: (pb.ConsumerListRequest, pb.ConsumerListResponse),
    pb.CONSUMER_SEND_BACK: (pb.SendBackRequest, pb.Empty),
    pb.QUERY_MESSAGE_BY_KEY: (pb.QueryByKeyRequest, pb.MessagesResponse),
    pb.VIEW_MESSAGE_BY_OFFSET: (pb.ViewByOffsetRequest, pb.MessagesResponse),
    pb.UPDATE_TOPIC: (pb.UpdateTopicRequest, pb.Empty),
    pb.GET_TOPIC: (pb.GetTopicRequest, pb.TopicConfig),
    pb.GET_GROUP_BACKLOG: (pb.GroupBacklogRequest, pb.GroupBacklogResponse),
    pb.AUTHENTICATE: (pb.AuthenticateRequest, pb.AuthenticateResponse),
    pb.LOCK_QUEUES: (pb.LockQueuesRequest, pb.LockQueuesResponse),
    pb.UNLOCK_QUEUES: (pb.UnlockQueuesRequest, pb.Empty),
    pb.REPLICA_FETCH: (pb.ReplicaFetchRequest, pb.ReplicaFetchResponse),
    pb.NOTIFY_GROUP_CHANGED: (pb.GroupChangedNotice, pb.Empty),
}


def method_name(method: int) -> str:
    try:
        return pb.Method.Name(method)
    except ValueError:
        return f"method#{method}"


# Envelopes are written by hand, field by field as protobuf does (method = 1, is_response = 2, oneway = 3,
# body = 6; proto3 leaves defaults out): no Envelope object and no second copy of the body per message.
_METHOD_TAG, _IS_RESPONSE_TRUE, _ONEWAY_TRUE, _BODY_TAG = b"\x08", b"\x10\x01", b"\x18\x01", b"\x32"


def _varint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _envelope(head: bytes, data: bytes) -> bytes:
    return b"".join((head, _BODY_TAG, _varint(len(data)), data)) if data else head


def _head(method: int, *flags: bytes) -> bytes:
    return (_METHOD_TAG + _varint(method) if method else b"") + b"".join(flags)


_REQUEST_HEADS = {m: _head(m) for m in pb.Method.values()}
_RESPONSE_HEADS = {m: _head(m, _IS_RESPONSE_TRUE) for m in pb.Method.values()}


def request_envelope(method: int, body: PbMessage, oneway: bool = False) -> bytes:
    head = _head(method, _ONEWAY_TRUE) if oneway else _REQUEST_HEADS.get(method) or _head(method)
    return _envelope(head, body.SerializeToString())


def response_envelope(method: int, body: PbMessage | None = None) -> bytes:
    head = _RESPONSE_HEADS.get(method) or _head(method, _IS_RESPONSE_TRUE)
    return _envelope(head, body.SerializeToString() if body is not None else b"")


def error_envelope(method: int, error: GrayMQError) -> bytes:
    envelope = pb.Envelope(
        method=method, is_response=True, code=error.code, error_message=error.message  # type: ignore[arg-type]
    )
    return envelope.SerializeToString()


def parse_envelope(payload: bytes) -> pb.Envelope:
    envelope = pb.Envelope()
    try:
        envelope.ParseFromString(payload)
    except DecodeError as exc:
        raise ProtocolError(f"undecodable envelope ({len(payload)} bytes): {exc}") from exc
    return envelope


def parse_body(envelope: pb.Envelope, response: bool) -> PbMessage:
    """The typed body of ``envelope``; raises the envelope's error for an error response."""
    if response and envelope.code != pb.OK:
        raise error_from_code(envelope.code, envelope.error_message)
    return _parse(envelope.method, envelope.body, 1 if response else 0)


def parse_request(method: int, body: bytes) -> PbMessage:
    """The typed request of ``method`` in ``body`` (an envelope's, read once by a caller that keeps it)."""
    return _parse(method, body, 0)


def _parse(method: int, body: bytes, side: int) -> PbMessage:
    types = METHOD_TYPES.get(method)
    if types is None:
        raise error_from_code(pb.UNKNOWN_METHOD, f"unknown method {method_name(method)}")
    message = types[side]()
    try:
        message.ParseFromString(body)
    except DecodeError as exc:
        raise error_from_code(pb.BAD_REQUEST, f"undecodable {type(message).__name__} body: {exc}") from exc
    return message
