"""The broker hands its validated settings to the store as they are: the store's own limits are broker settings
(``GRAYMQ_BROKER_*``), and a bad one stops the broker before it touches the store, in one clear line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import BrokerClient
from graymq.protocol.errors import GrayMQError
from tests.support.broker import create_topic, run, send

pytestmark = pytest.mark.integration


def test_a_broker_stores_bodies_up_to_its_max_message_size_and_refuses_a_larger_one(graymq_process, tmp_path):
    broker = graymq_process("broker", "--name", "broker-a", "--port", "0", "--store", str(tmp_path / "store"),
                            "--segment-size", str(1 << 20), env={"GRAYMQ_BROKER_MAX_MESSAGE_SIZE": "1024"})

    async def scenario(client: BrokerClient) -> None:
        await create_topic(client, broker.address, "SIZED", 1)
        assert (await send(client, broker.address, "SIZED", 0, b"x" * 1024)).status == pb.SEND_OK
        with pytest.raises(GrayMQError, match="1024") as refused:
            await send(client, broker.address, "SIZED", 0, b"x" * 1025)
        assert not refused.value.retriable
        assert (await send(client, broker.address, "SIZED", 0, b"after")).queue_offset == 1  # nothing else lost

    run(scenario)


def test_a_disk_warn_ratio_above_the_critical_one_is_refused_in_one_line(tmp_path):
    store = tmp_path / "store"
    env = {**os.environ, "GRAYMQ_BROKER_DISK_WARN_RATIO": "0.95", "GRAYMQ_BROKER_DISK_CRITICAL_RATIO": "0.9"}
    result = subprocess.run([sys.executable, "-m", "graymq.gray_controller.cli", "broker", "--port", "0", "--dev",
                             "--store", str(store)], capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 2, result.stderr
    assert "invalid broker settings" in result.stderr and "disk_warn_ratio 0.95" in result.stderr
    assert "Traceback" not in result.stderr
    assert not store.exists()
