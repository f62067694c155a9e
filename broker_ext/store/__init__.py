"""The broker's storage engine: commit log, consume queues, key index, flush, recovery, retention."""

from graymq.broker_ext.store.message_store import (
    AppendResult,
    GetResult,
    GetStatus,
    MessageStore,
    PutMessage,
    StoreConfig,
)
from graymq.broker_ext.store.stats import StoreStats

__all__ = ["AppendResult", "GetResult", "GetStatus", "MessageStore", "PutMessage", "StoreConfig", "StoreStats"]
