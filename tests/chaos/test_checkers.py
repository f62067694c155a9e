"""The chaos checkers and the report table, on hand-made records (no cluster)."""

from __future__ import annotations

import doctest

import pytest

from tests.chaos import checkers
from tests.chaos.checkers import (
    Consumed,
    Sent,
    Window,
    duplicated,
    gray_violations,
    lost,
    messages_in,
    recovery_time,
    reordered,
)
from tests.chaos.report import COLUMNS, evaluate, format_table

pytestmark = pytest.mark.unit


def sent(msg_id: str, queue_offset: int = 0, *, acked_at: float = 1.0, commit_log_offset: int = 0,
         gray: bool = False) -> Sent:
    return Sent(msg_id, "T", "b", 0, queue_offset, gray, None, commit_log_offset, acked_at - 0.1, acked_at)


def got(msg_id: str, queue_offset: int = 0, *, client: str = "v1a", queue_id: int = 0, gray: bool = False,
        at: float = 2.0) -> Consumed:
    return Consumed(msg_id, client, client[:2], "T", "b", queue_id, queue_offset, gray, at)


def test_docstring_examples_hold():
    assert doctest.testmod(checkers).failed == 0


def test_lost_is_every_acked_message_nobody_consumed_in_ack_order():
    acked = [sent("late", acked_at=3.0), sent("early", acked_at=1.0), sent("ok", acked_at=2.0)]
    assert [s.msg_id for s in lost(acked, [got("ok", client="v2a"), got("unacked")])] == ["early", "late"]
    assert lost(acked, [got("late"), got("early"), got("ok")]) == []


def test_duplicated_counts_deliveries_across_consumers():
    events = [got("a"), got("a", client="v2a"), got("b"), got("c"), got("c"), got("c")]
    assert duplicated(events) == {"a": 2, "c": 3}
    assert duplicated([got("a"), got("b")]) == {}


def test_reordered_flags_a_consumer_going_back_in_a_queue():
    events = [got("m0", 0), got("m2", 2), got("m1", 1), got("m3", 3)]
    assert [(e.msg_id, top) for e, top in reordered(events)] == [("m1", 2)]


def test_redelivery_after_a_crash_is_a_duplicate_not_a_reordering():
    events = [got("m0", 0), got("m1", 1), got("m2", 2), got("m1", 1), got("m2", 2), got("m3", 3)]
    assert reordered(events) == []


def test_order_is_per_consumer_and_per_queue():
    events = [got("a5", 5), got("b1", 1, queue_id=1), got("c2", 2, client="v2a"), got("a6", 6)]
    assert reordered(events) == []


def test_gray_violation_is_a_v1_consumer_taking_a_gray_message_inside_the_isolation_window():
    events = [got("g1", gray=True, at=5.0), got("g2", gray=True, client="v2a", at=5.0),
              got("n1", at=5.0), got("g3", gray=True, at=20.0)]
    found = gray_violations(events, [Window(0.0, 10.0)])
    assert [e.msg_id for e in found] == ["g1"]  # v2 may take gray; after the window (an adopt) v1 may too
    assert gray_violations(events, []) == []


def test_recovery_time_waits_for_traffic_sent_after_the_fault():
    acked = [sent("before", acked_at=9.0), sent("in_flight", acked_at=10.05), sent("after", acked_at=11.0)]
    events = [got("before", at=10.2), got("in_flight", at=10.3), got("after", at=12.5)]
    assert recovery_time(10.0, acked, events) == pytest.approx(2.5)  # "in_flight" was sent before the fault


def test_recovery_time_is_none_when_nothing_sent_after_the_fault_was_consumed():
    acked = [sent("a", acked_at=1.0), sent("b", acked_at=6.0)]
    assert recovery_time(5.0, acked, [got("a", at=7.0)]) is None


def test_a_queue_position_acknowledged_for_two_messages_is_a_split_ack():
    acked = [sent("a", 5), sent("b", 6), sent("c", 6, acked_at=2.0)]  # two leaders each stored one at offset 6
    assert evaluate("leader_cut/sync", 3, acked, [], 1.0, []).split_acks == 1


def test_messages_in_a_hole_are_those_whose_record_starts_inside_it():
    records = [sent("a", commit_log_offset=0), sent("b", commit_log_offset=100), sent("c", commit_log_offset=200)]
    assert [s.msg_id for s in messages_in(records, 100, 100)] == ["b"]
    assert [s.msg_id for s in messages_in(records, 50, 200)] == ["b", "c"]


def test_evaluate_and_table_show_one_row_per_case_with_every_column():
    acked = [sent("a", 0, gray=True, acked_at=1.0), sent("b", 1, acked_at=2.0), sent("lost", 2, acked_at=3.0)]
    events = [got("a", 0, client="v2a", gray=True, at=2.0), got("b", 1, at=4.0), got("b", 1, at=4.5)]
    result = evaluate("kill9/sync", 4, acked, events, 1.5, [Window(0.0, 10.0)], notes=["a note"])  # "b" sent at 1.9
    assert (result.sent, result.acked, result.consumed, result.lost, result.duplicated, result.reordered,
            result.gray_violations, result.recovery_s) == (4, 3, 2, ["lost"], 1, 0, 0, 2.5)
    table = format_table([result]).splitlines()
    assert table[0].split() == " ".join(COLUMNS).split()
    # b: delivered again; no split ack; writes and reads down only measured in partition cases
    assert table[2].split() == ["kill9/sync", "4", "3", "2", "1", "0", "-", "1", "0", "0", "0", "0", "2.50", "-", "-"]
    # what the fault may cost (here: declared so) is counted apart from what was lost beyond it
    expected = evaluate("flip/sync", 4, acked, events, 1.5, [Window(0.0, 10.0)], expected_lost=["lost"])
    assert format_table([expected]).splitlines()[2].split()[4:7] == ["0", "1", "-"]
    assert table[3] == "  kill9/sync: a note"
