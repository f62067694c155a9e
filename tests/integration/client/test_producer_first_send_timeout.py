"""The first send to a topic is bounded by the send timeout even when the name server hangs (SIGSTOP)."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from graymq.client import Message, Producer
from graymq.protocol.errors import RequestTimeoutError

pytestmark = pytest.mark.integration

SEND_TIMEOUT_S = 1.0
# Generous: the name server client alone gives up only after 2 tries x 3 s.
DEADLINE_S = 5.0


def test_the_first_send_to_a_topic_times_out_while_the_name_server_is_stopped(cluster) -> None:
    nameserver = cluster.nameservers[0].proc

    async def scenario() -> None:
        producer = Producer("P_FIRST_SEND", cluster.ns_url, send_timeout_s=SEND_TIMEOUT_S)
        await producer.start()
        try:
            os.kill(nameserver.pid, signal.SIGSTOP)
            try:
                started = time.monotonic()
                with pytest.raises(RequestTimeoutError, match="timed out"):
                    await producer.send(Message("TOPIC_NEVER_LOOKED_UP", b"first"))
                assert time.monotonic() - started < DEADLINE_S
            finally:
                os.kill(nameserver.pid, signal.SIGCONT)
        finally:
            await producer.stop()

    asyncio.run(scenario())
