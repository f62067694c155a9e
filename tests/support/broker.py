"""Helpers for tests that talk to a real broker process with the client library's BrokerClient."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.broker_client import BrokerClient

T = TypeVar("T")


def run(coro_fn: Callable[[BrokerClient], Awaitable[T]], on_group_changed: Callable[[str], None] | None = None) -> T:
    """Run ``coro_fn(client)`` on a fresh event loop with a BrokerClient that is closed afterwards."""

    async def main() -> T:
        client = BrokerClient(on_group_changed=on_group_changed)
        try:
            return await coro_fn(client)
        finally:
            await client.close()

    return asyncio.run(main())


async def create_topic(client: BrokerClient, address: str, topic: str, queues: int, gray: int = 0) -> None:
    await client.update_topic(address, pb.TopicConfig(topic=topic, queue_nums=queues, gray_queue_nums=gray,
                                                      perm=pb.PERM_READ_WRITE))


def message(topic: str, body: bytes, tags: str = "", keys: tuple[str, ...] = (), gray: bool = False,
            msg_id: str = "") -> pb.Message:
    return pb.Message(topic=topic, body=body, tags=tags, keys=list(keys), gray=gray, msg_id=msg_id)


async def send(client: BrokerClient, address: str, topic: str, queue_id: int, body: bytes, **kw: object
               ) -> pb.SendResponse:
    return await client.send(address, pb.SendRequest(producer_group="pg", queue_id=queue_id,
                                                       message=message(topic, body, **kw)))  # type: ignore[arg-type]


async def heartbeat(client: BrokerClient, address: str, client_id: str, group: str, subs: dict[str, str],
                    gray: bool, switch: bool = True) -> None:
    data = pb.ConsumerData(group=group, gray_flag=gray, gray_switch=switch, subscriptions=[
        pb.SubscriptionData(topic=t, sub_string=e, sub_version=1) for t, e in subs.items()])
    await client.heartbeat(address, pb.HeartbeatRequest(client_id=client_id, consumers=[data]))


def pull_request(group: str, client_id: str, topic: str, queue_id: int, offset: int = 0, *, gray: bool = False,
                 max_nums: int = 32, suspend_ms: int = 0, adopted: bool = False, expression: str = ""
                 ) -> pb.PullRequest:
    return pb.PullRequest(consumer_group=group, client_id=client_id, topic=topic, queue_id=queue_id,
                          queue_offset=offset, max_msg_nums=max_nums, suspend_timeout_ms=suspend_ms,
                          gray_flag=gray, adopted=adopted, commit_offset=-1, sub_expression=expression)
