"""A message as the fields of its ``pb.Message``: what every producer puts in a SEND_MESSAGE or SEND_BATCH.

Shared by the async ``Producer`` (client/producer.py) and the ``BlockingProducer`` (client/blocking_producer.py).
A request built from dicts costs a third of one built from message objects, which protobuf copies; the blocking
producer's single send takes the message's bytes (``message_wire``) instead.
"""

from __future__ import annotations

import socket
from typing import Any, Protocol

from graymq.client.message import Message, MessageExt
from graymq.client.send_wire import encode_message
from graymq.core.gray_side import Mark
from graymq.protocol.errors import BadRequestError

HOST = socket.gethostname()


class IdSource(Protocol):
    """Where message and trace ids come from (``producer.MessageIds``)."""

    def msg_id(self) -> str: ...

    def trace_id(self) -> str: ...


def message_fields(message: Message, gray: Mark, born_ms: int, handling: MessageExt | None,
                   properties: dict[str, str], ids: IdSource) -> dict[str, Any]:
    """The ``pb.Message`` of ``message`` as constructor fields; empty fields are left out. ``handling``: the message
    being handled (its trace id is inherited); ``properties``: the message's, with its send span's context when
    traced. A message without a topic is refused.

    >>> class Ids:
    ...     def msg_id(self): return "M"
    ...     def trace_id(self): return "T"
    >>> sorted(message_fields(Message("t", b"x", tags="a"), False, 1, None, {}, Ids()))
    ['body', 'born_host', 'born_timestamp', 'gray', 'msg_id', 'tags', 'topic', 'trace_id']
    """
    fields: dict[str, Any] = {
        "topic": message.topic, "body": message.body, "gray": bool(gray), "trace_id": _trace_id(message, handling, ids),
        "msg_id": ids.msg_id(), "born_timestamp": born_ms, "born_host": HOST,
    }
    if message.tags:
        fields["tags"] = message.tags
    if message.keys:
        fields["keys"] = message.keys
    if properties:
        fields["properties"] = properties
    return fields


def message_wire(message: Message, gray: Mark, born_ms: int, handling: MessageExt | None, ids: IdSource) -> bytes:
    """The same ``pb.Message`` as ``message_fields``, serialized (``send_wire.encode_message``): the blocking
    producer's single send, whose attempts all carry these bytes."""
    return encode_message(message.topic, message.body, message.tags, message.keys, message.properties, bool(gray),
                          _trace_id(message, handling, ids), ids.msg_id(), born_ms, HOST)


def _trace_id(message: Message, handling: MessageExt | None, ids: IdSource) -> str:
    """The message's own trace id, else the handled message's, else a new one; a message without a topic is
    refused here, before anything is sent."""
    if not message.topic:
        raise BadRequestError("message without topic")
    return message.trace_id or (handling.trace_id if handling else "") or ids.trace_id()
