"""A stock producer's lane mark: the ``graymq.lane`` user property, else the ``graymq.lane`` entry of the W3C
``baggage`` property; a value that is no lane name is refused, naming where it was found."""

from __future__ import annotations

import doctest

import pytest

from graymq.core import lane_mark
from graymq.core.lane_mark import baggage_entry, message_lane_mark
from graymq.protocol.errors import BadRequestError

pytestmark = pytest.mark.unit


def test_doctests() -> None:
    assert doctest.testmod(lane_mark).failed == 0


@pytest.mark.parametrize(("baggage", "expected"), [
    ("graymq.lane=v3", "v3"),
    ("  graymq.lane  =  v3  ", "v3"),  # optional whitespace around every part
    ("tenant=acme,graymq.lane=v3;ttl=60;sampled,region=eu", "v3"),  # entry properties dropped
    ("graymq.lane=v%33", "v3"),  # percent-encoded value
    ("graymq.lane=v3,graymq.lane=v2", "v3"),  # the first entry
    ("Graymq.Lane=v3", None),  # keys are case-sensitive
    ("xgraymq.lane=v3,graymq.lanes=v2", None),  # only the exact key
    ("graymq.lane", None),  # no "=": no value
    ("", None),
    (",,;=,", None),
])
def test_a_baggage_header_gives_the_value_of_its_graymq_lane_entry(baggage: str, expected: str | None) -> None:
    assert baggage_entry(baggage, "graymq.lane") == expected


def test_the_property_wins_over_baggage_and_neither_is_no_mark() -> None:
    assert message_lane_mark({"graymq.lane": "v2", "baggage": "graymq.lane=v3"}) == "v2"
    assert message_lane_mark({"baggage": "userId=7, graymq.lane=v3"}) == "v3"
    assert message_lane_mark({"baggage": "userId=7"}) is None
    assert message_lane_mark({}) is None


@pytest.mark.parametrize(("properties", "where"), [
    ({"graymq.lane": "v 3"}, "property 'graymq.lane'"),
    ({"graymq.lane": ""}, "property 'graymq.lane'"),
    ({"baggage": "graymq.lane=v3%2Fcanary"}, "baggage entry 'graymq.lane'"),
    ({"baggage": "graymq.lane="}, "baggage entry 'graymq.lane'"),
])
def test_a_mark_that_is_no_lane_name_is_refused_naming_where_it_was(properties: dict[str, str], where: str) -> None:
    with pytest.raises(BadRequestError, match=f"the message's {where} does not name a lane: invalid lane name"):
        message_lane_mark(properties)
