"""The commit log as replication copies it: a follower fed chunk by chunk holds the leader's log byte for byte
(segment rolls included), serves the same messages and keys, survives a restart; a damaged or misplaced chunk
changes nothing; a deposed replica moves aside exactly what lies past the new leader's log."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from storekit import SEGMENT, crash, make_config, message, open_store, put, read_all, stop

from graymq.broker_ext.store import MessageStore
from graymq.broker_ext.store.replica_log import Chunk, ReplicationError, apply_chunk, move_aside, read_chunk

pytestmark = pytest.mark.unit


def log_bytes(store: MessageStore) -> bytes:
    c = store.commitlog
    return b"".join(bytes(s.view[: min(c.max_offset, s.end) - s.start]) for s in c.segments)


def catch_up(leader: MessageStore, follower: MessageStore, max_bytes: int = 4096) -> int:
    """Fetch and apply until the follower's log ends where the leader's does; returns the chunks applied."""
    chunks = 0
    while follower.commitlog.max_offset < leader.commitlog.max_offset:
        offset = follower.commitlog.max_offset
        apply_chunk(follower, offset, read_chunk(leader, offset, max_bytes), leader.commitlog.segment_size)
        chunks += 1
    return chunks


def fill(store: MessageStore, count: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    for n in range(count):
        store.put_messages([message("TopicR", rng.randrange(4), n, size=rng.randrange(20, 900),
                                    keys=(f"k{n}",) if n % 7 == 0 else ())])


def test_a_follower_fed_chunk_by_chunk_holds_the_leaders_log_byte_for_byte(tmp_path: Path) -> None:
    leader = open_store(make_config(tmp_path / "leader"))
    follower = open_store(make_config(tmp_path / "follower"))
    fill(leader, 1500)
    assert len(leader.commitlog.segments) >= 4  # the rolls are copied too
    chunks = catch_up(leader, follower)
    assert chunks > len(leader.commitlog.segments)
    assert log_bytes(follower) == log_bytes(leader)
    assert [s.start for s in follower.commitlog.segments] == [s.start for s in leader.commitlog.segments]
    for q in range(4):
        assert [(m.msg_id, m.queue_offset, m.body) for m in read_all(follower, "TopicR", q)] == [
            (m.msg_id, m.queue_offset, m.body) for m in read_all(leader, "TopicR", q)]
    assert [len(follower.query_by_key("TopicR", f"k{n}")) for n in (0, 7, 700)] == [1, 1, 1]
    fill(leader, 40, seed=2)  # more after catching up
    catch_up(leader, follower)
    assert log_bytes(follower) == log_bytes(leader)


def test_a_follower_restarted_or_crashed_recovers_what_it_copied(tmp_path: Path) -> None:
    leader = open_store(make_config(tmp_path / "leader"))
    follower = open_store(make_config(tmp_path / "follower"))
    fill(leader, 300)
    catch_up(leader, follower)
    crash(follower)
    follower = open_store(make_config(tmp_path / "follower"))
    assert follower.commitlog.max_offset == leader.commitlog.max_offset
    assert [m.msg_id for m in read_all(follower, "TopicR", 2)] == [m.msg_id for m in read_all(leader, "TopicR", 2)]
    stop(follower)


def test_a_chunk_that_does_not_continue_the_log_or_is_damaged_changes_nothing(tmp_path: Path) -> None:
    leader = open_store(make_config(tmp_path / "leader"))
    follower = open_store(make_config(tmp_path / "follower"))
    put(leader, "TopicR", 0, 20)
    chunk = read_chunk(leader, 0, 1 << 20)
    with pytest.raises(ReplicationError, match="does not continue"):
        apply_chunk(follower, 100, chunk, SEGMENT)
    damaged = bytearray(chunk.data)
    damaged[len(damaged) // 2] ^= 0x40
    with pytest.raises(ReplicationError, match="not sound"):
        apply_chunk(follower, 0, Chunk(bytes(damaged), chunk.next_offset), SEGMENT)
    with pytest.raises(ReplicationError, match="segment size"):
        apply_chunk(follower, 0, chunk, SEGMENT * 2)
    assert follower.commitlog.max_offset == 0 and read_all(follower, "TopicR", 0) == []
    apply_chunk(follower, 0, chunk, SEGMENT)
    assert len(read_all(follower, "TopicR", 0)) == 20


def test_reading_past_the_end_is_refused_and_at_the_end_is_empty(tmp_path: Path) -> None:
    leader = open_store(make_config(tmp_path / "leader"))
    put(leader, "TopicR", 0, 3)
    end = leader.commitlog.max_offset
    assert read_chunk(leader, end, 4096) == Chunk(b"", end)
    with pytest.raises(ReplicationError, match="past this log's end"):
        read_chunk(leader, end + 1, 4096)


def test_a_deposed_replica_moves_aside_what_lies_past_the_new_leaders_log(tmp_path: Path) -> None:
    old = open_store(make_config(tmp_path / "old"))
    put(old, "TopicR", 1, 50)
    cut = old.commitlog.max_offset
    put(old, "TopicR", 1, 100, start=50, size=900)  # never copied: past the new leader's log
    assert len(old.commitlog.segments) >= 2
    moved = move_aside(old, cut, tmp_path / "old" / "moved-aside", epoch=3)
    assert moved > 0 and old.commitlog.max_offset == cut
    [aside] = (tmp_path / "old" / "moved-aside").iterdir()
    assert aside.name.startswith("epoch-000003-") and aside.stat().st_size == moved
    assert [m.queue_offset for m in read_all(old, "TopicR", 1)] == list(range(50))
    assert old.query_by_key("TopicR", "TopicR-1-60") == []
    assert move_aside(old, cut, tmp_path / "old" / "moved-aside", epoch=3) == 0
    put(old, "TopicR", 1, 1, start=199)  # the log goes on from the cut
    assert [m.queue_offset for m in read_all(old, "TopicR", 1)][-1] == 50
