"""Pages read through the commit log's mappings are released after every ``RELEASE_EVERY`` bytes served: the
broker's resident set stays bounded by that, not by how much of the log is read, and nothing is lost — neither
what was flushed nor what was written and not flushed yet."""

from __future__ import annotations

from pathlib import Path

import pytest
from storekit import body_for, make_config, message, open_store, read_all

from graymq.broker_ext.store import commitlog

pytestmark = pytest.mark.unit

SEGMENT = 4 << 20
BODY = 4000


def mapped_kib(path: Path) -> int:
    """Resident KiB of this process's mapping of ``path`` (``/proc/self/smaps``)."""
    resident, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
                inside = fields[-1] == str(path)
            elif inside and fields[0] == "Rss:":
                resident += int(fields[1])
    return resident


def test_reading_the_whole_log_keeps_the_mapped_pages_bounded_and_every_record_intact(tmp_path, monkeypatch):
    monkeypatch.setattr(commitlog, "RELEASE_EVERY", 1 << 20)
    store = open_store(make_config(tmp_path, segment_size=SEGMENT))
    count = 3000  # ~12 MiB over 3 segments; none of it flushed
    for n in range(count):
        store.put_messages([message("Big", n % 2, n, size=BODY)])
    segments = [s.path for s in store.commitlog.segments]
    assert len(segments) >= 3
    for _ in range(2):  # the second pass reads pages released during the first
        got = {q: read_all(store, "Big", q) for q in (0, 1)}
        assert [m.body for m in got[0]] == [body_for("Big", 0, n, BODY) for n in range(0, count, 2)]
        assert [m.body for m in got[1]] == [body_for("Big", 1, n, BODY) for n in range(1, count, 2)]
        assert sum(mapped_kib(p) for p in segments) <= 2 * 1024 + 256  # what was served since the last release
    store.put_messages([message("Big", 0, count, size=BODY)])  # the log goes on where it was
    assert read_all(store, "Big", 0)[-1].body == body_for("Big", 0, count, BODY)


def test_a_store_restarted_after_releases_recovers_every_record(tmp_path, monkeypatch):
    monkeypatch.setattr(commitlog, "RELEASE_EVERY", 1 << 16)
    config = make_config(tmp_path, segment_size=SEGMENT)
    store = open_store(config)
    for n in range(500):
        store.put_messages([message("T", 0, n, size=BODY)])
        if n % 50 == 0:
            read_all(store, "T", 0)  # releases interleaved with the writes
    store.commitlog.close()
    store.queues.close()
    store.index.close()
    reopened = open_store(config)
    assert [m.body for m in read_all(reopened, "T", 0)] == [body_for("T", 0, n, BODY) for n in range(500)]
