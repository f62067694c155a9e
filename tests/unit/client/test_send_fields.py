"""``message_fields``, what both producers put in a request: empty fields left out, the trace id inherited from the
message being handled, a message without a topic refused."""

from __future__ import annotations

import doctest

import pytest

from graymq.client import send_fields
from graymq.client.message import Message
from graymq.client.producer import MessageIds
from graymq.client.send_fields import message_fields
from graymq.protocol.constants import PROPERTY_TRACE_ID
from graymq.protocol.errors import BadRequestError
from graymq.protocol.record import MessageExt


def test_doctests() -> None:
    assert doctest.testmod(send_fields).failed == 0


def test_the_trace_id_is_the_messages_else_the_handled_messages_else_a_new_one() -> None:
    ids = MessageIds()
    handled = MessageExt("UP", b"", 0, 0, 0, properties={PROPERTY_TRACE_ID: "handled-trace"})
    assert message_fields(Message("T", b"x", trace_id="own"), False, 1, handled, {}, ids)["trace_id"] == "own"
    assert message_fields(Message("T", b"x"), False, 1, handled, {}, ids)["trace_id"] == "handled-trace"
    fresh = message_fields(Message("T", b"x", keys=["k"]), True, 1, None, {"p": "v"}, ids)
    assert len(fresh["trace_id"]) == 16 and fresh["keys"] == ["k"] and fresh["properties"] == {"p": "v"}
    assert fresh["gray"] is True and len(fresh["msg_id"]) == 32


def test_a_message_without_a_topic_is_refused() -> None:
    with pytest.raises(BadRequestError, match="without topic"):
        message_fields(Message("", b"x"), False, 1, None, {}, MessageIds())
