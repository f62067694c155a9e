"""Deleting a topic: its consume queues go, a topic created again starts empty, and recovery keeps it deleted."""

from __future__ import annotations

import pytest
from storekit import crash, make_config, open_store, put, read_all, stop

from graymq.broker_ext.store import MessageStore
from graymq.broker_ext.store.verify import verify_store

pytestmark = pytest.mark.unit


def bodies(store, topic: str, queue_id: int) -> list[bytes]:
    return [m.body for m in read_all(store, topic, queue_id)]


def test_a_deleted_topic_is_gone_and_starts_empty_when_created_again(tmp_path):
    store = open_store(make_config(tmp_path))
    put(store, "TD", 0, 4, keys=("k",))
    put(store, "TD", 1, 2)
    put(store, "KEEP", 0, 3)
    assert store.delete_topic("TD") == 2
    assert not (tmp_path / "consumequeue" / "TD").exists()
    assert store.get_max_offset("TD", 0) == 0 and bodies(store, "TD", 0) == []
    assert store.query_by_key("TD", "k") == []
    assert len(bodies(store, "KEEP", 0)) == 3
    (again,) = put(store, "TD", 0, 1, start=100)
    assert again.queue_offset == 0
    assert len(bodies(store, "TD", 0)) == 1
    assert store.delete_topic("../escape") == 0
    stop(store)
    assert verify_store(tmp_path).clean


@pytest.mark.parametrize("checkpointed", [False, True], ids=["before-checkpoint", "after-checkpoint"])
def test_recovery_after_a_crash_does_not_bring_a_deleted_topic_back(tmp_path, checkpointed):
    store = open_store(make_config(tmp_path))
    put(store, "TD", 0, 4, keys=("k",))
    put(store, "KEEP", 0, 3)
    if checkpointed:
        store._sync_and_save(store._checkpoint())
    store.delete_topic("TD")
    put(store, "TD", 0, 1, start=100)  # created again
    if checkpointed:
        store._sync_and_save(store._checkpoint())
    crash(store)
    for full_scan in (False, True):
        reopened = MessageStore(make_config(tmp_path))
        reopened.load(full_scan=full_scan)
        found = read_all(reopened, "TD", 0)
        assert [m.queue_offset for m in found] == [0] and found[0].body.startswith(b"TD/0/100|")
        assert reopened.query_by_key("TD", "k") == []
        assert len(read_all(reopened, "KEEP", 0)) == 3
        crash(reopened)
