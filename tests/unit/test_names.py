"""The one name rule of protocol/names.py: topics and groups as RocketMQ, client ids free but URL-safe."""

from __future__ import annotations

import pytest

from graymq.protocol.names import (
    BASE_LANE,
    NAME_MAX_LENGTH,
    check_client_id,
    check_group_name,
    check_lane_name,
    check_topic_name,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("name", ["T", "TOPIC_ORDER-v2", "%RETRY%group", "a|b", "x" * NAME_MAX_LENGTH])
def test_topic_and_group_names_that_follow_the_rule_pass(name):
    assert check_topic_name(name) is None and check_group_name(name) is None


@pytest.mark.parametrize(("name", "problem"), [
    ("", "it is empty"),
    ("a b", "' ' is not allowed"),
    ("a\tb", "'\\t' is not allowed"),
    ("a.b/c", "'.', '/' are not allowed"),
    ("x" * (NAME_MAX_LENGTH + 1), f"it has {NAME_MAX_LENGTH + 1} characters"),
])
def test_a_broken_name_says_which_name_what_is_wrong_and_the_rule(name, problem):
    message = check_topic_name(name)
    assert message is not None
    assert message.startswith(f"invalid topic name {name!r}: {problem} (1 to {NAME_MAX_LENGTH} characters from")
    assert check_group_name(name) == message.replace("topic", "group", 1)


@pytest.mark.parametrize("client_id", ["host-1.example.com@42@consumer-ab12", "spark:job#1"])
def test_client_ids_allow_what_default_ids_hold(client_id):
    assert check_client_id(client_id) is None


@pytest.mark.parametrize("client_id", ["", "c 1", "a/b", "c\x00", "x" * 256])
def test_client_ids_that_cannot_travel_in_a_url_path_are_refused(client_id):
    message = check_client_id(client_id)
    assert message is not None and message.startswith(f"invalid client id {client_id!r}: ")


def test_the_broker_and_the_name_server_use_the_same_topic_rule():
    from graymq.broker_ext import topic_config
    from graymq.broker_ext.processors import client_processor
    from graymq.nameserver import schemas

    assert topic_config.check_topic_name is check_topic_name
    assert client_processor.check_group_name is check_group_name
    assert schemas.check_topic_name is check_topic_name


def test_base_is_no_lane_name_since_it_labels_the_side_without_a_lane() -> None:
    assert check_lane_name("v3") is None and check_lane_name("gray") is None
    assert check_lane_name(BASE_LANE) == "invalid lane name 'base': it names the side without a lane"
