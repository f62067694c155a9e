"""Reading and writing consume-queue units: the same units whether a range stays in one file or crosses files,
and a batch's units written in one block land as one by one."""

from __future__ import annotations

import pytest

from graymq.broker_ext.store.consume_queue import UNIT, ConsumeQueue
from graymq.broker_ext.store.mapped_file import MappedFile

pytestmark = pytest.mark.unit


def test_units_read_any_range_within_and_across_files(tmp_path):
    queue = ConsumeQueue(tmp_path / "T" / "0", "T", 0, units_per_file=4)
    queue.prepare(10)
    for n in range(10):
        queue.append(1000 + 100 * n, 90 + n, n * 7)
    expected = [(1000 + 100 * n, 90 + n, n * 7) for n in range(10)]
    for start in range(10):
        for count in range(11 - start):
            assert list(queue.units(start, count)) == expected[start : start + count], (start, count)
    assert list(queue.units(10, 0)) == []
    queue.close()


@pytest.mark.parametrize("batches", [[10], [3, 7], [1, 4, 5], [4, 4, 2]])
def test_blocks_of_units_land_as_units_appended_one_by_one(tmp_path, batches):
    """A block crossing file boundaries (files of 4 units), after single appends and before more of them."""
    one_by_one = ConsumeQueue(tmp_path / "a" / "0", "T", 0, units_per_file=4)
    in_blocks = ConsumeQueue(tmp_path / "b" / "0", "T", 0, units_per_file=4)
    units = [(1000 + 100 * n, 90 + n, n * 7) for n in range(sum(batches) + 2)]
    for queue in (one_by_one, in_blocks):
        queue.prepare(len(units))
        queue.append(*units[0])
    for unit in units[1:-1]:
        one_by_one.append(*unit)
    at = 1
    for count in batches:
        in_blocks.append_units(bytearray(b"".join(UNIT.pack(*unit) for unit in units[at:at + count])))
        at += count
    for queue in (one_by_one, in_blocks):
        queue.append(*units[-1])
        assert queue.max_offset == len(units)
        assert list(queue.units(0, len(units))) == units
    assert [f.mm[:] for f in in_blocks.files] == [f.mm[:] for f in one_by_one.files]
    one_by_one.close()
    in_blocks.close()


def test_a_truncate_during_a_sync_leaves_the_rewritten_units_to_the_next_sync(tmp_path, monkeypatch):
    queue = ConsumeQueue(tmp_path / "T" / "0", "T", 0, units_per_file=64)
    queue.prepare(15)
    for n in range(10):
        queue.append(100 * n, 90, 0)
    queue.sync()
    for n in range(10, 15):
        queue.append(100 * n, 90, 0)
    real_sync = MappedFile.sync
    synced_after: list[int] = []

    def sync_while_truncated(file: MappedFile) -> None:
        real_sync(file)
        queue.truncate(12)  # on the loop thread while the worker thread syncs
        queue.append(5000, 77, 0)
        queue.append(5100, 77, 0)

    monkeypatch.setattr(MappedFile, "sync", sync_while_truncated)
    queue.sync()
    monkeypatch.setattr(MappedFile, "sync", lambda file: synced_after.append(queue.max_offset))
    queue.sync()
    assert synced_after == [14]  # units 12 and 13, rewritten after the first sync's fsync, are synced again
    queue.close()
