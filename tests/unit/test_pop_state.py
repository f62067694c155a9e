"""The pop state without a network: receipt handles, one queue's in-flight table and the ack journal."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from graymq.broker_ext.pop.ack_journal import AckJournal, QueueAcks, ack_line, replay
from graymq.broker_ext.pop.queue_state import PopQueue
from graymq.broker_ext.pop.receipt import InvalidReceiptHandle, ReceiptHandle, ReceiptSigner, load_secret

pytestmark = pytest.mark.unit

HANDLE = ReceiptHandle("G", "T", 2, 41, 1, 7, 1_700_000_000_000, 30_000)


def test_a_signed_handle_reads_back_and_an_edited_or_foreign_one_is_refused() -> None:
    signer = ReceiptSigner(b"s" * 32)
    text = signer.sign(HANDLE)
    assert signer.verify(text) == HANDLE
    payload, _, mac = text.partition(".")
    edited = signer.sign(ReceiptHandle("G", "T", 2, 42, 1, 7, 1_700_000_000_000, 30_000)).partition(".")[0]
    for forged in (f"{edited}.{mac}", payload, "", "x.y", text[:-1]):
        with pytest.raises(InvalidReceiptHandle):
            signer.verify(forged)
    with pytest.raises(InvalidReceiptHandle):
        ReceiptSigner(b"t" * 32).verify(text)  # another broker's


def test_the_broker_secret_is_created_once_private_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "pop_secret"
    secret = load_secret(path)
    assert len(secret) == 32 and path.stat().st_mode & 0o777 == 0o600
    assert load_secret(path) == secret


def test_the_committed_offset_follows_the_lowest_unacked_message() -> None:
    queue = PopQueue(10, 10)
    for offset in (10, 11, 12):
        queue.deliver(offset, 1, offset, deadline=100.0)
    queue.ack(12)
    queue.ack(11)
    assert queue.committed == 10 and queue.acked == {11, 12}
    queue.ack(10)
    assert queue.committed == 13 and queue.idle and queue.next_offset == 13


def test_expired_deliveries_come_lowest_first_and_only_the_newest_handle_is_current() -> None:
    queue = PopQueue(0, 0)
    queue.deliver(1, 1, serial=5, deadline=3.0)
    queue.deliver(0, 2, serial=6, deadline=2.0)
    queue.deliver(2, 1, serial=7, deadline=9.0)
    assert [f.offset for f in queue.expired(now=5.0)] == [0, 1]
    assert queue.current(2, 7, now=5.0) is not None
    assert queue.current(2, 6, now=5.0) is None  # an older handle of it
    assert queue.current(1, 5, now=5.0) is None  # its invisible time is over
    queue.deliver(1, 2, serial=8, deadline=20.0)  # delivered again
    assert queue.current(1, 8, now=5.0) is not None and queue.in_flight[1].attempt == 2


def test_offsets_a_scan_passed_count_as_acked_and_acks_from_before_a_restart_are_skipped() -> None:
    queue = PopQueue(0, 0)
    queue.deliver(0, 1, 1, 5.0)
    queue.passed(4)  # 1..3 filtered out by tag
    assert queue.acked == {1, 2, 3} and queue.committed == 0
    queue.ack(0)
    assert queue.committed == 4
    restarted = PopQueue(4, 4)
    restarted.ack(6)  # from the journal: above anything handed out
    assert restarted.committed == 4 and restarted.acked == {6}
    restarted.deliver(4, 1, 2, 5.0)
    restarted.deliver(5, 1, 3, 5.0)
    restarted.ack(4)
    restarted.ack(5)
    assert restarted.committed == 7 and restarted.next_offset == 7


def test_journal_replay_keeps_every_ack_and_ignores_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "acks"
    key = ("G", "T", 1)
    path.write_bytes(ack_line(key, 5) + ack_line(key, 3) + ack_line(("G", "T", 2), 0) + b'{"g":"G","t')
    table = replay(path)
    assert table[key].offsets == {3, 5} and table[key].floor == -1
    assert table[("G", "T", 2)].offsets == {0}


def test_journal_appends_are_group_committed_and_compaction_keeps_the_state(tmp_path: Path) -> None:
    path = tmp_path / "acks"
    key = ("G", "T", 0)
    state = {key: QueueAcks(100, {102})}

    async def run() -> AckJournal:
        journal = AckJournal(path, lambda: state, compact_bytes=1 << 20)
        await asyncio.gather(*(journal.append([ack_line(key, o)]) for o in range(100, 150)))
        journal.compact_bytes = 1  # the next write compacts
        await journal.append([ack_line(key, 102)])
        state[key].offsets.add(104)  # the service changes its state before it appends
        await journal.append([ack_line(key, 104)])
        await journal.close()
        return journal

    journal = asyncio.run(run())
    assert journal.fsyncs < 50  # fifty concurrent acks shared fsyncs
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0] == {"g": "G", "t": "T", "q": 0, "floor": 100}
    assert replay(path)[key].floor == 100 and replay(path)[key].offsets == {102, 104}


def test_async_journal_writes_each_ack_before_answering_and_fsyncs_on_the_interval(tmp_path: Path) -> None:
    path = tmp_path / "acks"
    key = ("G", "T", 0)
    state = {key: QueueAcks(0, set())}

    async def run() -> AckJournal:
        # an interval long enough that even a machine stalled for seconds appends many acks in one
        journal = AckJournal(path, lambda: state, sync=False, interval_s=1.0, compact_bytes=1 << 20)
        for offset in range(100):
            await journal.append([ack_line(key, offset)])
            assert replay(path)[key].offsets == set(range(offset + 1))  # in the file when answered
        assert journal.fsyncs < 100  # not one per ack
        deadline = time.monotonic() + 60  # the interval's fsync comes without another append
        while not journal.fsyncs and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert journal.fsyncs >= 1
        state[key] = QueueAcks(100, {100})  # the service changes its state before it appends
        journal.compact_bytes = 1  # the next interval compacts
        await journal.append([ack_line(key, 100)])
        await journal.close()  # fsyncs now and ends the flush loop
        return journal

    journal = asyncio.run(run())
    assert journal.fsyncs >= 2
    assert json.loads(path.read_text().splitlines()[0])["floor"] == 100  # compacted
    assert replay(path)[key].floor == 100 and replay(path)[key].offsets == {100}
