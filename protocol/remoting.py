"""Envelopes: requests and responses of the broker protocol, and which body type each method carries."""

from __future__ import annotations

from google.protobuf.message import DecodeError
from google.protobuf.message import Message as PbMessage

from protocol import graymq_pb2 as pb
from protocol.errors import GrayMQError, ProtocolError, error_from_code

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
    pb.NOTIFY_GROUP_CHANGED: (pb.GroupChangedNotice, pb.Empty),
}


def method_name(method: int) -> str:
    try:
        return pb.Method.Name(method)
    except ValueError:
        return f"method#{method}"


def request_envelope(method: int, body: PbMessage, oneway: bool = False) -> bytes:
    envelope = pb.Envelope(method=method, oneway=oneway, body=body.SerializeToString())  # type: ignore[arg-type]
    return envelope.SerializeToString()


def response_envelope(method: int, body: PbMessage | None = None) -> bytes:
    data = body.SerializeToString() if body is not None else b""
    envelope = pb.Envelope(method=method, is_response=True, body=data)  # type: ignore[arg-type]
    return envelope.SerializeToString()


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
    types = METHOD_TYPES.get(envelope.method)
    if types is None:
        raise error_from_code(pb.UNKNOWN_METHOD, f"unknown method {method_name(envelope.method)}")
    message = types[1 if response else 0]()
    try:
        message.ParseFromString(envelope.body)
    except DecodeError as exc:
        raise error_from_code(pb.BAD_REQUEST, f"undecodable {type(message).__name__} body: {exc}") from exc
    return message
