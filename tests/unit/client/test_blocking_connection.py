"""BlockingConnection and BlockingBrokers against a scripted peer on a loopback socket: the response matched to
its request past a push, a wire error raised as its class, a timeout and a hang-up closing the connection, and
the idle connections of a broker that hung up dropped with it; a SEND_MESSAGE's answer read straight from the
bytes (compiled and pure reader) or, past a push or cut in two, by the general path."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from graymq.client import blocking_connection, send_wire
from graymq.client.blocking_brokers import BlockingBrokers
from graymq.client.blocking_connection import BlockingConnection
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.errors import (
    ConnectFailedError,
    ConnectionClosedError,
    RequestTimeoutError,
    TopicNotExistError,
)
from graymq.protocol.frame import FrameDecoder, encode_frame
from graymq.protocol.remoting import error_envelope, request_envelope, response_envelope

Reply = Callable[[socket.socket, int], None]  # answers the request numbered serial, or not


def ok(conn: socket.socket, serial: int) -> None:
    conn.sendall(encode_frame(serial, response_envelope(pb.SEND_MESSAGE, pb.SendResponse(msg_id=f"M{serial}"))))


@pytest.fixture
def peer() -> Iterator[tuple[str, list[Reply]]]:
    """A peer on loopback answering each request with the next reply of the list (``ok`` when it is empty)."""
    server = socket.create_server(("127.0.0.1", 0))
    replies: list[Reply] = []

    def serve(conn: socket.socket) -> None:
        decoder = FrameDecoder()
        with conn:
            while data := conn.recv(65536):
                for frame in decoder.feed(data):
                    (replies.pop(0) if replies else ok)(conn, frame.serial_no)

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield f"127.0.0.1:{server.getsockname()[1]}", replies
    server.close()


def send(conn: BlockingConnection, timeout_s: float = 2.0) -> pb.SendResponse:
    response = conn.request(pb.SEND_MESSAGE, pb.SendRequest(producer_group="g"), timeout_s)
    assert isinstance(response, pb.SendResponse)
    return response


def test_the_response_is_matched_to_its_request_past_a_push_in_between(peer: tuple[str, list[Reply]]) -> None:
    address, replies = peer

    def push_then_answer(conn: socket.socket, serial: int) -> None:
        notice = request_envelope(pb.NOTIFY_GROUP_CHANGED, pb.GroupChangedNotice(consumer_group="c"), oneway=True)
        conn.sendall(encode_frame(999, notice) + encode_frame(serial, response_envelope(
            pb.SEND_MESSAGE, pb.SendResponse(msg_id="answered"))))

    replies.append(push_then_answer)
    conn = BlockingConnection.open(address, timeout_s=2, tls=None, token="")
    assert send(conn).msg_id == "answered"
    assert send(conn).msg_id == "M2"  # the next request on the same socket
    conn.close()


READERS = [pytest.param(send_wire.send_reply_py, id="pure")]
if send_wire.COMPILED is not None:
    READERS.append(pytest.param(send_wire.COMPILED.send_reply, id="compiled"))
SEND_ENVELOPE = request_envelope(pb.SEND_MESSAGE, pb.SendRequest(producer_group="g"))


@pytest.mark.parametrize("reader", READERS)
def test_a_send_messages_answer_is_read_as_it_arrives_whole_after_a_push_or_cut_in_two(
        peer: tuple[str, list[Reply]], reader: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    address, replies = peer
    monkeypatch.setattr(blocking_connection, "send_reply", reader)
    answer = pb.SendResponse(msg_id="M", queue_offset=-1, commit_log_offset=12)

    def push_then_answer(conn: socket.socket, serial: int) -> None:
        notice = request_envelope(pb.NOTIFY_GROUP_CHANGED, pb.GroupChangedNotice(consumer_group="c"), oneway=True)
        conn.sendall(encode_frame(999, notice))
        time.sleep(0.05)  # the push alone in the first read
        conn.sendall(encode_frame(serial, response_envelope(pb.SEND_MESSAGE, answer)))

    def in_two(conn: socket.socket, serial: int) -> None:
        frame = encode_frame(serial, response_envelope(pb.SEND_MESSAGE, answer))
        conn.sendall(frame[:10])
        time.sleep(0.05)
        conn.sendall(frame[10:])

    replies.extend([push_then_answer, in_two, lambda conn, serial: conn.sendall(encode_frame(
        serial, error_envelope(pb.SEND_MESSAGE, TopicNotExistError("no topic T"))))])
    conn = BlockingConnection.open(address, timeout_s=2, tls=None, token="")
    assert conn.send_message(SEND_ENVELOPE, 2.0) == (0, "M", -1, 12)
    assert conn.send_message(SEND_ENVELOPE, 2.0) == (0, "M", -1, 12)
    with pytest.raises(TopicNotExistError, match="^no topic T$"):
        conn.send_message(SEND_ENVELOPE, 2.0)
    assert not conn.closed and conn.send_message(SEND_ENVELOPE, 2.0) == (0, "M4", 0, 0)
    conn.close()


def test_a_wire_error_is_raised_as_its_class_and_the_connection_stays_usable(peer: tuple[str, list[Reply]]) -> None:
    address, replies = peer
    replies.append(lambda conn, serial: conn.sendall(encode_frame(serial, error_envelope(
        pb.SEND_MESSAGE, TopicNotExistError("no topic T")))))
    conn = BlockingConnection.open(address, timeout_s=2, tls=None, token="")
    with pytest.raises(TopicNotExistError, match="no topic T"):
        send(conn)
    assert not conn.closed and send(conn).msg_id == "M2"


def test_no_answer_in_time_is_a_request_timeout_and_closes_the_connection(peer: tuple[str, list[Reply]]) -> None:
    address, replies = peer
    replies.append(lambda conn, serial: None)
    conn = BlockingConnection.open(address, timeout_s=2, tls=None, token="")
    with pytest.raises(RequestTimeoutError, match="SEND_MESSAGE to 127.0.0.1"):
        send(conn, timeout_s=0.2)
    assert conn.closed  # a late answer must not be read as the next request's
    with pytest.raises(ConnectionClosedError):
        send(conn)


def test_pushes_alone_do_not_outlast_the_timeout_on_a_blocking_socket(peer: tuple[str, list[Reply]]) -> None:
    """A plain socket stays blocking (the kernel bounds each read): a broker that keeps sending pushes but never
    the answer still times the request out, and an envelope written ahead goes out as a message's would."""
    address, replies = peer

    def pushes_only(conn: socket.socket, serial: int) -> None:
        notice = request_envelope(pb.NOTIFY_GROUP_CHANGED, pb.GroupChangedNotice(consumer_group="c"), oneway=True)
        try:
            for _ in range(40):  # 2 s of pushes, each well inside the request's 0.3 s
                conn.sendall(encode_frame(999, notice))
                time.sleep(0.05)
        except OSError:
            pass  # the client gave up and hung up: what the test expects

    replies.append(pushes_only)
    conn = BlockingConnection.open(address, timeout_s=2, tls=None, token="")
    assert conn.sock.gettimeout() is None
    began = time.monotonic()
    with pytest.raises(RequestTimeoutError):
        send(conn, timeout_s=0.3)
    assert time.monotonic() - began < 1.5  # the request's 0.3 s, not the 2 s the pushes go on for
    conn = BlockingConnection.open(address, timeout_s=2, tls=None, token="")
    envelope = request_envelope(pb.SEND_MESSAGE, pb.SendRequest(producer_group="g"))
    assert conn.send_message(envelope, 2.0)[1].startswith("M")


def test_a_peer_hanging_up_drops_every_idle_connection_to_it(peer: tuple[str, list[Reply]]) -> None:
    address, replies = peer
    brokers = BlockingBrokers(timeout_s=2, token="", tls=None)
    holding = threading.Barrier(2)

    def answer_slowly(conn: socket.socket, serial: int) -> None:
        holding.wait(5)
        ok(conn, serial)

    replies.append(answer_slowly)
    other = threading.Thread(target=brokers.call, args=(address, pb.SEND_MESSAGE, pb.SendRequest(), 5.0))
    other.start()  # holds the first connection until the barrier
    deadline = time.monotonic() + 5
    while replies and time.monotonic() < deadline:  # until the peer holds that request
        time.sleep(0.01)
    brokers.call(address, pb.SEND_MESSAGE, pb.SendRequest(), 2.0)  # meanwhile: a second connection
    holding.wait(5)
    other.join(5)
    assert brokers.open_count() == 2
    replies.append(lambda conn, serial: conn.shutdown(socket.SHUT_RDWR))
    with pytest.raises(ConnectionClosedError):
        brokers.call(address, pb.SEND_MESSAGE, pb.SendRequest(), 2.0)
    assert brokers.open_count() == 0  # the other idle one went with it: a retry opens a fresh connection
    assert brokers.call(address, pb.SEND_MESSAGE, pb.SendRequest(), 2.0).msg_id.startswith("M")
    brokers.close()
    assert brokers.open_count() == 0


def test_a_refused_connection_is_connect_failed() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{unused.getsockname()[1]}"
    with pytest.raises(ConnectFailedError, match="cannot connect"):
        BlockingConnection.open(address, timeout_s=1, tls=None, token="")
