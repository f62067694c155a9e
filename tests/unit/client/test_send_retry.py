"""The producer's retry decision, case by case: each error class against the attempt's state (first attempt, a
resend of a request that may be stored, retries spent), with no network and no event loop."""

from __future__ import annotations

import pytest

from graymq.client.send_retry import RetryState, Step, after_failure, attempt_timeout
from graymq.protocol.errors import (
    BadRequestError,
    ConnectFailedError,
    ConnectionClosedError,
    DiskFullError,
    FlushTimeoutError,
    GrayMQError,
    MessageTooLargeError,
    NoPermissionError,
    NotLeaderError,
    ReplicationTimeoutError,
    RequestTimeoutError,
    SendRetry,
    ServiceNotAvailableError,
    SystemBusyError,
    TopicNotExistError,
)

pytestmark = pytest.mark.unit

FIRST = RetryState()
RESENDING = RetryState(Step.SAME_QUEUE, retries=1, error=RequestTimeoutError())


def decide(state: RetryState, error: GrayMQError, *, replicated: bool = False, retry_times: int = 2) -> RetryState:
    return after_failure(state, error, broker_name="broker-a", replicated=replicated, retry_times=retry_times)


@pytest.mark.parametrize("error", [RequestTimeoutError(), ConnectionClosedError(), FlushTimeoutError(),
                                   ReplicationTimeoutError()], ids=lambda e: type(e).__name__)
def test_an_outcome_unknown_retries_the_same_queue_and_counts(error: GrayMQError) -> None:
    state = decide(FIRST, error)
    assert (state.step, state.retries, state.error, state.avoid_broker) == (Step.SAME_QUEUE, 1, error, None)
    assert state.resending  # same queue, same sequence: the broker stores it once


@pytest.mark.parametrize("error", [SystemBusyError(), DiskFullError(), ServiceNotAvailableError(),
                                   ConnectFailedError(), NotLeaderError()], ids=lambda e: type(e).__name__)
def test_a_first_attempt_that_stored_nothing_rotates_to_another_broker(error: GrayMQError) -> None:
    state = decide(FIRST, error, replicated=True)
    assert (state.step, state.retries, state.avoid_broker) == (Step.NEW_QUEUE, 1, "broker-a")
    assert not state.resending  # a new queue: its next sequence


LEADERLESS = [NotLeaderError(), ConnectFailedError(), ServiceNotAvailableError()]


@pytest.mark.parametrize("error", LEADERLESS, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("brokers", [None, {"broker-a"}], ids=["others", "alone"])
def test_a_resend_whose_broker_set_lost_its_leader_waits_for_the_new_leader_uncounted(
        error: GrayMQError, brokers: set[str] | None) -> None:
    state = after_failure(RESENDING, error, broker_name="broker-a", replicated=True, retry_times=2, brokers=brokers)
    assert (state.step, state.retries) == (Step.NEW_LEADER, 1)
    assert state.resending  # the same queue and sequence, at the new leader
    assert decide(state, RequestTimeoutError()).step is Step.SAME_QUEUE  # from there on, as any resend


def alone(state: RetryState, error: GrayMQError, *, replicated: bool = True, retry_times: int = 2,
          broker: str = "broker-a", brokers: frozenset[str] = frozenset({"broker-a"})) -> RetryState:
    return after_failure(state, error, broker_name=broker, replicated=replicated, retry_times=retry_times,
                         brokers=brokers)


@pytest.mark.parametrize("error", LEADERLESS, ids=lambda e: type(e).__name__)
def test_a_first_attempt_refused_by_a_leaderless_set_with_nowhere_else_to_go_waits_uncounted(
        error: GrayMQError) -> None:
    state = FIRST
    for _ in range(10):  # an election of many backoffs: bounded by the send's timeout, not by retry_times
        state = alone(state, error, retry_times=1)
        assert (state.step, state.retries, state.avoid_broker, state.error) == (Step.WAIT_LEADER, 0, "broker-a", error)
        assert not state.resending  # nothing was stored: a new queue, under its next sequence
    after = alone(state, RequestTimeoutError())  # the new leader took it but did not answer: resent as any
    assert (after.step, after.retries) == (Step.SAME_QUEUE, 1)


def test_a_leaderless_set_with_another_broker_rotates_there_and_waits_once_every_set_refused() -> None:
    brokers = frozenset({"broker-a", "broker-b"})
    state = alone(FIRST, NotLeaderError(), brokers=brokers)
    assert (state.step, state.retries, state.avoid_broker) == (Step.NEW_QUEUE, 1, "broker-a")  # as before
    state = alone(state, ConnectFailedError(), broker="broker-b", brokers=brokers)
    assert (state.step, state.retries, state.leaderless) == (Step.WAIT_LEADER, 1, brokers)


@pytest.mark.parametrize("error", [SystemBusyError(), DiskFullError()], ids=lambda e: type(e).__name__)
def test_a_refusal_that_is_not_about_a_leader_is_counted_even_with_nowhere_else_to_go(error: GrayMQError) -> None:
    state = alone(FIRST, error)
    assert (state.step, state.retries) == (Step.NEW_QUEUE, 1)
    assert alone(state, error, retry_times=1).step is Step.STOP


def test_an_unreplicated_broker_that_refuses_is_counted_even_with_nowhere_else_to_go() -> None:
    state = alone(FIRST, ConnectFailedError(), replicated=False)
    assert (state.step, state.retries) == (Step.NEW_QUEUE, 1)  # no election to wait for: it is simply down
    assert alone(state, NotLeaderError(), replicated=False, retry_times=1).step is Step.STOP


def test_a_resend_refused_by_an_unreplicated_broker_rotates() -> None:
    state = decide(RESENDING, ConnectFailedError(), replicated=False)
    assert (state.step, state.retries, state.avoid_broker) == (Step.NEW_QUEUE, 2, "broker-a")


def test_a_resend_that_times_out_again_keeps_the_queue() -> None:
    assert decide(RESENDING, RequestTimeoutError()).step is Step.SAME_QUEUE


@pytest.mark.parametrize("state", [FIRST, RESENDING], ids=["first", "resending"])
def test_a_broker_without_the_topic_rechecks_the_route_uncounted(state: RetryState) -> None:
    after = decide(state, TopicNotExistError())
    assert (after.step, after.retries, after.avoid_broker) == (Step.RECHECK_TOPIC, state.retries, "broker-a")
    assert not after.resending


@pytest.mark.parametrize("error", [BadRequestError(), NoPermissionError(), MessageTooLargeError(), GrayMQError()],
                         ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("state", [FIRST, RESENDING], ids=["first", "resending"])
def test_a_non_retriable_error_stops(state: RetryState, error: GrayMQError) -> None:
    after = decide(state, error)
    assert (after.step, after.error) == (Step.STOP, error)


@pytest.mark.parametrize("error", [RequestTimeoutError(), SystemBusyError()], ids=lambda e: type(e).__name__)
def test_retries_spent_stop_with_the_last_error(error: GrayMQError) -> None:
    state = RetryState(Step.SAME_QUEUE, retries=1, error=RequestTimeoutError())
    after = decide(state, error, retry_times=1)
    assert (after.step, after.retries, after.error) == (Step.STOP, 2, error)
    assert decide(FIRST, error, retry_times=0).step is Step.STOP


def test_waiting_for_a_leader_does_not_spend_retries() -> None:
    state = RetryState(Step.SAME_QUEUE, retries=1, error=RequestTimeoutError())
    for _ in range(5):
        state = decide(state, NotLeaderError(), replicated=True, retry_times=1)
        assert state.step is Step.NEW_LEADER  # bounded by the send's timeout, not by retry_times


def test_the_timeout_budget_is_shared_among_the_counted_attempts_left() -> None:
    assert attempt_timeout(FIRST, 3.0, retry_times=2) == 1.0
    assert attempt_timeout(RetryState(retries=2), 1.0, retry_times=2) == 1.0  # the last attempt: all that is left
    assert attempt_timeout(FIRST, -1.0, retry_times=2) > 0  # budget spent: the caller stops before sending


def test_every_error_class_says_what_a_send_does_after_it() -> None:
    assert ConnectFailedError.send_retry is SendRetry.NEW_LEADER  # not its parent's SAME_QUEUE: nothing was sent
    assert ConnectionClosedError.send_retry is SendRetry.SAME_QUEUE
    assert ServiceNotAvailableError.send_retry is SendRetry.NEW_LEADER  # a set's leader shutting down
    assert SystemBusyError.send_retry is SendRetry.ROTATE and BadRequestError.send_retry is SendRetry.STOP

    class Retriable(GrayMQError):
        retriable = True

    class Refusal(SystemBusyError):
        retriable = False

    assert (Retriable.send_retry, Refusal.send_retry) == (SendRetry.ROTATE, SendRetry.STOP)
