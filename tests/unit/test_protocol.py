"""Generated protobuf code is current, envelopes round trip, error codes map to classes."""

from __future__ import annotations

from pathlib import Path

import pytest

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.codegen import OUT_DIR, generate
from graymq.protocol.errors import (
    GrayIsolationError,
    GrayMQError,
    ProtocolError,
    ServiceNotAvailableError,
    UnknownMethodError,
    error_from_code,
)
from graymq.protocol.remoting import METHOD_TYPES, error_envelope, parse_body, parse_envelope, request_envelope

pytestmark = pytest.mark.unit


def test_generated_code_is_not_stale(tmp_path: Path):
    for path in generate(tmp_path):
        committed = OUT_DIR / path.relative_to(tmp_path)  # graymq's own, and the RocketMQ 5 package beside them
        assert committed.read_bytes() == path.read_bytes(), f"{committed.name} is stale: run `make proto`"


def test_every_method_has_body_types():
    methods = {v for v in pb.Method.values() if v != pb.METHOD_UNSPECIFIED}
    assert methods == set(METHOD_TYPES)


def test_request_round_trip():
    req = pb.PullRequest(consumer_group="g", topic="T", queue_id=3, gray_flag=True)
    env = parse_envelope(request_envelope(pb.PULL_MESSAGE, req))
    assert env.method == pb.PULL_MESSAGE and not env.is_response
    assert parse_body(env, response=False) == req


def test_error_response_raises_the_registered_class():
    env = parse_envelope(error_envelope(pb.PULL_MESSAGE, GrayIsolationError("normal client on gray queue 0")))
    with pytest.raises(GrayIsolationError, match="gray queue 0"):
        parse_body(env, response=True)


def test_unknown_method_and_garbage_bodies():
    env = pb.Envelope(method=999, body=b"")
    with pytest.raises(UnknownMethodError):
        parse_body(env, response=False)
    with pytest.raises(ProtocolError):
        parse_envelope(b"\xff\xff\xff")
    env = pb.Envelope(method=pb.SEND_MESSAGE, body=b"\xff\xff")
    with pytest.raises(GrayMQError) as info:
        parse_body(env, response=False)
    assert info.value.code == pb.BAD_REQUEST


def test_error_registry():
    assert isinstance(error_from_code(pb.SERVICE_NOT_AVAILABLE, "x"), ServiceNotAvailableError)
    assert error_from_code(pb.SERVICE_NOT_AVAILABLE, "x").retriable
    assert not error_from_code(pb.GRAY_ISOLATION_VIOLATION, "x").retriable
    unknown = error_from_code(12345, "boom")
    assert type(unknown) is GrayMQError and "12345" in unknown.message
