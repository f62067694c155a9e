"""Reading consume-queue units: the same units whether a range stays in one file or crosses files."""

from __future__ import annotations

import pytest

from graymq.broker_ext.store.consume_queue import ConsumeQueue

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
