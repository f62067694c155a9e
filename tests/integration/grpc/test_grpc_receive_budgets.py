"""A flood of ReceiveMessage long polls from one principal on a real broker outside dev mode: over the long-poll
budget of its connection, then of the principal, each poll is refused at once with ``TOO_MANY_REQUESTS`` naming the
budget and its setting, counted by budget, while another principal's gRPC sends and receives are served; the
polls held give their budget back when they end. Small budgets, so it runs in ``make test``."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s
from graymq.protocol.rocketmq_v2 import service_pb2_grpc
from tests.support.cli import wait_for
from tests.support.grpc_budgets import TOPIC, flood_broker
from tests.support.grpc_flood import signed
from tests.support.metrics import scrape
from tests.support.trust import StartProcess, carried_topics, cli

pytestmark = pytest.mark.integration

IDLE_TOPIC = "ORDER_IDLE"  # the flooder's polls find nothing there and are held to their long-poll timeout
PER_CONNECTION, PER_PRINCIPAL = 4, 6
POLLS = 6  # on each of two connections: 2 refused over the connection's budget, then 4 over the principal's
HELD_S = 20  # a held poll's long-poll timeout (the endpoint's limit): still held while the test reads its figures
SENDS = 5


def _seconds(value: float) -> Duration:
    duration = Duration()
    duration.FromMilliseconds(int(value * 1000))
    return duration


def receive_request(group: str, topic: str, long_poll_s: float) -> v2s.ReceiveMessageRequest:
    return v2s.ReceiveMessageRequest(
        group=v2.Resource(name=group), message_queue=v2.MessageQueue(topic=v2.Resource(name=topic)),
        batch_size=32, invisible_duration=_seconds(30), long_polling_timeout=_seconds(long_poll_s))


async def first_status(call: grpc.aio.UnaryStreamCall) -> v2.Status:
    async for response in call:
        if response.HasField("status"):
            return response.status
    raise AssertionError("a ReceiveMessage answered without a status")


def open_polls(channel: grpc.aio.Channel, token: str, count: int) -> list[asyncio.Task[v2.Status]]:
    """``count`` long polls of the flooder's group on ``IDLE_TOPIC``, each under its own client id."""
    stub = service_pb2_grpc.MessagingServiceStub(channel)
    return [asyncio.ensure_future(first_status(stub.ReceiveMessage(
        receive_request("GID_FLOOD", IDLE_TOPIC, HELD_S), metadata=signed(token, f"flood-{uuid.uuid4().hex}@1@0@x"),
        timeout=HELD_S + 10))) for _ in range(count)]


async def refusals(polls: list[asyncio.Task[v2.Status]], expected: int) -> list[v2.Status]:
    """The first ``expected`` polls to answer (the refused ones: the held ones answer at their timeout)."""
    answered: list[v2.Status] = []
    pending = set(polls)
    while len(answered) < expected:
        done, pending = await asyncio.wait(pending, timeout=20, return_when=asyncio.FIRST_COMPLETED)
        assert done, f"{len(answered)} of {expected} polls refused"
        answered.extend(task.result() for task in done)
    return answered


async def sends_and_receives(endpoint: str, token: str) -> tuple[list[int], int]:
    """The other principal's ``SENDS`` gRPC sends (their status codes) and how many of them it then receives."""
    client_id = "payments@1@0@receiver"
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        codes = []
        for _ in range(SENDS):
            message = v2.Message(topic=v2.Resource(name=TOPIC), body=b"paid", system_properties=v2.SystemProperties(
                message_id=f"01{uuid.uuid4().hex.upper()}", body_encoding=v2.IDENTITY, message_type=v2.NORMAL))
            answer = await stub.SendMessage(v2s.SendMessageRequest(messages=[message]),
                                            metadata=signed(token, client_id), timeout=10)
            codes.append(answer.status.code)
        received = 0
        for _ in range(10):
            if received >= SENDS:
                break
            async for response in stub.ReceiveMessage(receive_request("GID_PAYMENTS", TOPIC, 2),
                                                      metadata=signed(token, client_id), timeout=10):
                received += response.HasField("message")
        return codes, received


def test_a_flood_of_long_polls_from_one_principal_is_refused_over_its_budgets_and_others_are_served(
        graymq_process: StartProcess, fresh_pg_url: str, tmp_path: Path) -> None:
    broker, endpoint, flooder, payments = flood_broker(
        graymq_process, fresh_pg_url, tmp_path / "b", grpc_max_receives_per_connection=str(PER_CONNECTION),
        grpc_max_receives_per_principal=str(PER_PRINCIPAL))
    ns_url = str(broker.args[broker.args.index("--nameserver") + 1])
    created = cli(ns_url, "topic", "create", IDLE_TOPIC, "--queues", "2")
    assert created.returncode == 0, created.stderr
    wait_for(lambda: IDLE_TOPIC in carried_topics(ns_url), 20, f"{IDLE_TOPIC} carried")

    async def flood() -> tuple[list[v2.Status], list[v2.Status], tuple[list[int], int], v2.Status]:
        first = grpc.aio.insecure_channel(endpoint, options=[("grpc.use_local_subchannel_pool", 1)])
        second = grpc.aio.insecure_channel(endpoint, options=[("grpc.use_local_subchannel_pool", 1)])
        polls = open_polls(first, flooder, POLLS)
        over_connection = await refusals(polls, POLLS - PER_CONNECTION)
        more = open_polls(second, flooder, POLLS)
        over_principal = await refusals(more, POLLS - (PER_PRINCIPAL - PER_CONNECTION))
        others = await sends_and_receives(endpoint, payments)
        held = [task for task in polls + more if not task.done()]
        assert len(held) == PER_PRINCIPAL, "a held poll ended before the others were served"
        for channel in (first, second):
            await channel.close()  # the held polls end: their budget comes back
        await asyncio.gather(*held, return_exceptions=True)
        async with grpc.aio.insecure_channel(endpoint) as channel:
            again = await first_status(service_pb2_grpc.MessagingServiceStub(channel).ReceiveMessage(
                receive_request("GID_FLOOD", IDLE_TOPIC, 1), metadata=signed(flooder, "flood-again@1@0@x"),
                timeout=10))
        return over_connection, over_principal, others, again

    over_connection, over_principal, (sent, received), again = asyncio.run(flood())
    for refused, budget in ((over_connection, "receives_per_connection"), (over_principal, "receives_per_principal")):
        assert {v2.Code.Name(s.code) for s in refused} == {"TOO_MANY_REQUESTS"}, refused
        assert all(budget in s.message and f"GRAYMQ_BROKER_GRPC_MAX_{budget.upper()}" in s.message for s in refused), \
            refused
    assert sent == [v2.OK] * SENDS
    assert received == SENDS
    assert v2.Code.Name(again.code) == "MESSAGE_NOT_FOUND", again  # admitted once the held polls ended
    metrics = scrape(f"http://{broker.ready_info['metrics']}/metrics")  # type: ignore[index]
    over_budget = "graymq_broker_grpc_over_budget_total"
    assert metrics.value(over_budget, budget="receives_per_connection") == POLLS - PER_CONNECTION
    assert metrics.value(over_budget, budget="receives_per_principal") == POLLS - (PER_PRINCIPAL - PER_CONNECTION)
