"""Crash at a random point after the last flush: whatever survives is exactly a prefix of what was sent."""

from __future__ import annotations

import random

import pytest
from storekit import SEGMENT, crash, make_config, message, open_store, patch_file, read_all, run, segment_file

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("seed", range(12))
def test_after_a_cut_anywhere_past_the_checkpoint_the_store_holds_exactly_the_records_before_it(tmp_path, seed):
    rng = random.Random(seed)
    config = make_config(tmp_path, cq_units_per_file=rng.choice([8, 64]))
    store = open_store(config)
    sent = []  # (result, message) in commit-log order
    for round_no in range(rng.randrange(30, 120)):
        batch = [message(rng.choice(["A", "B"]), rng.randrange(3), round_no * 100 + i, size=rng.randrange(10, 2000),
                         keys=(f"k{round_no}",))
                 for i in range(rng.choice([1, 1, 4, 16]))]
        sent.extend(zip(store.put_messages(batch), batch, strict=True))
        if rng.random() < 0.05:
            run(store.flush())
            run(store.write_checkpoint())
    durable = store.flushed_offset
    end = store.max_physical_offset
    crash(store)
    cut = rng.randrange(durable, end + 1)
    path, pos = segment_file(store, cut)
    if path.exists():
        patch_file(path, pos, bytes(SEGMENT - pos))
    for later in sorted((tmp_path / "commitlog").iterdir()):
        if int(later.name) > cut:
            patch_file(later, 0, bytes(SEGMENT))

    store = open_store(config)
    survivors = [(r, m) for r, m in sent if r.end_offset <= cut]
    last_end = survivors[-1][0].end_offset if survivors else 0
    # the log ends after the last survivor, or at the next segment when its end-of-segment marker survived
    assert store.max_physical_offset in (last_end, last_end - last_end % SEGMENT + SEGMENT)
    for topic in ("A", "B"):
        for q in range(3):
            expected = [(r.queue_offset, r.physical_offset, m.body) for r, m in survivors
                        if (m.topic, m.queue_id) == (topic, q)]
            got = [(m.queue_offset, m.commit_log_offset, m.body) for m in read_all(store, topic, q)]
            assert got == expected
            assert store.get_max_offset(topic, q) == len(expected)
    if survivors:
        last = survivors[-1][1]
        assert store.query_by_key(last.topic, last.properties["KEYS"])
    (again,) = store.put_messages([message("A", 0, 99_999)])
    assert again.physical_offset >= last_end
    assert read_all(store, "A", 0)[-1].queue_offset == again.queue_offset
