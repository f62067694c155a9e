"""Connection budgets on a real broker outside dev mode: strangers' sockets (connections not authenticated yet)
have a budget of their own, per address too, and a deadline; partial frames held by connections that close give
their memory back, so the broker's RSS stays within the partial-frame budget round after round."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from graymq.devkit.certs import make_tls_files
from graymq.devkit.processes import GraymqProcess
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import split_address
from graymq.protocol.connection import Connection
from graymq.protocol.frame import FrameDecoder, encode_frame
from graymq.protocol.remoting import parse_body, parse_envelope, request_envelope
from tests.support.cli import wait_for
from tests.support.metrics import scrape
from tests.support.trust import (
    StartProcess,
    add_principal,
    cli,
    closed_by_broker,
    start_secure_broker,
    start_secure_nameserver,
)

pytestmark = pytest.mark.integration

MiB = 1 << 20
STRANGER_HOST = "127.0.0.2"  # another address on the loopback: the flood's, apart from the rightful client's


def _secure_broker(start: StartProcess, pg_url: str, store: Path, **env: str) -> tuple[GraymqProcess, str]:
    """A broker outside dev mode with topic ORDER_PAID, and the token of a principal that may produce to it."""
    ns_url = start_secure_nameserver(start, pg_url)
    broker_token = add_principal(ns_url, "broker-a", "--broker")
    orders = add_principal(ns_url, "orders", "--produce", "ORDER_*")
    settings = {f"GRAYMQ_BROKER_{k.upper()}": v for k, v in env.items()}
    broker = start_secure_broker(start, ns_url, "broker-a", broker_token, store, **settings)
    created = cli(ns_url, "topic", "create", "ORDER_PAID", "--queues", "2", "--gray-queues", "0")
    assert created.returncode == 0, created.stderr
    return broker, orders


def _connect(address: str, source: str | None = None) -> socket.socket:
    host, port = split_address(address)
    return socket.create_connection((host, port), timeout=10, source_address=(source, 0) if source else None)



def _authenticated(address: str, token: str) -> socket.socket:
    """A raw socket that has authenticated with ``token`` (its AUTHENTICATE answered OK)."""
    sock = _connect(address)
    sock.sendall(encode_frame(1, request_envelope(pb.AUTHENTICATE, pb.AuthenticateRequest(token=token))))
    decoder = FrameDecoder()
    frames = decoder.feed(sock.recv(65536))
    while not frames:
        data = sock.recv(65536)
        assert data, "the broker closed the connection before answering AUTHENTICATE"
        frames = decoder.feed(data)
    parse_body(parse_envelope(frames[0].payload), response=True)
    return sock


def _rss_mib(proc: GraymqProcess) -> float:
    """The process's resident set (VmRSS), in MiB."""
    status = Path(f"/proc/{proc.proc.pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def _send_once(address: str, token: str) -> pb.SendResponse:
    """One connection, authenticated, one send: no retry, so a refused connection fails it."""

    async def main() -> pb.SendResponse:
        host, port = split_address(address)
        conn = await Connection.open(host, port, timeout=10)
        try:
            await conn.request(pb.AUTHENTICATE, pb.AuthenticateRequest(token=token), 10)
            request = pb.SendRequest(producer_group="pg", queue_id=0, message=pb.Message(topic="ORDER_PAID",
                                                                                         body=b"paid"))
            return await conn.request(pb.SEND_MESSAGE, request, 10)  # type: ignore[return-value]
        finally:
            await conn.close()

    return asyncio.run(main())


def test_strangers_from_one_address_leave_room_for_a_client_and_are_closed_at_the_deadline(
    graymq_process: StartProcess, fresh_pg_url: str, tmp_path: Path
) -> None:
    """150 sockets from one address that never authenticate, against a broker taking 100 connections, 32 of them
    unauthenticated per address: the rightful client still connects and sends; 32 strangers are held until the
    deadline, the rest closed at once."""
    broker, orders = _secure_broker(graymq_process, fresh_pg_url, tmp_path / "b", max_connections="100",
                                    max_unauthenticated_per_address="32", auth_timeout_s="3", metrics_port="0")
    strangers = [_connect(broker.address, STRANGER_HOST) for _ in range(150)]
    assert _send_once(broker.address, orders).status == pb.SEND_OK
    url = f"http://{broker.ready_info['metrics']}/metrics"  # type: ignore[index]
    closed = "graymq_broker_unauthenticated_closed_total"
    wait_for(lambda: scrape(url).value(closed, reason="over_budget") == 150 - 32, 10,
             "the strangers over the per-address budget refused")
    broker.wait_for_line("GRAYMQ_BROKER_MAX_UNAUTHENTICATED_PER_ADDRESS", timeout=10)
    assert all(closed_by_broker(s, 15) for s in strangers), "a stranger outlived the authentication deadline"
    assert scrape(url).value(closed, reason="auth_timeout") == 32
    for sock in strangers:
        sock.close()
    assert _send_once(broker.address, orders).status == pb.SEND_OK


def test_a_silent_tls_handshake_is_closed_at_the_authentication_deadline(
    graymq_process: StartProcess, tmp_path: Path
) -> None:
    """A socket that never starts its TLS handshake is aborted after AUTH_TIMEOUT_S, not asyncio's 60 s."""
    files = make_tls_files(tmp_path / "certs")
    broker = graymq_process("broker", "--port", "0", "--store", str(tmp_path / "b"), "--dev",
                            "--tls-cert", str(files.cert), "--tls-key", str(files.key),
                            env={"GRAYMQ_BROKER_AUTH_TIMEOUT_S": "1"})
    silent = _connect(broker.address)
    assert closed_by_broker(silent, 20), "a silent TLS peer held its socket past the deadline"


def test_partial_frames_of_closed_connections_give_their_memory_back_round_after_round(
    graymq_process: StartProcess, fresh_pg_url: str, tmp_path: Path
) -> None:
    """Rounds of 20 authenticated connections each parking most of an 8 MiB frame (the broker holds at most the
    64 MiB budget of them), then closed: the RSS goes back near where it started each round, and never climbs
    much above the budget (before, the buffers stayed until the garbage collector happened to break their
    connections' reference cycles: RSS grew round after round)."""
    budget = 64
    broker, orders = _secure_broker(graymq_process, fresh_pg_url, tmp_path / "b",
                                    max_buffered_bytes=str(budget * MiB))
    frame_size = 8 * MiB
    request = pb.SendRequest(producer_group="pg", message=pb.Message(topic="ORDER_PAID", body=b"\0" * frame_size))
    partial = encode_frame(1, request_envelope(pb.SEND_MESSAGE, request), 2 * frame_size)[: frame_size - 1024]
    _authenticated(broker.address, orders).close()
    base = _rss_mib(broker)
    peak = base
    for round_no in range(1, 7):
        socks = [_authenticated(broker.address, orders) for _ in range(20)]
        for sock in socks:
            try:
                sock.sendall(partial)
            except OSError:
                pass  # over the budget: the broker closed it
        wait_for(lambda: _rss_mib(broker) >= base + budget / 2, 20, f"round {round_no}: the broker to hold frames")
        peak = max(peak, _rss_mib(broker))
        for sock in socks:
            sock.close()
        # a deadline for a loaded machine (make test runs several workers); a leak keeps the RSS up however long
        wait_for(lambda: _rss_mib(broker) <= base + 24, 30,
                 f"round {round_no}: the RSS back within 24 MiB of {base:.0f} MiB (now {_rss_mib(broker):.0f})")
    assert peak <= base + budget * 1.5 + 16, f"RSS peaked at {peak:.0f} MiB from {base:.0f} (budget {budget} MiB)"
