"""The broker process's answer to a failed fsync: pending sends fail, one ERROR line, ``serve`` ends with the error
and the store keeps its abort marker (the next start runs crash recovery)."""

from __future__ import annotations

import asyncio
import errno
import logging
import os

import pytest

from graymq.broker_ext.config import BrokerSettings
from graymq.broker_ext.main import serve
from graymq.broker_ext.store.fatal import StoreFatalError
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import GrayMQError
from tests.support.broker import create_topic, send

pytestmark = pytest.mark.unit


def test_a_failed_fsync_stops_the_broker_without_a_clean_stop(tmp_path, caplog, monkeypatch):
    settings = BrokerSettings(name="broker-f", port=0, store_dir=tmp_path, flush="sync", segment_size=1 << 16,
                              cq_units_per_file=64)
    fsyncs: list[int] = []

    def failing_fdatasync(fd: int) -> None:
        fsyncs.append(fd)
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    async def main() -> int:
        ready: asyncio.Future[dict[str, str]] = asyncio.get_running_loop().create_future()
        broker = asyncio.ensure_future(serve(settings, ready.set_result))
        address = (await asyncio.wait_for(ready, 30))["address"]
        client = BrokerClient()
        try:
            await create_topic(client, address, "T", 1)
            monkeypatch.setattr(os, "fdatasync", failing_fdatasync)
            with pytest.raises(GrayMQError, match="EIO"):
                await send(client, address, "T", 0, b"never durable")
            failed = len(fsyncs)
        finally:
            await client.close()
        with pytest.raises(StoreFatalError, match="EIO"):
            await asyncio.wait_for(broker, 30)
        return failed

    with caplog.at_level(logging.INFO):
        failed = asyncio.run(main())
    assert len(fsyncs) == failed  # never retried, not even by the stop
    stopping = [r for r in caplog.records if r.levelno == logging.ERROR and "stopping" in r.getMessage()]
    assert len(stopping) == 1 and "fsync of" in stopping[0].getMessage() and "EIO" in stopping[0].getMessage()
    assert (tmp_path / "abort").exists()
    assert not any("stopped cleanly" in r.getMessage() for r in caplog.records)
