"""The gRPC port's front door on loopback, with an echo server behind it: connections over the limit are closed at
once and counted, the others piped both ways; gRPC's view of a piped connection names the client; a side ending
ends the pipe and frees its place."""

from __future__ import annotations

import asyncio
import doctest

from graymq.broker_ext.grpc_endpoint import front_door
from graymq.broker_ext.grpc_endpoint.front_door import FrontDoor

LIMIT = 2


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"hello")
    while data := await reader.read(100):
        writer.write(data)
    writer.close()


async def _door_behind(limit: int) -> tuple[FrontDoor, int, list[int], asyncio.Server]:
    """A front door of ``limit`` connections before an echo server; the door, its port, and its refusals heard."""
    inner = await asyncio.start_server(_echo, "127.0.0.1", 0)
    refused: list[int] = []
    door = FrontDoor(limit, on_refused=lambda: refused.append(1))
    port = await door.start("127.0.0.1", 0, inner.sockets[0].getsockname()[1])
    return door, port, refused, inner


def test_connections_over_the_limit_are_closed_and_counted_and_the_others_piped() -> None:
    async def run() -> tuple[list[bytes], int, int, int]:
        door, port, refused, inner = await _door_behind(LIMIT)
        clients = [await asyncio.open_connection("127.0.0.1", port) for _ in range(LIMIT + 3)]
        answers = []
        for reader, writer in clients:
            writer.write(b" world")
            answers.append(await asyncio.wait_for(reader.read(5), 5) + await asyncio.wait_for(reader.read(6), 5))
        open_before = door.open
        for _, writer in clients:
            writer.close()
        for _ in range(100):  # the closes reach the door
            if door.open == 0:
                break
            await asyncio.sleep(0.01)
        await door.stop()
        inner.close()
        return answers, len(refused), open_before, door.open

    answers, refused, open_before, open_after = asyncio.run(run())
    assert answers == [b"hello world"] * LIMIT + [b""] * 3
    assert (refused, open_before, open_after) == (3, LIMIT, 0)


def test_the_peer_grpc_sees_is_the_client_and_a_closed_pipe_frees_its_place() -> None:
    async def run() -> tuple[str, str, bytes]:
        door, port, _, inner = await _door_behind(1)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await reader.read(5)
        client = f"ipv4:127.0.0.1:{writer.get_extra_info('sockname')[1]}"
        peer = door.peer(f"ipv4:127.0.0.1:{next(iter(door._peers))}")  # what gRPC names the pipe's other end
        writer.close()  # the echo server ends too: the place is free again
        for _ in range(100):
            if door.open == 0:
                break
            await asyncio.sleep(0.01)
        again, closing = await asyncio.open_connection("127.0.0.1", port)
        hello = await asyncio.wait_for(again.read(5), 5)
        closing.close()
        await door.stop()
        inner.close()
        return peer, client, hello

    peer, client, hello = asyncio.run(run())
    assert peer == client
    assert hello == b"hello"


def test_doctests() -> None:
    assert doctest.testmod(front_door).failed == 0
