"""A hostile stock client for the gRPC budget tests: one process, one principal, many Telemetry streams.

``python -m tests.support.grpc_flood ENDPOINT TOKEN TOPIC STREAMS [PER_CONNECTION]`` opens ``STREAMS`` Telemetry
streams, each under another client id and with producer settings for ``TOPIC``, ``PER_CONNECTION`` of them on one
channel (a connection). Once every stream had its first answer (or 60 s passed) it prints one JSON line — the
answers' status codes counted, ``no_answer``, ``seconds`` — then holds the streams until its stdin closes.
Signed as the SDKs sign, with ``TOKEN`` as both access key and secret key.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from datetime import UTC, datetime

import grpc

from graymq.broker_ext.grpc_endpoint.credentials import DATE_TIME_FORMAT, signature
from graymq.protocol.rocketmq_v2 import definition_pb2 as v2
from graymq.protocol.rocketmq_v2 import service_pb2 as v2s
from graymq.protocol.rocketmq_v2 import service_pb2_grpc

ANSWER_S = 60.0


def signed(token: str, client_id: str) -> list[tuple[str, str]]:
    """Metadata as the SDKs sign it, ``token`` as access key and secret key."""
    date_time = datetime.now(UTC).strftime(DATE_TIME_FORMAT)
    return [("x-mq-client-id", client_id), ("x-mq-date-time", date_time),
            ("authorization", f"MQv2-HMAC-SHA1 Credential={token}, SignedHeaders=x-mq-date-time, "
                              f"Signature={signature(token, date_time)}")]


def producer_settings(topic: str) -> v2s.TelemetryCommand:
    return v2s.TelemetryCommand(settings=v2.Settings(
        client_type=v2.PRODUCER, publishing=v2.Publishing(topics=[v2.Resource(name=topic)])))


async def flood(endpoint: str, token: str, topic: str, streams: int, per_connection: int) -> None:
    # a local subchannel pool each: channels of one process to one target otherwise share a connection
    channels = [grpc.aio.insecure_channel(endpoint, options=[("grpc.use_local_subchannel_pool", 1)])
                for _ in range(-(-streams // per_connection))]
    stubs = [service_pb2_grpc.MessagingServiceStub(channel) for channel in channels]
    answers: Counter[str] = Counter()
    calls = []
    started = time.monotonic()

    async def one(i: int) -> None:
        call = stubs[i // per_connection].Telemetry(metadata=signed(token, f"flood-{i}@1@0@x"))
        calls.append(call)
        try:
            await call.write(producer_settings(topic))
        except grpc.aio.AioRpcError:
            pass  # answered and ended already (a refusal): its answer is read below
        try:
            first = await asyncio.wait_for(call.read(), ANSWER_S - (time.monotonic() - started))
        except TimeoutError:
            answers["no_answer"] += 1
            return
        except grpc.aio.AioRpcError as failed:  # the stream failed: by its gRPC status code
            answers[f"grpc_{failed.code().name}"] += 1
            if not answers.get(f"detail_{failed.code().name}"):
                print(failed.details(), file=sys.stderr)
                answers[f"detail_{failed.code().name}"] = 1
            return
        if first is grpc.aio.EOF:
            answers["no_answer"] += 1
        else:
            answers[v2.Code.Name(first.status.code)] += 1

    await asyncio.gather(*(one(i) for i in range(streams)))
    print(json.dumps({**answers, "seconds": round(time.monotonic() - started, 2)}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # held until the test closes stdin
    for call in calls:
        call.cancel()
    for channel in channels:
        await channel.close()


if __name__ == "__main__":
    endpoint, token, topic, count = sys.argv[1:5]
    asyncio.run(flood(endpoint, token, topic, int(count), int(sys.argv[5]) if len(sys.argv) > 5 else 50))
