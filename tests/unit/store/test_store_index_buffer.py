"""The key index buffers its entries: lookups still see every put, and a killed broker loses none for good."""

from __future__ import annotations

import pytest
from storekit import crash, make_config, open_store, put, run

from graymq.broker_ext.store import MessageStore

pytestmark = pytest.mark.unit


async def flush_and_checkpoint(store: MessageStore) -> None:
    await store.flush()
    await store.write_checkpoint()


def test_a_key_lookup_sees_entries_still_in_the_buffer(tmp_path):
    store = open_store(make_config(tmp_path))
    put(store, "T", 0, 5, keys=("order-1",))
    assert any(f.buffered for f in store.index.files.values())
    assert len(store.query_by_key("T", "order-1", max_num=100)) == 5


def test_entries_buffered_when_the_process_dies_are_rebuilt_and_checkpointed_ones_kept(tmp_path):
    config = make_config(tmp_path)
    store = open_store(config)
    put(store, "T", 0, 20, keys=("order-7",))
    run(flush_and_checkpoint(store))  # the first 20 written and synced
    put(store, "T", 0, 20, start=20, keys=("order-7",))
    for file in store.index.files.values():
        file.buffered.clear()  # what a killed process loses: the buffer never reached the file
    crash(store)
    store = open_store(config)
    assert len(store.query_by_key("T", "order-7", max_num=100)) == 40
