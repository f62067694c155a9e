"""protocol/properties.py: a message's own properties within limits and without the reserved names the broker
owns, the compiled ``own_properties`` and its pure reference giving the same answer and the same one-line
refusal; and the consumer's send-back trusting ``RETRY_TOPIC`` only on its group's retry topic."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graymq.client.consumer.fetcher import origin_topic
from graymq.client.message import MessageExt
from graymq.protocol import native
from graymq.protocol.constants import REFUSED_PROPERTIES, STRIPPED_PROPERTIES
from graymq.protocol.errors import IllegalPropertyError, PropertiesTooLargeError, PropertyError
from graymq.protocol.properties import PropertyLimits, own_properties_py

pytestmark = pytest.mark.unit

TWINS = [own_properties_py] + ([] if native.SPEEDUPS is None else [native.SPEEDUPS.own_properties])
LIMITS = PropertyLimits(count=3, name_size=20, value_size=10, total_size=30)
NAMES = st.sampled_from(["a", "bb", "Ü", "", "n" * 9, "DELAY", "RETRY_TOPIC", "TAGS", "__STARTDELIVERTIME"])
VALUES = st.text(max_size=12)


@pytest.mark.parametrize("check", TWINS)
@pytest.mark.parametrize(("own", "tags", "keys", "error", "text"), [
    ({"a": "1", "b": "2", "c": "3", "d": "4"}, "", (), PropertiesTooLargeError,
     "the message has 4 properties, more than the 3 allowed (max_properties)"),
    ({"n" * 21: "v"}, "", (), IllegalPropertyError,
     "a property name of 21 bytes (" + repr("n" * 21) + "), not 1 to 20 (max_property_name_size)"),
    ({"": "v"}, "", (), IllegalPropertyError, "a property name of 0 bytes"),
    ({"big": "é" * 6}, "", (), PropertiesTooLargeError,
     "property 'big' has a value of 12 bytes, more than the 10 allowed (max_property_value_size)"),
    ({}, "t" * 11, (), PropertiesTooLargeError, "the tag of 11 bytes, more than the 10 allowed"),
    ({}, "", ("ok", "k" * 11), PropertiesTooLargeError, "a message key of 11 bytes, more than the 10 allowed"),
    ({"a": "v" * 10, "b": "v" * 10}, "t" * 9, (), PropertiesTooLargeError,
     "the message's properties, tag and keys have 31 bytes, more than the 30 allowed (max_properties_size)"),
    ({"DELAY": "3"}, "", (), IllegalPropertyError, "property 'DELAY' is reserved: graymq does not delay"),
    ({"__STARTDELIVERTIME": "1"}, "", (), IllegalPropertyError, "property '__STARTDELIVERTIME' is reserved"),
])
def test_a_property_out_of_bounds_or_refused_is_named_with_its_limit_in_one_line(check, own, tags, keys, error,
                                                                                  text):
    with pytest.raises(error) as raised:
        check(own, tags, keys, LIMITS)
    assert raised.value.message.startswith(text) and "\n" not in raised.value.message


@pytest.mark.parametrize("check", TWINS)
def test_the_names_the_broker_sets_are_stripped_and_the_rest_kept_in_order(check):
    own = {"z": "1", "RETRY_TOPIC": "X", "TAGS": "t", "PSEQ": "1:2:3", "a": "2", "REAL_TOPIC": "Y"}
    assert list(check(own, "", (), PropertyLimits()).items()) == [("z", "1"), ("a", "2")]
    assert check({}, "", (), PropertyLimits()) == {}


def test_the_reserved_lists_name_the_internal_properties():
    internal = {"RETRY_TOPIC", "TAGS", "KEYS", "UNIQ_KEY", "PGROUP", "PSEQ", "REAL_TOPIC", "REAL_QID"}
    assert internal <= STRIPPED_PROPERTIES
    assert set(REFUSED_PROPERTIES) == {"DELAY", "__STARTDELIVERTIME"}


@pytest.mark.skipif(native.SPEEDUPS is None, reason=f"no compiled hot path: {native.REASON}")
@settings(max_examples=500)
@given(own=st.dictionaries(NAMES, VALUES, max_size=4), tags=VALUES, keys=st.lists(VALUES, max_size=3),
       limits=st.builds(PropertyLimits, count=st.integers(1, 4), name_size=st.integers(1, 12),
                        value_size=st.integers(1, 14), total_size=st.integers(1, 60)))
def test_the_compiled_check_answers_as_its_reference(own, tags, keys, limits):
    outcomes = []
    for check in TWINS:
        try:
            outcomes.append(check(own, tags, keys, limits))
        except PropertyError as exc:
            outcomes.append((type(exc), exc.message))
    assert outcomes[0] == outcomes[1]


def test_a_consumer_trusts_retry_topic_only_on_its_groups_retry_topic():
    spoofed = MessageExt("ORDERS", b"", 0, 0, 0, {"RETRY_TOPIC": "ELSEWHERE"})
    retried = MessageExt("%RETRY%G", b"", 0, 0, 0, {"RETRY_TOPIC": "ORDERS"})
    assert origin_topic(spoofed, "G") == "ORDERS"
    assert origin_topic(retried, "G") == "ORDERS"
    assert origin_topic(retried, "OTHER") == "%RETRY%G"
