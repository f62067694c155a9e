"""A producer's retry across a change of leader is stored once: a follower elected leader recognises it from its
first moment as leader (by the time it takes writes, its producer table holds what the old leader stored and it
copied), and a leader whose lease ran out while a stored send waited for its answer says the outcome is unknown.

A real broker (store on disk, its lease, fetcher and send processor) on one event loop; the name server's answer
is handed to ``ReplicaLease.apply`` as its heartbeat would. The retry is sent the moment the fence lets writes in,
as a producer polling the route for the new leader may.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from graymq.broker_ext.broker_controller import BrokerController
from graymq.broker_ext.config import BrokerSettings
from graymq.broker_ext.processors.producer_table import sequence_property
from graymq.broker_ext.processors.send_processor import to_put_message
from graymq.broker_ext.replication.leader_lease import ReplicaLease
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.constants import PROPERTY_PRODUCER_SEQUENCE
from graymq.protocol.errors import NotLeaderError, RequestTimeoutError, SendRetry

pytestmark = pytest.mark.unit

PID = 0x5EED_0000_0000_0002
TOPIC = "T"
UNREACHABLE = "127.0.0.1:9"  # the dead old leader: the follower's fetch loop keeps retrying it


def replica(tmp_path, replica_id: int, **settings: str) -> BrokerController:
    """A replica of set broker-t, its store loaded, knowing topic ``TOPIC``; its role as none told it yet."""
    broker = BrokerController(BrokerSettings(name="broker-t", store_dir=tmp_path, segment_size=1 << 16,
                                             cq_units_per_file=64, replica_id=replica_id,
                                             nameserver="http://ns.test", **settings))
    broker.load()
    broker.topics.ensure(TOPIC, 1, 0)
    return broker


def request(sequence: int) -> pb.SendRequest:
    msg = pb.Message(topic=TOPIC, body=b"x", msg_id=f"ID{sequence}")
    return pb.SendRequest(producer_group="pg", queue_id=0, producer_id=PID, sequence=sequence, message=msg)


def copy_from_old_leader(broker: BrokerController, req: pb.SendRequest) -> None:
    """What the follower's fetcher lands: the old leader's record of ``req``, its sequence on it; the follower's
    own producer table is not told (it learns the log only when it leads)."""
    put = to_put_message(req.message, req.queue_id, req.producer_group)
    put.properties[PROPERTY_PRODUCER_SEQUENCE] = sequence_property(PID, req.sequence, 1)
    broker.store.put_messages([put])


def elected(broker: BrokerController) -> dict:
    return {"epoch": 2, "leader_replica_id": 1, "lease_seconds": 2.0, "in_sync": [1], "leader_address": "me:1",
            "epoch_start_offset": 0}


async def retry_once_writable(broker: BrokerController, req: pb.SendRequest) -> pb.SendResponse:
    """Spin on the event loop until the fence lets a write in, then send ``req`` as the remoting server would."""
    while True:
        try:
            broker.role.fence()
            break
        except NotLeaderError:
            await asyncio.sleep(0)
    answer = broker.send_processor.send(req)
    envelope = await answer if isinstance(answer, asyncio.Future) else answer
    return pb.SendResponse.FromString(pb.Envelope.FromString(envelope).body)


def test_a_retry_reaching_the_new_leader_the_moment_it_leads_is_stored_once(tmp_path) -> None:
    broker = replica(tmp_path, 1, replication="sync")
    copy_from_old_leader(broker, request(0))
    lease = ReplicaLease(broker, [broker.settings.nameserver])

    async def main() -> pb.SendResponse:
        broker.fetcher.follow(UNREACHABLE, 1)
        await asyncio.sleep(0.05)  # the fetch loop is under way, as on a follower whose leader just died
        retry = asyncio.create_task(retry_once_writable(broker, request(0)))
        await lease.apply(elected(broker), time.monotonic())
        response = await asyncio.wait_for(retry, 5)
        await lease.stop()
        await broker.fetcher.close()
        return response

    response = asyncio.run(main())
    assert response.duplicate and response.queue_offset == 0
    assert broker.store.get_max_offset(TOPIC, 0) == 1  # stored once


def test_a_send_stored_before_the_lease_ran_out_is_answered_as_an_outcome_unknown_and_its_retry_stored_once(
        tmp_path) -> None:
    """A leader whose lease ends while a send waits for its flush must not answer NOT_LEADER (stored nothing: the
    producer would send it again under a new sequence); it answers TIMEOUT, and the retry is recognised."""
    broker = replica(tmp_path, 0, replication="async", flush="sync")
    role = broker.role
    role.leader_id, role.lease_ends_at = 0, time.monotonic() + 60

    async def main() -> tuple[BaseException | None, pb.SendResponse]:
        await broker.store.start()
        try:
            answer = broker.send_processor.send(request(0))
            assert isinstance(answer, asyncio.Future)  # waiting for the flush
            role.lease_ends_at = time.monotonic() - 0.001  # the leader paused past its lease meanwhile
            first = (await asyncio.gather(answer, return_exceptions=True))[0]
            role.lease_ends_at = time.monotonic() + 60  # renewed: the producer's retry reaches it again
            return first if isinstance(first, BaseException) else None, await retry_once_writable(broker, request(0))
        finally:
            await broker.store.stop()

    first, retry = asyncio.run(main())
    assert isinstance(first, RequestTimeoutError) and "outcome is unknown" in first.message, first
    assert RequestTimeoutError.send_retry is SendRetry.SAME_QUEUE
    assert retry.duplicate and retry.queue_offset == 0
    assert broker.store.get_max_offset(TOPIC, 0) == 1  # stored once
