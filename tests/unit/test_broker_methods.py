"""Every wire method is in the broker's one table of methods (or named as not served), and each served one has its
processor call and the right it needs (a real broker refusing a code outside the table:
tests/integration/broker/test_broker.py)."""

from __future__ import annotations

import pytest

from graymq.broker_ext.processors.methods import METHODS, NOT_SERVED
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.remoting import METHOD_TYPES

pytestmark = pytest.mark.unit


def test_every_wire_method_is_served_by_the_table_or_named_as_not_served() -> None:
    codes = {value.number for value in pb.Method.DESCRIPTOR.values if value.number}
    assert set(METHODS) | set(NOT_SERVED) == codes
    assert not set(METHODS) & set(NOT_SERVED)
    assert set(METHODS) <= set(METHOD_TYPES)  # the wire knows each method's request type


@pytest.mark.parametrize("code", sorted(set(METHODS) - {pb.AUTHENTICATE}), ids=pb.Method.Name)
def test_a_served_method_has_its_processor_call_and_right(code: int) -> None:
    method = METHODS[code]
    assert method.code == code and callable(method.serve) and callable(method.right)


def test_authenticate_is_the_servers_own_and_writes_nothing() -> None:
    assert METHODS[pb.AUTHENTICATE].serve is None and not METHODS[pb.AUTHENTICATE].writes

