"""The blocking producer's SEND_MESSAGE written straight to bytes (client/send_wire.py): compiled and pure pair
against protobuf's own ``pb.SendRequest``, for any message fields, queue, producer id and sequence."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graymq.client import send_wire
from graymq.client.message import Message
from graymq.client.producer import MessageIds
from graymq.client.send_fields import message_fields, message_wire
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol import native
from graymq.protocol.errors import BadRequestError
from graymq.protocol.remoting import request_envelope

pytestmark = pytest.mark.unit

PAIRS = [pytest.param((send_wire.encode_message_py, send_wire.send_envelope_py), id="pure")]
if send_wire.COMPILED is not None:
    PAIRS.append(pytest.param((send_wire.COMPILED.encode_message, send_wire.COMPILED.send_envelope), id="compiled"))

TEXT = st.text(max_size=40)


def message_fields_of(max_properties: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({
        "topic": st.text(min_size=1, max_size=20), "body": st.binary(max_size=300), "tags": TEXT,
        "keys": st.lists(TEXT, max_size=3), "properties": st.dictionaries(TEXT, TEXT, max_size=max_properties),
        "gray": st.booleans(), "trace_id": TEXT, "msg_id": TEXT, "born_ms": st.integers(0, 2**63 - 1),
        "born_host": TEXT,
    })


FIELDS = message_fields_of(3)
ATTEMPT = st.tuples(st.text(max_size=20), st.integers(-(2**31), 2**31 - 1), st.integers(0, 2**64 - 1),
                    st.integers(-(2**63), 2**63 - 1))


def expected(fields: dict[str, Any], group: str, queue_id: int, producer_id: int, sequence: int) -> pb.SendRequest:
    message = pb.Message(topic=fields["topic"], body=fields["body"], tags=fields["tags"], keys=fields["keys"],
                         properties=fields["properties"], gray=fields["gray"], trace_id=fields["trace_id"],
                         msg_id=fields["msg_id"], born_timestamp=fields["born_ms"], born_host=fields["born_host"])
    return pb.SendRequest(producer_group=group, message=message, queue_id=queue_id, producer_id=producer_id,
                          sequence=sequence)


@pytest.mark.parametrize("pair", PAIRS)
@settings(max_examples=300, deadline=None)
@given(fields=FIELDS, attempt=ATTEMPT)
def test_the_written_request_reads_back_as_the_protobuf_request(pair: Any, fields: dict[str, Any],
                                                                 attempt: tuple[str, int, int, int]) -> None:
    encode_message, send_envelope = pair
    message = encode_message(fields["topic"], fields["body"], fields["tags"], fields["keys"], fields["properties"],
                             fields["gray"], fields["trace_id"], fields["msg_id"], fields["born_ms"],
                             fields["born_host"])
    envelope = pb.Envelope.FromString(send_envelope(send_wire.SEND_HEAD, attempt[0], message, *attempt[1:]))
    assert envelope.method == pb.SEND_MESSAGE and not envelope.is_response and not envelope.oneway
    assert pb.SendRequest.FromString(envelope.body) == expected(fields, *attempt)


@pytest.mark.skipif(send_wire.COMPILED is None, reason="no compiled request encoder")
@settings(max_examples=300, deadline=None)
@given(fields=message_fields_of(1), attempt=ATTEMPT)  # map entries: in no set order past one
def test_the_compiled_request_is_byte_identical_to_protobufs(fields: dict[str, Any],
                                                              attempt: tuple[str, int, int, int]) -> None:
    compiled = send_wire.COMPILED
    message = compiled.encode_message(fields["topic"], fields["body"], fields["tags"], fields["keys"],
                                      fields["properties"], fields["gray"], fields["trace_id"], fields["msg_id"],
                                      fields["born_ms"], fields["born_host"])
    ours = compiled.send_envelope(send_wire.SEND_HEAD, attempt[0], message, *attempt[1:])
    assert ours == request_envelope(pb.SEND_MESSAGE, expected(fields, *attempt))


def test_message_wire_carries_what_message_fields_carries() -> None:
    message = Message("t", b"body", tags="a", keys=["k1", "k2"], properties={"p": "v"}, trace_id="tr")
    wire = pb.Message.FromString(message_wire(message, True, 42, None, MessageIds()))
    fields = message_fields(message, True, 42, None, message.properties, MessageIds())
    assert wire.msg_id and wire.born_host == fields["born_host"]
    assert pb.Message(**{**fields, "msg_id": wire.msg_id}) == wire


def test_a_message_without_topic_is_refused_before_it_is_written() -> None:
    with pytest.raises(BadRequestError, match="without topic"):
        message_wire(Message("", b"x"), False, 1, None, MessageIds())


def test_a_retry_rewraps_the_same_message_under_its_new_queue_and_sequence() -> None:
    send = send_wire.WireSend("g", send_wire.encode_message("t", b"x", "", [], {}, False, "", "m", 1, "h"), 7)
    send.queue_id, send.sequence = 3, 9
    request = pb.SendRequest.FromString(pb.Envelope.FromString(send.envelope()).body)
    assert (request.queue_id, request.sequence, request.producer_id, request.message.msg_id) == (3, 9, 7, "m")


def test_the_install_builds_the_compiled_encoder_beside_the_compiled_hot_path() -> None:
    """setup.py builds both extensions: where the broker's compiled path runs, the blocking client's does too."""
    assert (send_wire.COMPILED is None) == (native.SPEEDUPS is None), native.REASON
