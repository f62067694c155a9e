"""The leader's fence: a replicated leader takes writes only inside its lease, on its own monotonic clock."""

from __future__ import annotations

import time

import pytest

from graymq.broker_ext.replica_role import ReplicaRole
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import NotLeaderError

pytestmark = pytest.mark.unit


def test_a_leader_takes_writes_only_inside_its_lease_and_a_broker_without_replicas_always() -> None:
    leader = ReplicaRole("b", replica_id=0, replication="async", leader_id=0)
    leader.lease_ends_at = time.monotonic() + 60
    for method in (pb.SEND_MESSAGE, pb.LOCK_QUEUES, pb.UPDATE_CONSUMER_OFFSET, pb.PULL_MESSAGE):
        leader.check_writable(method)
    leader.lease_ends_at = time.monotonic() - 0.001  # paused past it
    for method in (pb.SEND_MESSAGE, pb.SEND_BATCH, pb.LOCK_QUEUES, pb.UNLOCK_QUEUES, pb.UPDATE_CONSUMER_OFFSET,
                   pb.CONSUMER_SEND_BACK):
        with pytest.raises(NotLeaderError, match="its leader lease at epoch 0 ran out"):
            leader.check_writable(method)
    leader.check_writable(pb.PULL_MESSAGE)  # reads are not fenced
    ReplicaRole("b").fence()  # a set of one has no lease to run out
