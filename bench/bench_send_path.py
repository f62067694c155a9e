"""The broker's send path in one process: ``SendProcessor.send`` (SEND_MESSAGE) and ``send_batch`` (SEND_BATCH of
64) on a real store, async flush, no sockets and no frames; CPU µs a request and a message, min of windows (CPU
time moves least with the load of a shared machine).

    .venv/bin/python -m graymq.bench.bench_send_path [--properties N] [--windows W]
    GRAYMQ_PURE=1 .venv/bin/python -m graymq.bench.bench_send_path      (the pure hot path)

Messages: 1 KiB bodies, a tag, a key and N user properties (default 4), as a producer sends them. The figure
shows what a change of the path costs per message (the property check of protocol/properties.py was measured
with it); the frame and request parse around it are not included.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from graymq.broker_ext.broker_controller import BrokerController
from graymq.broker_ext.config import BrokerSettings
from graymq.protocol import graymq_pb2 as pb
from graymq.protocol.native import REASON

BATCH = 64


def _message(seq: int, properties: int) -> pb.Message:
    return pb.Message(topic="BENCH", body=b"x" * 1024, tags="TagA", keys=[f"order-{seq}"],
                      properties={f"prop-{i}": f"value-{i}-{seq}" for i in range(properties)})


def _window(call: object, requests: int) -> float:
    started = time.process_time()
    for _ in range(requests):
        call()  # type: ignore[operator]
    return time.process_time() - started


async def _measure(store: Path, properties: int, windows: int, requests: int) -> tuple[float, float]:
    settings = BrokerSettings(store_dir=store, dev_mode=True, auto_create_topic=True)
    broker = BrokerController(settings)
    broker.load()
    await broker.start()
    try:
        broker.topics.ensure("BENCH", 1, 0)
        processor = broker.send_processor
        single = pb.SendRequest(producer_group="pg", queue_id=0, message=_message(0, properties))
        batch = pb.SendBatchRequest(producer_group="pg", topic="BENCH", queue_id=0,
                                    messages=[_message(i, properties) for i in range(BATCH)])
        raw = batch.SerializeToString()

        def send() -> None:
            single.message.msg_id = ""
            processor.send(single)

        def send_batch() -> None:
            processor.send_batch(pb.SendBatchRequest.FromString(raw), raw)

        best_single = min(_window(send, requests) for _ in range(windows)) / requests
        best_batch = min(_window(send_batch, requests // 20) for _ in range(windows)) / (requests // 20) / BATCH
        return best_single * 1e6, best_batch * 1e6
    finally:
        await broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--properties", type=int, default=4, help="user properties a message (default 4)")
    parser.add_argument("--windows", type=int, default=15, help="windows, the best one counts (default 15)")
    parser.add_argument("--requests", type=int, default=2000, help="SEND_MESSAGE requests a window (default 2000)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="graymq-bench-send-") as store:
        single, batch = asyncio.run(_measure(Path(store), args.properties, args.windows, args.requests))
    print(f"{REASON}; {args.properties} user properties: SEND_MESSAGE {single:.2f} CPU us a request, "
          f"SEND_BATCH of {BATCH} {batch:.2f} CPU us a message")


if __name__ == "__main__":
    main()
