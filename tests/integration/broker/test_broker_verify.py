"""``graymq broker verify``: the offline check of a real broker's store, through the CLI, and its repair."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from graymq.broker_ext.store import MessageStore, StoreConfig
from graymq.broker_ext.store.lock import StoreLockedError
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.record import iter_records
from tests.support.broker import create_topic, pull_request, run, send

pytestmark = pytest.mark.integration
SEGMENT = 256 * 1024
COUNT = 600


def verify(store: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "graymq.gray_controller.cli", "broker", "verify", "--store",
                           str(store), *extra], capture_output=True, text=True, timeout=120)


def verify_json(store: Path, *extra: str) -> tuple[int, dict]:
    result = verify(store, "--json", *extra)
    assert result.stdout.count("\n") == 1, result.stdout + result.stderr
    return result.returncode, json.loads(result.stdout)


def segment_of(store: Path, physical_offset: int) -> tuple[Path, int]:
    start = physical_offset - physical_offset % SEGMENT
    return store / "commitlog" / f"{start:020d}", physical_offset - start


async def pull_everything(client: BrokerClient, address: str) -> dict[str, int]:
    """msg id -> queue offset of every message the broker serves."""
    found = {}
    for queue_id in range(2):
        offset = 0
        while True:
            resp = await client.pull(address, pull_request("g", "c", "V", queue_id, offset, max_nums=500,
                                                           expression="*"))
            for m in iter_records(resp.records):
                found[m.msg_id] = m.queue_offset
            if resp.next_begin_offset == offset:
                break
            offset = resp.next_begin_offset
    return found


def test_verify_reports_a_hole_and_a_torn_tail_and_repair_leaves_only_the_recorded_hole(graymq_process, tmp_path):
    store = tmp_path / "store"
    args = ("broker", "--name", "v", "--port", "0", "--store", str(store), "--segment-size", str(SEGMENT))
    broker = graymq_process(*args)

    async def produce(client: BrokerClient) -> list[pb.SendResponse]:
        await create_topic(client, broker.address, "V", 2)
        return [await send(client, broker.address, "V", n % 2, b"x" * 700, msg_id=f"m{n}") for n in range(COUNT)]

    sent = run(produce)
    locked = verify(store)
    assert locked.returncode == 2 and "in use by another process" in locked.stderr, locked.stderr
    with pytest.raises(StoreLockedError, match="in use by another process"):  # nor can a second broker open it
        MessageStore(StoreConfig(store_dir=store, segment_size=SEGMENT)).load()
    broker.terminate()

    assert verify_json(store) == (0, {"clean": True, "holes": [], "torn_tail": None, "consume_queues": [],
                                      "index": [], "clean_stop": True, "repaired": False})

    victim, after = sent[COUNT // 2], sent[COUNT // 2 + 1]
    hole_file, hole_at = segment_of(store, victim.commit_log_offset)
    with open(hole_file, "r+b") as f:  # one damaged byte in the magic of a record in the middle
        f.seek(hole_at + 5)
        f.write(b"\x00")
    last = max(sent, key=lambda r: r.commit_log_offset)
    tail_file, record_at = segment_of(store, last.commit_log_offset)
    with open(tail_file, "r+b") as f:  # garbage after the last record
        f.seek(record_at)
        tail_at = record_at + int.from_bytes(f.read(4), "big")  # the record's total size
        f.seek(tail_at)
        f.write(b"torn write, not a record" * 10)
    hole = {"file": f"commitlog/{hole_file.name}", "offset": hole_at,
            "length": after.commit_log_offset - victim.commit_log_offset, "physical_offset": victim.commit_log_offset}

    code, found = verify_json(store)
    assert code == 1 and not found["clean"]
    assert [{k: h[k] for k in hole} for h in found["holes"]] == [hole]
    assert found["holes"][0]["reason"].startswith("bad magic") and found["holes"][0]["recorded"] is False
    assert {k: found["torn_tail"][k] for k in ("file", "offset")} == {"file": f"commitlog/{tail_file.name}",
                                                                    "offset": tail_at}
    human = verify(store)
    assert human.returncode == 1 and "torn tail" in human.stdout and hole["file"] in human.stdout

    code, repaired = verify_json(store, "--repair")
    assert code == 1 and repaired["repaired"] is True
    assert [{k: h[k] for k in hole} for h in repaired["holes"]] == [hole]
    assert repaired["torn_tail"]["offset"] == tail_at

    code, after_repair = verify_json(store)
    assert code == 1  # the hole stays: its message is lost
    assert [{k: h[k] for k in hole} for h in after_repair["holes"]] == [hole]
    assert after_repair["holes"][0]["recorded"] is True
    assert (after_repair["torn_tail"], after_repair["consume_queues"], after_repair["index"]) == (None, [], [])

    broker = graymq_process(*args)
    served = run(lambda client: pull_everything(client, broker.address))
    assert served == {r.msg_id: r.queue_offset for r in sent if r is not victim}


def test_verify_cannot_read_what_is_not_a_store(tmp_path):
    missing = verify(tmp_path / "nowhere")
    assert missing.returncode == 2 and "no such directory" in missing.stderr
    (tmp_path / "empty").mkdir()
    not_a_store = verify(tmp_path / "empty", "--json")
    assert not_a_store.returncode == 2 and "not a broker store" in not_a_store.stderr and not not_a_store.stdout
