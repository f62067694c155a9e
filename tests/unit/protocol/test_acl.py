"""Rights and patterns of principals, and failed-authentication throttling (no network)."""

from __future__ import annotations

import pytest

from graymq.nameserver.auth import Caller, check_client, check_route, new_token, token_sha256
from graymq.nameserver.errors import Forbidden
from graymq.protocol.acl import ConsumeRight, Rights, check_broker_right, check_consume_right, check_pattern
from graymq.protocol.throttle import FailedAuthThrottle

APP = Rights(produce=("ORDER_*",), consume=(ConsumeRight.parse("billing:ORDER_*"), ConsumeRight.parse("audit")))


def test_patterns_are_case_sensitive_globs_over_whole_names() -> None:
    assert APP.may_produce("ORDER_PAID") and APP.may_produce("ORDER_")
    assert not APP.may_produce("order_paid") and not APP.may_produce("X_ORDER_PAID")
    assert APP.may_consume("billing", "ORDER_PAID") and not APP.may_consume("billing", "USER")
    assert APP.may_consume("audit", "ANYTHING") and not APP.may_consume("billing2")
    assert Rights(admin=True).may_consume("any", "topic") and Rights(admin=True).may_produce("T")


@pytest.mark.parametrize("pattern", ["", "a.b", "a b", "x" * 128, "a/b"])
def test_invalid_patterns_are_refused_with_the_rule(pattern: str) -> None:
    message = check_pattern(pattern)
    assert message is not None and message.startswith(f"invalid pattern {pattern!r}")


def test_consume_rights_are_group_or_group_colon_topic() -> None:
    assert check_consume_right("billing") is None and check_consume_right("bill*:ORDER_?") is None
    assert check_consume_right("billing:") is not None and check_consume_right("a:b:c") is not None
    assert ConsumeRight.parse("g") == ConsumeRight("g", "*")


def test_a_client_acts_only_for_its_groups_and_topics_and_the_refusal_names_the_right() -> None:
    caller = Caller("app-a", APP)
    check_client(caller, "billing", "consumer", ["ORDER_PAID", "%RETRY%billing"])
    check_client(caller, "any_producer_group", "producer", ["ORDER_PAID"])
    with pytest.raises(Forbidden) as refused:
        check_client(caller, "other", "consumer")
    assert refused.value.detail == "principal app-a may not consume group other"
    with pytest.raises(Forbidden) as refused:
        check_client(caller, "billing", "consumer", ["USER"])
    assert refused.value.detail == "principal app-a may not consume topic USER in group billing"
    with pytest.raises(Forbidden):
        check_client(caller, "g", "producer", ["USER"])
    billing = Caller("billing-app", Rights(consume=(ConsumeRight.parse("billing:ORDER_*"),)))
    check_route(billing, "%RETRY%billing")
    check_route(billing, "ORDER_X")
    with pytest.raises(Forbidden) as refused:
        check_route(billing, "USER")
    assert refused.value.detail == "principal billing-app may not produce to or consume topic USER"
    check_route(caller, "USER")  # a consume right on any topic (group audit) may look up every route


def test_tokens_are_random_and_only_their_digest_is_kept() -> None:
    first, second = new_token(), new_token()
    assert first != second and len(first) > 40
    assert token_sha256(first) == token_sha256(first) and len(token_sha256(first)) == 64


def test_the_throttle_refuses_an_address_after_limit_failures_in_the_window_only() -> None:
    throttle = FailedAuthThrottle(limit=3, window_s=60)
    for _ in range(3):
        assert throttle.retry_after("10.0.0.1") is None
        throttle.failed("10.0.0.1")
    wait = throttle.retry_after("10.0.0.1")
    assert wait is not None and 1 <= wait <= 60
    assert throttle.retry_after("10.0.0.2") is None
    expired = FailedAuthThrottle(limit=1, window_s=1e-9)
    expired.failed("a")
    assert expired.retry_after("a") is None


def test_the_throttle_tracks_a_bounded_number_of_addresses() -> None:
    throttle = FailedAuthThrottle(limit=1, window_s=60, max_addresses=2)
    for address in ("a", "b", "c"):
        throttle.failed(address)
    assert throttle.retry_after("a") is None and throttle.retry_after("c") is not None


def test_the_throttle_counts_a_repeated_wrong_token_once_and_new_guesses_each() -> None:
    throttle = FailedAuthThrottle(limit=3, window_s=60)
    for _ in range(10):
        throttle.failed("10.0.0.1", "stale")
    assert throttle.retry_after("10.0.0.1") is None
    assert throttle.failed_before("10.0.0.1", "stale") and not throttle.failed_before("10.0.0.2", "stale")
    throttle.failed("10.0.0.1", "guess-1")
    assert throttle.retry_after("10.0.0.1") is None
    throttle.failed("10.0.0.1", "guess-2")
    assert throttle.retry_after("10.0.0.1") is not None


def test_broker_rights_bind_names_and_replica_ids() -> None:
    fleet = Rights.of([], [], False, True, ["edge-*", "rs:1"])
    assert fleet.may_act_as_broker("edge-7") and fleet.may_act_as_broker("edge-7", 3)
    assert fleet.may_act_as_broker("rs", 1) and not fleet.may_act_as_broker("rs", 0)
    assert not fleet.may_act_as_broker("rs")  # registered without replicas, rs:1 does not cover it
    assert not fleet.may_act_as_broker("broker-a")
    assert not Rights.of(["*"], ["*"], False, False, ["*"]).may_act_as_broker("x")  # no broker right
    assert Rights(admin=True).may_act_as_broker("x", 9)
    assert check_broker_right("rs:1?") is None and check_broker_right("a.b") is not None
