"""A SEND_MESSAGE request written straight to its wire bytes for the blocking producer's send path: the message
serialized once per send, then wrapped per attempt (a retry changes only the queue and the sequence).

``encode_message`` writes the ``pb.Message``; ``send_envelope`` wraps it in a ``SendRequest`` inside the request
``Envelope`` (the frame's payload). The compiled pair (``graymq.protocol._client_speedups``, built from
protocol/_client_speedups.pyx at install) writes each in one bytes object, fields in field-number order and
proto3 defaults left out, as protobuf does; the pure pair lets protobuf write them (faster in Python than
writing the fields by hand, even reading the message back once per attempt). A protobuf parser reads the same
request from both (tests/unit/client/test_send_wire.py). The compiled pair runs where
``graymq.protocol.native`` runs the compiled path (so ``GRAYMQ_PURE=1`` keeps the pure pair).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol import native
from graymq.protocol.remoting import request_envelope

log = logging.getLogger(__name__)
SEND_HEAD = request_envelope(pb.SEND_MESSAGE, pb.Empty())  # the Envelope's fields before its body (= 6)


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
