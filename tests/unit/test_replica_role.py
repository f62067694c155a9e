"""The leader's fence: a replicated leader takes writes only inside its lease, on its own monotonic clock."""

from __future__ import annotations

import time

import pytest

from graymq.broker_ext.processors.methods import WRITES
from graymq.broker_ext.replication.role import ReplicaRole
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import NotLeaderError

pytestmark = pytest.mark.unit


def test_a_leader_takes_writes_only_inside_its_lease_and_a_broker_without_replicas_always() -> None:
    leader = ReplicaRole("b", replica_id=0, replication="async", leader_id=0)
    leader.lease_ends_at = time.monotonic() + 60
    leader.fence()
    leader.lease_ends_at = time.monotonic() - 0.001  # paused past it
    with pytest.raises(NotLeaderError, match="its leader lease at epoch 0 ran out"):
        leader.fence()
    ReplicaRole("b").fence()  # a set of one has no lease to run out


def test_every_request_that_changes_what_the_broker_holds_is_fenced_and_reads_are_not() -> None:
    assert {pb.SEND_MESSAGE, pb.SEND_BATCH, pb.LOCK_QUEUES, pb.UNLOCK_QUEUES, pb.UPDATE_CONSUMER_OFFSET,
                      pb.CONSUMER_SEND_BACK, pb.UPDATE_TOPIC} == WRITES
