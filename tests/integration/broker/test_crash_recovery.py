"""kill -9 under load with --flush sync: every acknowledged message is readable after restart."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import GrayMQError
from graymq.protocol.record import iter_records
from tests.support.broker import create_topic, message, pull_request, run, send

pytestmark = pytest.mark.integration
ROUNDS = 20
QUEUES = 4


async def load(client: BrokerClient, address: str, acked: dict[str, tuple[int, int]], stop: asyncio.Event,
               writer: int) -> None:
    seq = 0
    while not stop.is_set():
        msg_id = f"w{writer}-{seq}-{random.getrandbits(32):08x}"
        seq += 1
        queue_id = seq % QUEUES
        try:
            resp = await client.send(address, pb.SendRequest(producer_group="pg", queue_id=queue_id,
                                                             message=message("CRASH", msg_id.encode(), msg_id=msg_id)))
        except GrayMQError:
            return  # the broker died under us: this send was never acknowledged
        acked[msg_id] = (queue_id, resp.queue_offset)


async def read_all(client: BrokerClient, address: str) -> dict[tuple[int, int], str]:
    stored: dict[tuple[int, int], str] = {}
    for q in range(QUEUES):
        offset = 0
        while True:
            resp = await client.pull(address, pull_request("g", "c", "CRASH", q, offset, max_nums=1000,
                                                           expression="*"))
            for m in iter_records(resp.records):
                stored[(q, m.queue_offset)] = m.msg_id
            if resp.next_begin_offset == offset:
                break
            offset = resp.next_begin_offset
    return stored


def test_every_acknowledged_message_survives_kill_9(graymq_process, tmp_path):
    store = tmp_path / "store"
    args = ("broker", "--name", "crash", "--port", "0", "--store", str(store), "--flush", "sync",
            "--segment-size", str(256 * 1024))
    acked: dict[str, tuple[int, int]] = {}
    for round_no in range(ROUNDS):
        broker = graymq_process(*args)

        async def round_(client: BrokerClient, broker=broker, round_no=round_no) -> None:
            if round_no == 0:
                await create_topic(client, broker.address, "CRASH", QUEUES)
            stop = asyncio.Event()
            writers = [asyncio.create_task(load(client, broker.address, acked, stop, w)) for w in range(8)]
            await asyncio.sleep(random.uniform(0.2, 0.6))
            broker.proc.kill()  # SIGKILL while sends are in flight
            await asyncio.gather(*writers)

        run(round_)
        broker.kill()
    broker = graymq_process(*args)
    stored = run(lambda client: read_all(client, broker.address))
    assert len(acked) > ROUNDS * 10
    missing = [(mid, pos) for mid, pos in acked.items() if stored.get(pos) != mid]
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:5]}"
    for q in range(QUEUES):  # queue offsets stay dense after every recovery
        offsets = sorted(o for (qq, o) in stored if qq == q)
        assert offsets == list(range(len(offsets)))


def test_committed_offsets_survive_kill_9_once_persisted(graymq_process, tmp_path):
    """The broker writes consumer offsets in the background (off its event loop) every second; whatever it
    wrote is what a restart after kill -9 serves."""
    store = tmp_path / "store"
    args = ("broker", "--name", "offsets", "--port", "0", "--store", str(store))
    offsets_file = store / "config" / "consumer_offsets.json"

    async def persisted(offset: int) -> None:
        for _ in range(200):  # the housekeeping round runs every second
            if offsets_file.exists() and json.loads(offsets_file.read_text())["offsets"].get("g@OFFS") == {"1": offset}:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"offset {offset} never reached {offsets_file}")

    broker = graymq_process(*args)

    async def commit(client: BrokerClient) -> None:
        await create_topic(client, broker.address, "OFFS", 2)
        for i in range(9):  # offsets are committed within [min, max]
            await send(client, broker.address, "OFFS", 1, b"m%d" % i)
        for offset in (5, 9):  # the second write replaces the first
            await client.update_offset(broker.address, "g", "OFFS", 1, offset)
            await persisted(offset)

    run(commit)
    broker.proc.kill()
    broker.kill()
    broker = graymq_process(*args)
    assert run(lambda client: client.query_offset(broker.address, "g", "OFFS", 1)) == 9
