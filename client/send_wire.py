"""A SEND_MESSAGE on the wire for the blocking producer's send path: the request written straight to its bytes (the
message serialized once per send, then wrapped per attempt: a retry changes only the queue and the sequence), and
its answer read straight from the bytes received.

``encode_message`` writes the ``pb.Message``; ``send_envelope`` wraps it in a ``SendRequest`` inside the request
``Envelope`` (the frame's payload). The compiled pair (``graymq.protocol._client_speedups``, built from
protocol/_client_speedups.pyx at install) writes each in one bytes object, fields in field-number order and
proto3 defaults left out, as protobuf does; the pure pair lets protobuf write them (faster in Python than
writing the fields by hand, even reading the message back once per attempt). A protobuf parser reads the same
request from both (tests/unit/client/test_send_wire.py). The compiled pair runs where
``graymq.protocol.native`` runs the compiled path (so ``GRAYMQ_PURE=1`` keeps the pure pair).

``send_reply`` reads the answer when the bytes of the first read are exactly its frame (the usual case), without a
frame object, an ``Envelope`` or a ``SendResponse``; anything else (a push first, a frame cut in two, an encoding it
does not read) it leaves to the connection's general path, which reads every frame through protobuf. The compiled
one reads the protobuf fields in C; the pure one (its reference) lets protobuf read them. Either gives the answer
the general path would give (tests/unit/client/test_send_reply.py).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from google.protobuf.message import DecodeError

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol import native
from graymq.protocol.frame import BLOCK_LENGTH, FRAME_HEADER, MSG_TOKEN
from graymq.protocol.remoting import request_envelope

log = logging.getLogger(__name__)
SEND_HEAD = request_envelope(pb.SEND_MESSAGE, pb.Empty())  # the Envelope's fields before its body (= 6)
# (0, msg_id, queue_offset, commit_log_offset) of a stored message, (code, error_message, 0, 0) of a refusal
SendReply: TypeAlias = tuple[int, str, int, int]
# a frame of one block: token, serial number, block count (1), the block's length
REPLY_HEAD = FRAME_HEADER.size + BLOCK_LENGTH.size


def encode_message_py(topic: str, body: bytes, tags: str, keys: Sequence[str], properties: Mapping[str, str],
                      gray: bool, trace_id: str, msg_id: str, born_ms: int, born_host: str) -> bytes:
    """The serialized ``pb.Message`` of these fields (the reference of the compiled ``encode_message``)."""
    return pb.Message(topic=topic, body=body, tags=tags, keys=keys, properties=properties, gray=gray,
                      trace_id=trace_id, msg_id=msg_id, born_timestamp=born_ms,
                      born_host=born_host).SerializeToString()


def send_envelope_py(head: bytes, group: str, message: bytes, queue_id: int, producer_id: int,
                     sequence: int) -> bytes:
    """The request ``Envelope`` (``head``, then its body field) carrying a ``SendRequest`` of ``message`` (the
    reference of the compiled ``send_envelope``: protobuf reads the message back and writes the request)."""
    request = pb.SendRequest(producer_group=group, queue_id=queue_id, producer_id=producer_id, sequence=sequence)
    request.message.ParseFromString(message)
    return head + request_envelope(pb.SEND_MESSAGE, request)[len(SEND_HEAD):]


def send_reply_py(buffer: bytearray, size: int, serial: int, max_frame_size: int) -> SendReply | None:
    """The answer to the SEND_MESSAGE numbered ``serial`` when ``buffer[:size]`` is exactly its frame, of one block;
    None otherwise, and for bytes protobuf refuses (the general path then reads them and raises). The reference
    of the compiled ``send_reply``."""
    if not REPLY_HEAD <= size <= len(buffer):
        return None
    token, serial_no, blocks = FRAME_HEADER.unpack_from(buffer)
    (length,) = BLOCK_LENGTH.unpack_from(buffer, FRAME_HEADER.size)
    if token != MSG_TOKEN or serial_no != serial or blocks != 1 or length != size - REPLY_HEAD or \
            length > max_frame_size:
        return None
    try:
        envelope = pb.Envelope.FromString(bytes(buffer[REPLY_HEAD:size]))
        if not envelope.is_response:
            return None
        if envelope.code != pb.OK:
            return envelope.code, envelope.error_message, 0, 0
        if envelope.method != pb.SEND_MESSAGE:
            return None
        response = pb.SendResponse.FromString(envelope.body)
    except DecodeError:
        return None
    return pb.OK, response.msg_id, response.queue_offset, response.commit_log_offset


def _load() -> Any:
    """The compiled module when the compiled path runs (``native.SPEEDUPS``: not under ``GRAYMQ_PURE=1``, nor
    where nothing was built), else None; one warning when only this module is missing."""
    if native.SPEEDUPS is None:
        return None
    try:
        from graymq.protocol import _client_speedups  # type: ignore[attr-defined]
    except ImportError as exc:
        log.warning("graymq's blocking producer writes its requests through protobuf: the compiled "
                    "graymq.protocol._client_speedups is not available (%s); reinstall with a C compiler", exc)
        return None
    return _client_speedups


COMPILED = _load()  # the compiled module, or None on the pure path
encode_message = encode_message_py if COMPILED is None else COMPILED.encode_message
send_envelope = send_envelope_py if COMPILED is None else COMPILED.send_envelope
send_reply = send_reply_py if COMPILED is None else COMPILED.send_reply


class WireSend:
    """One send's SEND_MESSAGE: the message's bytes, and the queue and sequence its retry loop sets per attempt
    (as it sets them on a ``pb.SendBatchRequest``)."""

    __slots__ = ("group", "message", "producer_id", "queue_id", "sequence")

    def __init__(self, group: str, message: bytes, producer_id: int) -> None:
        self.group = group
        self.message = message
        self.producer_id = producer_id
        self.queue_id = 0
        self.sequence = 0

    def envelope(self) -> bytes:
        """The request envelope of the attempt the queue and sequence describe."""
        return send_envelope(SEND_HEAD, self.group, self.message, self.queue_id, self.producer_id, self.sequence)
