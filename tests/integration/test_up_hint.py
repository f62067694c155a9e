"""`graymq up` tells a person how to reach the cluster (the name server, the broker and the gRPC endpoint for stock
RocketMQ 5 clients), and stays quiet about it for a script that owns the cluster and asked for warnings only
(`make demo`, which shuts the cluster down before it ends)."""

from __future__ import annotations

import socket

import pytest

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("level", "hinted"), [("INFO", True), ("WARNING", False)])
def test_the_export_hint_follows_the_log_level(graymq_process, tmp_path, level: str, hinted: bool) -> None:
    up = graymq_process("up", "--data", str(tmp_path / "data"), "--nameserver-port", "0", "--broker-port", "0",
                        "--grpc-port", "0", env={"GRAYMQ_LOG_LEVEL": level}, timeout=90)
    assert up.terminate() == 0
    assert ("export GRAYMQ_NAMESERVER=" in up.output) is hinted, up.output


def test_up_serves_the_grpc_endpoint_names_it_in_the_ready_line_and_hint_and_off_turns_it_off(
        graymq_process, tmp_path) -> None:
    up = graymq_process("up", "--data", str(tmp_path / "on"), "--nameserver-port", "0", "--broker-port", "0",
                        "--grpc-port", "0", timeout=90)
    endpoint = str(up.ready_info["grpc"])
    host, _, port = endpoint.rpartition(":")
    socket.create_connection((host, int(port)), timeout=5).close()  # served, not only printed
    assert f"stock RocketMQ 5 clients (Java, Go, Python, Node.js, C#): endpoint {endpoint}" in up.output, up.output
    assert up.terminate() == 0

    off = graymq_process("up", "--data", str(tmp_path / "off"), "--nameserver-port", "0", "--broker-port", "0",
                         "--grpc-port", "off", timeout=90)
    assert "grpc" not in off.ready_info and "stock RocketMQ 5 clients" not in off.output, off.output
    assert off.terminate() == 0
