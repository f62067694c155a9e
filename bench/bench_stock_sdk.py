"""Stock RocketMQ 5 clients against graymq (issue 27): the Python SDK (``rocketmq-python-client``) on the broker's
gRPC endpoint, beside graymq's own client on the broker port, one name server (SQLite) and one broker.

- send: awaited single sends, each awaited before the next (SDK ``Producer.send``, graymq ``Producer.send`` with
  ``auto_batch=False``); SDK ``send_async`` with 64 outstanding;
- receive: the SDK's ``SimpleConsumer`` receiving 32 at a time and acking each message (one AckMessage a message,
  as the SDK does), against graymq's ``PushConsumer`` pulling 64 at a time; rates from the first message to the last.

The SDK runs in a process of its own (its generated protos and graymq's cannot share one):
``python -m graymq.bench.bench_stock_sdk --sdk send|receive ...`` prints its figures as one JSON line.

    python -m graymq.bench.bench_stock_sdk [--count N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from graymq.bench.common import BATCH, Figures, payload

QUEUES = 8
SDK_IN_FLIGHT = 64
SDK_RECEIVE_BATCH = 32


# ---------------------------------------------------------------- the SDK's side (its own process)

def _sdk_config(endpoint: str) -> Any:
    from rocketmq import ClientConfiguration, Credentials
    from rocketmq.v5.util.misc import Misc

    Misc.get_local_ip = staticmethod(lambda: "127.0.0.1")  # it would UDP-connect to a public address
    return ClientConfiguration(endpoint, Credentials("", ""), request_timeout=10)


def sdk_send(endpoint: str, topic: str, count: int) -> Figures:
    """The SDK producer's awaited sends and ``send_async`` with ``SDK_IN_FLIGHT`` outstanding, msg/s."""
    from rocketmq import Message, Producer

    def message(seq: int) -> Message:
        built = Message()
        built.topic, built.body = topic, payload(seq)
        return built

    producer = Producer(_sdk_config(endpoint), (topic,))
    producer.startup()
    try:
        producer.send(message(count))  # warm-up: route, channel
        began = time.perf_counter()
        for seq in range(count):
            producer.send(message(seq))
        awaited = time.perf_counter() - began
        began = time.perf_counter()
        for first in range(0, count, SDK_IN_FLIGHT):
            for future in [producer.send_async(message(seq)) for seq in range(first, min(first + SDK_IN_FLIGHT,
                                                                                          count))]:
                future.result(timeout=60)
        pipelined = time.perf_counter() - began
    finally:
        producer.shutdown()
    return {"send_msgs_s": round(count / awaited), "send_async_msgs_s": round(count / pipelined)}


def sdk_receive(endpoint: str, topic: str, group: str, count: int, timeout_s: float = 300) -> Figures:
    """The SDK's simple consumer: prints ``{"ready": true}`` once started, then receives and acks ``count``."""
    from rocketmq import FilterExpression, SimpleConsumer

    consumer = SimpleConsumer(_sdk_config(endpoint), group, {topic: FilterExpression("*")}, await_duration=5)
    consumer.startup()
    print(json.dumps({"ready": True}), flush=True)
    received, first_at = 0, 0.0
    deadline = time.monotonic() + timeout_s
    try:
        while received < count and time.monotonic() < deadline:
            for message in consumer.receive(SDK_RECEIVE_BATCH, 30):
                first_at = first_at or time.perf_counter()
                consumer.ack(message)
                received += 1
    finally:
        consumer.shutdown()
    if received < count:
        return {"error": f"received {received} of {count} in {timeout_s:.0f} s"}
    return {"receive_ack_msgs_s": round(count / (time.perf_counter() - first_at))}


# ---------------------------------------------------------------- graymq's side

def _sdk_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "graymq.bench.bench_stock_sdk", "--sdk", *args]


def _last_json(output: str) -> Figures:
    lines = [line for line in output.splitlines() if line.startswith("{")]
    return dict(json.loads(lines[-1])) if lines else {"error": "the SDK process printed no figures"}


async def graymq_sends(ns_url: str, topic: str, count: int) -> float:
    """graymq's producer, awaited single sends: msg/s."""
    from graymq.client import Message, Producer

    producer = Producer("GID_STOCK_BENCH", ns_url, auto_batch=False)
    await producer.start()
    try:
        await producer.send(Message(topic, payload(count)))  # warm-up
        began = time.perf_counter()
        for seq in range(count):
            await producer.send(Message(topic, payload(seq)))
        return count / (time.perf_counter() - began)
    finally:
        await producer.stop()


async def graymq_batches(ns_url: str, topic: str, count: int) -> None:
    from graymq.client import Message, Producer

    producer = Producer("GID_STOCK_BENCH", ns_url)
    await producer.start()
    try:
        for first in range(0, count, BATCH):
            await producer.send_batch([Message(topic, payload(seq)) for seq in range(first, min(first + BATCH,
                                                                                                  count))])
    finally:
        await producer.stop()


def sdk_receive_case(ns_url: str, endpoint: str, topic: str, count: int) -> Figures:
    """The SDK consumer started first (so it sees every message whatever a new group's start), then ``count``
    messages sent in batches by graymq's producer, then its rate."""
    import asyncio

    child = subprocess.Popen(_sdk_command("receive", "--endpoint", endpoint, "--topic", topic, "--count",
                                          str(count)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stderr is not None
        started = child.stdout.readline()
        if "ready" not in started:
            return {"error": f"the SDK consumer did not start: {started.strip()} {child.stderr.read()[-300:]}"}
        asyncio.run(graymq_batches(ns_url, topic, count))
        output, _ = child.communicate(timeout=400)
        return _last_json(output)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def run(count: int) -> dict[str, Figures]:
    """One name server and one broker with its gRPC endpoint; graymq's client, then the SDK."""
    import asyncio

    from graymq.bench import bench_client
    from graymq.bench.graymq_servers import Broker, NameServer, create_topic

    with tempfile.TemporaryDirectory() as tmp, NameServer(Path(tmp) / "ns", Path(tmp)).wait_ready() as ns:
        broker = Broker("broker-a", Path(tmp) / "broker-a", Path(tmp), nameserver=ns.url, grpc=True).wait_ready()
        try:
            async def topics() -> None:
                admin = ns.admin()
                try:
                    for topic in ("STOCK_SEND", "STOCK_RECEIVE"):
                        await create_topic(admin, topic, QUEUES, 0, {"broker-a"})
                finally:
                    await admin.close()

            asyncio.run(topics())
            ours: Figures = {"send_msgs_s": round(asyncio.run(graymq_sends(ns.url, "STOCK_SEND", count)))}
            consumed_s = asyncio.run(bench_client.consume(ns.url, "STOCK_SEND", "GID_STOCK_BENCH_PUSH", count))
            ours["consume_msgs_s"] = round(count / consumed_s)
            sent = subprocess.run(_sdk_command("send", "--endpoint", broker.grpc_address, "--topic", "STOCK_SEND",
                                               "--count", str(count)), capture_output=True, text=True, timeout=600)
            sdk = _last_json(sent.stdout) if sent.returncode == 0 else {"error": sent.stderr.strip()[-300:]}
            received = sdk_receive_case(ns.url, broker.grpc_address, "STOCK_RECEIVE", count)
            sdk["receive_ack_msgs_s"] = received.get("receive_ack_msgs_s", f"failed: {received.get('error')}")
        finally:
            broker.stop()
    return {"graymq client (broker port)": ours, "stock Python SDK (gRPC)": sdk}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--sdk", choices=("send", "receive"))
    parser.add_argument("--endpoint")
    parser.add_argument("--topic")
    args = parser.parse_args()
    if args.sdk == "send":
        print(json.dumps(sdk_send(args.endpoint, args.topic, args.count)))
    elif args.sdk == "receive":
        print(json.dumps(sdk_receive(args.endpoint, args.topic, "GID_STOCK_BENCH_SDK", args.count)))
    else:
        for label, figures in run(args.count).items():
            print(f"{label:30} " + "  ".join(f"{k} {v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
