"""The broker's half of trust, on real processes (PostgreSQL name server, real principals): every abuse over
the broker port refused with its error, the rightful clients working, principals enforced while the name
server is down, and limits on what a stranger can make the broker hold."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from graymq.devkit.processes import GraymqProcess
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import BrokerClient, split_address
from graymq.protocol.errors import BadRequestError, ForbiddenError, OffsetIllegalError, UnauthorizedError
from graymq.protocol.frame import encode_frame
from graymq.protocol.remoting import request_envelope
from tests.support.broker import create_topic, heartbeat, pull_request, send
from tests.support.cli import wait_for
from tests.support.metrics import scrape
from tests.support.trust import (
    ADMIN,
    SECURE_ENV,
    StartProcess,
    add_principal,
    cli,
    closed_by_broker,
    start_secure_broker,
    start_secure_nameserver,
)

pytestmark = pytest.mark.integration

T = TypeVar("T")


def as_principal(token: str, call: Callable[[BrokerClient], Awaitable[T]]) -> T:
    """``call(client)`` with a BrokerClient authenticating with ``token`` ("" sends none)."""

    async def main() -> T:
        client = BrokerClient(token=token, tls=False)
        try:
            return await call(client)
        finally:
            await client.close()

    return asyncio.run(main())


def refused(token: str, call: Callable[[BrokerClient], Awaitable[object]]) -> UnauthorizedError:
    """The UNAUTHORIZED or FORBIDDEN error ``call`` ends with."""
    with pytest.raises(UnauthorizedError) as caught:
        as_principal(token, call)
    return caught.value


@pytest.fixture
def secure(graymq_process: StartProcess, fresh_pg_url: str, tmp_path: Path) -> dict[str, str]:
    """A name server and broker-a outside dev mode, topic ORDER_PAID (8 queues, 2 gray), and principals."""
    ns_url = start_secure_nameserver(graymq_process, fresh_pg_url)
    tokens = {
        "ns_url": ns_url,
        "broker": add_principal(ns_url, "broker-a", "--broker"),
        "orders": add_principal(ns_url, "orders", "--produce", "ORDER_*"),
        "billing": add_principal(ns_url, "billing", "--consume", "billing:ORDER_*"),
        "billing2": add_principal(ns_url, "billing2", "--consume", "billing"),
        "other": add_principal(ns_url, "other", "--consume", "other_*", "--produce", "OTHER_*"),
    }
    broker = start_secure_broker(graymq_process, ns_url, "broker-a", tokens["broker"], tmp_path / "broker-a",
                                 GRAYMQ_BROKER_METRICS_PORT="0")
    tokens["address"] = broker.address
    tokens["metrics"] = f"http://{broker.ready_info['metrics']}/metrics"  # type: ignore[index]
    created = cli(ns_url, "topic", "create", "ORDER_PAID", "--queues", "8", "--gray-queues", "2")
    assert created.returncode == 0, created.stderr
    return tokens


def test_each_abuse_over_the_broker_port_is_refused_with_its_error(secure: dict[str, str]) -> None:
    address = secure["address"]
    # no token: nothing but AUTHENTICATE is served
    anonymous = refused("", lambda c: send(c, address, "ORDER_PAID", 1, b"x"))
    assert anonymous.code == pb.UNAUTHORIZED and "not authenticated" in anonymous.message
    assert refused("", lambda c: c.pull(address, pull_request("billing", "x", "ORDER_PAID", 0))).code == \
        pb.UNAUTHORIZED
    wrong = refused("gmq_not-a-token", lambda c: c.max_offset(address, "ORDER_PAID", 0))
    assert wrong.code == pb.UNAUTHORIZED and "invalid token" in wrong.message

    other = secure["other"]
    cases: list[tuple[Callable[[BrokerClient], Awaitable[object]], str]] = [
        (lambda c: send(c, address, "ORDER_PAID", 1, b"x"), "may not produce to topic ORDER_PAID"),
        (lambda c: c.pull(address, pull_request("billing", "x", "ORDER_PAID", 0, gray=True)),
         "may not consume topic ORDER_PAID in group billing"),
        (lambda c: c.update_offset(address, "billing", "ORDER_PAID", 1, 0),
         "may not consume topic ORDER_PAID in group billing"),
        (lambda c: heartbeat(c, address, "spy", "billing", {"ORDER_PAID": "*"}, gray=False),
         "may not consume group billing"),
        (lambda c: c.group_backlog(address, "billing"), "may not consume group billing"),
        (lambda c: c.query_offset(address, "billing", "ORDER_PAID", 1),
         "may not consume topic ORDER_PAID in group billing"),
    ]
    for call, right in cases:
        error = refused(other, call)
        assert (error.code, error.message) == (pb.FORBIDDEN, f"principal other {right}"), right
    by_key = refused(secure["orders"], lambda c: c.call(address, pb.QUERY_MESSAGE_BY_KEY, pb.QueryByKeyRequest(
        topic="ORDER_PAID", key="k"), pb.MessagesResponse))  # a producer does not read
    assert by_key.message == "principal orders may not read messages of topic ORDER_PAID (a consume right " \
        "covering it is needed)"

    # topics are created and grown through the name server only, not even by an admin over the broker port
    for token in (other, ADMIN):
        grown = refused(token, lambda c: create_topic(c, address, "ORDER_PAID", 64, 1))
        assert grown.code == pb.FORBIDDEN and "through the name server" in grown.message
    config = as_principal(secure["orders"], lambda c: c.call(address, pb.GET_TOPIC,
                                                             pb.GetTopicRequest(topic="ORDER_PAID"), pb.TopicConfig))
    assert (config.queue_nums, config.gray_queue_nums) == (8, 2)

    # offsets stay within [min, max], whoever commits them
    billing = secure["billing"]
    as_principal(secure["orders"], lambda c: send(c, address, "ORDER_PAID", 1, b"m"))
    for offset in (10**15, -7):
        with pytest.raises(OffsetIllegalError, match=r"outside the queue's \[0, 1\]"):
            as_principal(billing, lambda c, o=offset: c.update_offset(address, "billing", "ORDER_PAID", 1, o))
    as_principal(billing, lambda c: c.update_offset(address, "billing", "ORDER_PAID", 1, 1))

    # a batch of a topic one may produce to carries no message of another topic
    smuggled = pb.SendBatchRequest(producer_group="p", topic="ORDER_PAID", queue_id=1, messages=[
        pb.Message(topic="ORDER_PAID", body=b"ok"), pb.Message(topic="OTHER_X", body=b"smuggled")])
    with pytest.raises(BadRequestError, match="contains a message for OTHER_X"):
        as_principal(secure["orders"], lambda c: c.call(address, pb.SEND_BATCH, smuggled, pb.SendBatchResponse))
    assert as_principal(secure["orders"], lambda c: c.max_offset(address, "ORDER_PAID", 1)) == 1  # nothing stored
    refusals = scrape(secure["metrics"]).value("graymq_broker_refused_requests_total") or 0
    assert refusals >= 3 + len(cases) + 1 + 2  # every refusal above is counted


def test_a_client_id_is_used_only_by_the_principal_that_registered_it(secure: dict[str, str]) -> None:
    address = secure["address"]

    async def hold_c1_then_spoof(client: BrokerClient) -> None:
        await heartbeat(client, address, "c1", "billing", {"ORDER_PAID": "*"}, gray=True)
        spoofer = BrokerClient(token=secure["billing2"], tls=False)
        try:
            with pytest.raises(ForbiddenError, match="client c1 of group billing: it belongs to principal billing"):
                await heartbeat(spoofer, address, "c1", "billing", {"ORDER_PAID": "*"}, gray=False)
            with pytest.raises(ForbiddenError, match="belongs to principal billing"):
                await spoofer.unregister(address, "c1", "billing")
            await heartbeat(spoofer, address, "c2", "billing", {"ORDER_PAID": "*"}, gray=False)  # its own id
            listing = await client.consumer_list(address, "billing")
            assert {(c.client_id, c.gray_flag) for c in listing.clients} == {("c1", True), ("c2", False)}
        finally:
            await spoofer.close()

    as_principal(secure["billing"], hold_c1_then_spoof)


def test_a_group_backlog_answers_only_the_topics_the_caller_may_use_and_a_log_is_copied_only_by_its_broker(
    secure: dict[str, str],
) -> None:
    address, ns_url = secure["address"], secure["ns_url"]
    assert cli(ns_url, "topic", "create", "SALARY", "--queues", "1").returncode == 0
    wait_for(lambda: as_principal(ADMIN, lambda c: c.max_offset(address, "SALARY", 0)) == 0, 20, "SALARY served")
    as_principal(ADMIN, lambda c: send(c, address, "SALARY", 0, b"secret"))
    # billing2 consumes group billing on any topic; billing only on ORDER_*
    as_principal(secure["billing2"], lambda c: c.update_offset(address, "billing", "SALARY", 0, 1))
    as_principal(secure["billing2"], lambda c: c.update_offset(address, "billing", "ORDER_PAID", 0, 0))

    def topics(token: str) -> set[str]:
        return {q.topic for q in as_principal(token, lambda c: c.group_backlog(address, "billing"))}

    assert topics(secure["billing2"]) == topics(ADMIN) == {"ORDER_PAID", "SALARY"}
    assert topics(secure["billing"]) == {"ORDER_PAID"}
    hidden = refused(secure["billing"], lambda c: c.group_backlog(address, "billing", "SALARY"))
    assert (hidden.code, hidden.message) == (pb.FORBIDDEN, "principal billing may not see the backlog of topic "
                                                           "SALARY in group billing")

    # a broker token copies the log of the broker names it covers only (broker-x: its own name)
    other_broker = add_principal(ns_url, "broker-x", "--broker")
    fetch = pb.ReplicaFetchRequest(broker_name="broker-a", replica_id=1, epoch=1, offset=0, max_bytes=1024)
    copied = refused(other_broker, lambda c: c.call(address, pb.REPLICA_FETCH, fetch, pb.ReplicaFetchResponse))
    assert copied.code == pb.FORBIDDEN and copied.message.startswith(
        "principal broker-x may not copy the log of broker broker-a as replica 1")


def test_a_broker_enforces_the_principals_it_learned_while_the_name_server_is_down(
    graymq_process: StartProcess, fresh_pg_url: str, tmp_path: Path
) -> None:
    ns = graymq_process("nameserver", "--port", "0", "--db", fresh_pg_url, "--migrate", env=SECURE_ENV)
    ns_url = str(ns.ready_info["url"])  # type: ignore[index]
    broker_token = add_principal(ns_url, "broker-a", "--broker")
    orders = add_principal(ns_url, "orders", "--produce", "ORDER_*")
    store = tmp_path / "broker-a"
    broker = start_secure_broker(graymq_process, ns_url, "broker-a", broker_token, store)
    assert cli(ns_url, "topic", "create", "ORDER_PAID", "--queues", "2").returncode == 0
    wait_for(lambda: (store / "config" / "principals.json").exists(), 10, "the principals cached")
    ns.kill()

    def sends_and_refusals(address: str) -> None:
        for i in range(10):
            assert as_principal(orders, lambda c, i=i: send(c, address, "ORDER_PAID", i % 2, b"m")).status == \
                pb.SEND_OK
        assert refused("", lambda c: send(c, address, "ORDER_PAID", 0, b"x")).code == pb.UNAUTHORIZED
        assert refused("gmq_wrong", lambda c: send(c, address, "ORDER_PAID", 0, b"x")).code == pb.UNAUTHORIZED

    sends_and_refusals(broker.address)
    assert broker.terminate() == 0
    # restarted while the name server is still down, it authenticates from the principals it cached
    again = graymq_process("broker", "--name", "broker-a", "--port", "0", "--store", str(store), "--nameserver",
                           ns_url, env={**SECURE_ENV, "GRAYMQ_BROKER_TOKEN": broker_token})
    sends_and_refusals(again.address)
    total = as_principal(orders, lambda c: asyncio.gather(*(c.max_offset(again.address, "ORDER_PAID", q)
                                                             for q in (0, 1))))
    assert sum(total) == 20


def test_a_bootstrap_broker_token_registers_a_broker_and_grants_nothing_else(
    graymq_process: StartProcess, fresh_pg_url: str, tmp_path: Path
) -> None:
    bootstrap = "brokers-bootstrap-secret-0123456789"
    ns_url = start_secure_nameserver(graymq_process, fresh_pg_url, GRAYMQ_BROKER_TOKENS=f"brokers={bootstrap}")
    broker = start_secure_broker(graymq_process, ns_url, "broker-a", bootstrap, tmp_path / "b")
    assert cli(ns_url, "topic", "create", "ORDER_PAID", "--queues", "2").returncode == 0
    orders = add_principal(ns_url, "orders", "--produce", "ORDER_*")
    wait_for(lambda: _learned(broker.address, orders), 20, "the broker to learn the new principal")
    assert as_principal(orders, lambda c: send(c, broker.address, "ORDER_PAID", 0, b"m")).status == pb.SEND_OK
    denied = cli(ns_url, "principal", "list", admin=bootstrap)
    assert denied.returncode != 0 and "FORBIDDEN" in denied.stderr  # the broker right administers nothing
    # brokers know it (the replicas of a set authenticate to their leader with it), and it sends nothing
    forbidden = refused(bootstrap, lambda c: send(c, broker.address, "ORDER_PAID", 0, b"m"))
    assert (forbidden.code, forbidden.message) == (pb.FORBIDDEN,
                                                   "principal brokers may not produce to topic ORDER_PAID")


def _digest_reads(ns_url: str) -> float:
    """How many times brokers read the principals from the name server (``GET /v1/principals/digests``: the list,
    or 304 when the broker has it)."""
    metrics = scrape(f"{ns_url}/metrics")
    return sum(metrics.value("graymq_nameserver_http_requests_total", method="GET", route="/v1/principals/digests",
                             status=status) or 0 for status in ("200", "304"))


def test_a_new_principal_works_on_the_broker_at_once_and_bad_tokens_cost_bounded_reads_and_lock_out_no_neighbour(
    graymq_process: StartProcess, fresh_pg_url: str, tmp_path: Path
) -> None:
    ns_url = start_secure_nameserver(graymq_process, fresh_pg_url)
    broker_token = add_principal(ns_url, "broker-a", "--broker")
    # registration rounds a minute apart: only an unknown token makes the broker read the principals meanwhile
    broker = start_secure_broker(graymq_process, ns_url, "broker-a", broker_token, tmp_path / "b",
                                 GRAYMQ_BROKER_REGISTER_INTERVAL_S="60")
    address = broker.address
    assert cli(ns_url, "topic", "create", "ORDER_PAID", "--queues", "2").returncode == 0
    orders = add_principal(ns_url, "orders", "--produce", "ORDER_*")
    assert as_principal(orders, lambda c: send(c, address, "ORDER_PAID", 0, b"m")).status == pb.SEND_OK

    # a flood of 15 unknown tokens at once: refused, for one or two reads of the principals, not fifteen
    before = _digest_reads(ns_url)

    async def flood(_: BrokerClient) -> list[BaseException | object]:
        clients = [BrokerClient(token=f"gmq_guess-{i}", tls=False) for i in range(15)]
        try:
            return await asyncio.gather(*(c.max_offset(address, "ORDER_PAID", 0) for c in clients),
                                        return_exceptions=True)
        finally:
            await asyncio.gather(*(c.close() for c in clients))

    outcomes = as_principal("", flood)
    assert all(isinstance(o, UnauthorizedError) and "invalid token" in str(o) for o in outcomes), outcomes
    assert 1 <= _digest_reads(ns_url) - before <= 2

    # a peer retrying its one stale token (a misconfigured replica, say) does not lock out its address ...
    for _ in range(30):
        assert "invalid token" in refused("gmq_stale", lambda c: c.max_offset(address, "ORDER_PAID", 0)).message
    assert as_principal(orders, lambda c: c.max_offset(address, "ORDER_PAID", 0)) == 1
    # ... while guessing, a new token each time, does once 20 failed in the window (16 so far: the stale one once)
    for i in range(4):
        refused(f"gmq_more-{i}", lambda c: c.max_offset(address, "ORDER_PAID", 0))
    locked = refused(orders, lambda c: c.max_offset(address, "ORDER_PAID", 0))
    assert "too many failed authentications" in locked.message


def _learned(address: str, token: str) -> bool:
    """Whether the broker accepts ``token`` yet (it reads new principals every registration round)."""
    try:
        as_principal(token, lambda c: c.max_offset(address, "ORDER_PAID", 0))
    except UnauthorizedError:
        return False
    return True


@pytest.mark.parametrize("env, problem", [
    ({"GRAYMQ_BROKER_TOKEN": ""}, "no broker token: set GRAYMQ_BROKER_TOKEN"),
    ({"GRAYMQ_BROKER_TOKEN": "gmq_x", "GRAYMQ_BROKER_NAMESERVER": ""}, "no name server"),
])
def test_a_broker_without_credentials_refuses_to_start_outside_dev_mode(
    graymq_process: StartProcess, tmp_path: Path, env: dict[str, str], problem: str
) -> None:
    proc = graymq_process("broker", "--port", "0", "--store", str(tmp_path / "b"),
                          env={**SECURE_ENV, "GRAYMQ_NAMESERVER": "", **env}, wait=False)
    assert proc.proc.wait(30) != 0
    lines = [line for line in proc.output.splitlines() if line.strip()]
    assert len(lines) == 1 and problem in lines[0], lines


# -- limits on what a peer can make the broker hold (dev mode: the limits apply all the same) ----------------

def _connect(address: str) -> socket.socket:
    host, port = split_address(address)
    sock = socket.create_connection((host, port), timeout=10)
    return sock



def _partial_frame(size: int, sent: int) -> bytes:
    """The first ``sent`` bytes of a SEND_MESSAGE frame whose payload is ``size`` bytes long."""
    request = pb.SendRequest(producer_group="pg", message=pb.Message(topic="T", body=b"\0" * size))
    return encode_frame(1, request_envelope(pb.SEND_MESSAGE, request), size * 2)[:sent]


def _serves(address: str, topic: str) -> bool:
    """Whether a dev-mode broker creates ``topic`` and takes a message on it."""

    async def works(client: BrokerClient) -> bool:
        await create_topic(client, address, topic, 1)
        return (await send(client, address, topic, 0, b"ok")).status == pb.SEND_OK

    return as_principal("", works)


def _broker(start: StartProcess, tmp_path: Path, dev: bool = True, **env: str) -> GraymqProcess:
    args = ["broker", "--port", "0", "--store", str(tmp_path / "b")]
    settings = {f"GRAYMQ_BROKER_{k.upper()}": v for k, v in env.items()}
    return start(*args, *(["--dev"] if dev else []), env=settings)


def test_idle_and_unauthenticated_connections_are_closed(graymq_process: StartProcess, tmp_path: Path,
                                                         fresh_pg_url: str) -> None:
    ns_url = start_secure_nameserver(graymq_process, fresh_pg_url)
    broker = start_secure_broker(graymq_process, ns_url, "broker-a", add_principal(ns_url, "broker-a", "--broker"),
                                 tmp_path / "secure", GRAYMQ_BROKER_AUTH_TIMEOUT_S="1")
    silent = _connect(broker.address)
    assert closed_by_broker(silent), "a connection that never authenticates is closed"
    # a stranger cannot make the broker buffer a large frame: before authentication frames are small
    stranger = _connect(broker.address)
    stranger.sendall(_partial_frame(15 << 20, 1 << 20))
    assert closed_by_broker(stranger)
    broker.wait_for_line("exceeds the limit of 65536", timeout=10)

    idle_broker = _broker(graymq_process, tmp_path, idle_timeout_s="1")
    idle = _connect(idle_broker.address)
    assert closed_by_broker(idle), "an idle connection is closed"
    idle_broker.wait_for_line("idle for 1 s", timeout=10)


def test_connections_beyond_the_maximum_are_closed_and_the_broker_serves_again_once_they_go(
    graymq_process: StartProcess, tmp_path: Path
) -> None:
    broker = _broker(graymq_process, tmp_path, max_connections="20")
    held = [_connect(broker.address) for _ in range(20)]
    extra = [_connect(broker.address) for _ in range(5)]
    assert all(closed_by_broker(s, 10) for s in extra)
    broker.wait_for_line("GRAYMQ_BROKER_MAX_CONNECTIONS", timeout=10)
    for sock in held:
        sock.close()
    wait_for(lambda: _serves(broker.address, "LIMITS"), 20, "the broker to serve again")


def test_partial_frames_over_all_connections_are_capped(graymq_process: StartProcess, tmp_path: Path) -> None:
    """Twenty connections each half-sending a 15 MiB frame hold at most the cap, not 300 MB."""
    broker = _broker(graymq_process, tmp_path, max_buffered_bytes=str(4 << 20))
    socks = [_connect(broker.address) for _ in range(20)]
    for sock in socks:
        try:
            sock.sendall(_partial_frame(15 << 20, 1 << 20))
        except ConnectionError:
            pass  # the broker already closed it
    closed = sum(closed_by_broker(s, 3) for s in socks)
    assert closed >= 16, f"only {closed} of 20 connections were closed"
    broker.wait_for_line("partial frames over every connection exceed", timeout=10)
    for sock in socks:
        sock.close()
    assert _serves(broker.address, "CAP")
