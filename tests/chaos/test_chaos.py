"""The chaos matrix: every fault x flush mode (and promote across a kill -9), checked against what it may cost.

Expected: nothing acked is lost to a process crash, a clean stop or a stall (flush async included: a killed
process leaves its page cache to the kernel); a flipped byte loses exactly the record verify reports as a hole,
a cut segment exactly the records from the cut on; no reordering within a queue, no gray message to a v1
consumer; no message stored twice (producers' retries are recognised). A crash may deliver again what the
consumers had in flight, at most a pull batch per queue; recovery time is reported in the table, not asserted.
A broker set's leader paused past its lease acknowledges nothing on waking: nothing acked is lost under sync
replication, and under async only what the leader acknowledged before the pause and had not copied yet; nothing is
delivered twice (without the fence, commits and queue locks the woken leader acknowledged were lost: 14 and 24
messages delivered again).
"""

from __future__ import annotations

from dataclasses import asdict

import pytest

from tests.chaos.report import CHAOS_RESULT
from tests.chaos.scenario import QUEUES, Case, case_timeout, run_case

IN_FLIGHT_BOUND = 32 * QUEUES  # a consumer's pull batch (ConsumerSettings.pull_batch_size) on every queue

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.timeout(case_timeout())]

CASES = [
    Case("kill9", "sync"), Case("kill9", "async"), Case("kill9", "sync", promote=True),
    Case("kill9", "async", promote=True),
    Case("sigterm", "sync"), Case("sigterm", "async"),
    Case("stop_broker", "sync"), Case("stop_broker", "async"),
    Case("stop_ns", "sync"), Case("stop_ns", "async"),
    Case("flip", "sync"), Case("flip", "async"),
    Case("truncate", "sync"), Case("truncate", "async"),
    Case("pause_leader", "async", replication="sync"), Case("pause_leader", "async", replication="async"),
    # the pure-Python hot path (no compiler): a crash, and the store faults its record decode and CRC must catch
    Case("kill9", "sync", pure=True), Case("flip", "sync", pure=True), Case("truncate", "sync", pure=True),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_chaos_case(cluster, graymq_process, record_property, case):
    result = run_case(cluster, graymq_process, case)
    record_property(CHAOS_RESULT, asdict(result))
    assert result.acked > 0 and result.consumed > 0, result
    assert not [n for n in result.notes if n.startswith("not everything")], result
    # Only what the fault destroyed (nothing, for a crash or a stall) is lost, each one reported.
    assert sorted(result.lost) == result.expected_lost, result
    assert case.fault not in ("flip", "truncate") or result.expected_lost, result
    assert result.reordered == 0, result
    assert result.stored_twice == 0 and result.duplicated <= IN_FLIGHT_BOUND, result
    # A pause is no crash: the consumers keep their queues (the leases were copied) and what they committed (a
    # deposed leader acknowledges no commit it would lose), so nothing comes twice.
    assert case.fault != "pause_leader" or result.duplicated == 0, result
    assert result.gray_violations == 0, result
