"""Network partitions (Jepsen style): every node in its own network namespace, links cut by nftables, under load.

Sync replication: nothing acknowledged is lost, nothing stored twice, no queue position acknowledged for two
messages (two leaders at once), no reordering, no gray message to a normal
consumer; a promote never reports SUCCEEDED while an acknowledged gray message is unconsumed. Async: what is lost
is only what the cut leader acknowledged alone, moved aside when it rejoins. Every replica is back in sync after
the heal. How long writes and reads were unavailable is in the chaos table (``writes down s``, ``reads down s``).
The sync leader cut and flapping link run again with 8 sends in flight per producer (``+in_flight8``): nothing
is delivered twice there (a sync leader serves consumers only what its in-sync followers stored).

``make test`` runs the cases in ``tests/chaos/conftest.py``'s ``SUBSET`` (the sync leader cut and both gray
consumer cuts); ``make chaos`` all of them. They skip, saying why, without root, nftables or network namespaces.
"""

from __future__ import annotations

from dataclasses import asdict

import pytest

from tests.chaos.partition_cluster import partition_cluster
from tests.chaos.partitions import NEMESES, PartitionCase, run_partition_case
from tests.chaos.report import CHAOS_RESULT
from tests.support.netns import unavailable_reason

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.timeout(420)]

CASES = [PartitionCase(nemesis, replication) for nemesis in NEMESES if not nemesis.startswith("gray_consumer")
         for replication in ("sync", "async")] + [
    PartitionCase("gray_consumer_cut_ns", "sync"), PartitionCase("gray_consumer_cut_broker", "sync"),
    # several sends waiting at once when the leader is cut (the workload's producers send one at a time otherwise)
    PartitionCase("leader_cut", "sync", in_flight=8), PartitionCase("flapping", "sync", in_flight=8)]


@pytest.fixture(scope="module")
def netns_ready() -> None:
    if reason := unavailable_reason():
        pytest.skip(reason)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_partition(netns_ready, tmp_path, record_property, case):
    with partition_cluster(tmp_path, case.replication, replicas=case.replicas) as cluster:
        result = run_partition_case(cluster, case)
    record_property(CHAOS_RESULT, asdict(result))
    assert result.acked > 0 and result.consumed > 0, result
    assert not [n for n in result.notes if n.startswith(("not everything", "not moved aside"))], result
    assert sorted(result.lost) == result.expected_lost, result
    assert case.replication == "async" or not result.lost, result
    assert case.replication == "async" or result.split_acks == 0, result  # no two leaders acknowledging at once
    assert result.stored_twice == 0, result
    # a sync leader serves consumers only what its followers stored: the sends a cut leader answered TIMEOUT and
    # its producers sent again to the new leader were not read from it first
    assert case.replication == "async" or case.in_flight == 1 or result.duplicated == 0, result
    assert result.reordered == 0, result
    assert result.gray_violations == 0, result
