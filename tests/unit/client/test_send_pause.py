"""``send_pause.pause_s``, shared by Producer and BlockingProducer: after each retry step, whether the route is
marked for refresh and how long the next attempt waits (never past the send's time left)."""

from __future__ import annotations

import pytest

from graymq.client.message import MessageQueue
from graymq.client.send_pause import LEADER_WAIT_S, pause_s, send_brokers
from graymq.client.send_retry import RetryState, after_failure
from graymq.core.route import BrokerData, TopicRoute
from graymq.core.selector import GrayQueueSelector
from graymq.protocol.errors import (
    ConnectFailedError,
    GrayMQError,
    NotLeaderError,
    RequestTimeoutError,
    TopicNotExistError,
)
from graymq.protocol.retry import Backoff

MQ = MessageQueue("T", "broker-a", 1)
FIRST = RetryState()


class Routes:
    def __init__(self) -> None:
        self.invalidated: list[str] = []

    def invalidate(self, topic: str) -> None:
        self.invalidated.append(topic)


def after(error: GrayMQError, state: RetryState = FIRST, replicated: bool = False) -> RetryState:
    return after_failure(state, error, broker_name="broker-a", replicated=replicated, retry_times=2)


@pytest.mark.parametrize(("state", "wait_s", "invalidated"), [
    (after(TopicNotExistError()), 0.05, []),  # back off; the route is asked again by the step itself
    (after(NotLeaderError(), after(RequestTimeoutError()), replicated=True), LEADER_WAIT_S, ["T"]),
    (after(ConnectFailedError()), 0.0, ["T"]),  # another queue at once, on a fresh route
    (after_failure(FIRST, NotLeaderError(), broker_name="broker-a", replicated=True, retry_times=2,
                   brokers={"broker-a"}), 0.05, ["T"]),  # a leaderless set, nowhere else: back off, fresh route
    (after(RequestTimeoutError()), 0.0, []),  # the same queue and sequence at once
])
def test_each_step_waits_and_refreshes_the_route_as_it_needs(state: RetryState, wait_s: float,
                                                             invalidated: list[str]) -> None:
    routes = Routes()
    assert pause_s(state, MQ, 7, Backoff(0.05, 0.5, rand=lambda: 1.0), routes, left_s=10.0) == pytest.approx(wait_s)
    assert routes.invalidated == invalidated


def test_no_wait_outlasts_the_time_left() -> None:
    state = after(NotLeaderError(), after(RequestTimeoutError()), replicated=True)
    assert pause_s(state, MQ, 7, Backoff(0.05, 0.5), Routes(), left_s=0.01) == 0.01


def test_the_brokers_a_send_may_go_to_are_those_of_its_side_or_its_own_for_a_fixed_queue() -> None:
    route = TopicRoute("T", (BrokerData("broker-a", "a:1", 4, 2, replicas=2), BrokerData("broker-b", "b:1", 4, 2),
                             BrokerData("broker-c", "c:1", 4, 2, perm=4)))  # c takes no writes
    selector = GrayQueueSelector()
    assert send_brokers(selector, route, False, True, MQ, fixed=False) == {"broker-a", "broker-b"}
    assert send_brokers(selector, route, True, True, MQ, fixed=True) == {"broker-a"}  # a sharding key, a pinned queue
