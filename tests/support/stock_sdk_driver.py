"""Drive the stock RocketMQ 5 Python SDK (``rocketmq-python-client``) in a process of its own.

The SDK's generated modules and graymq's register the same ``apache/rocketmq/v2`` protos, so they cannot share a
process: the tests run this script. Argument: a JSON spec ``{"endpoint", "ak", "sk", "tls", "topic", "messages"}``,
each message ``{"body", "tag", "keys", "properties", "group"}`` or ``{"pause": true}``. Prints ``{"client_id"}``
once started, then one JSON line per message, ``{"message_id", "offset"}`` or ``{"error"}``, and
``{"paused": true}`` at a pause (it goes on after a line on stdin); exits 0 (1 when the producer cannot start: the
reason on the last line). ``"interval_s"`` paces the sends.

With ``"consume": {"group", "topic", "invisible_s", "ack"}`` in place of the messages it runs a SimpleConsumer:
``{"client_id"}`` once started, then ``{"received", "message_id", "attempt"}`` per message (acked unless ``ack`` is
false), until a line on stdin (or its end) stops it; ``{"stopped": true}`` after its shutdown.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any


def configuration(spec: dict) -> Any:
    """The SDK's client configuration for ``spec``'s endpoint and credentials."""
    from rocketmq import ClientConfiguration, Credentials
    from rocketmq.v5.util.misc import Misc

    # The SDK finds its address with a UDP connect to a public address: a test machine may have no route.
    Misc.get_local_ip = staticmethod(lambda: "127.0.0.1")
    return ClientConfiguration(spec["endpoint"], Credentials(spec.get("ak", ""), spec.get("sk", "")),
                               request_timeout=5)


def started(client: Any) -> bool:
    """Start ``client``; print its ``{"client_id"}``, or ``{"startup_error"}`` and False."""
    try:
        client.startup()
    except Exception as exc:  # the reason is the test's to check
        print(json.dumps({"startup_error": str(exc)}), flush=True)
        return False
    print(json.dumps({"client_id": client.client_id}), flush=True)
    return True


def main(spec: dict) -> int:
    from rocketmq import Message, Producer

    producer = Producer(configuration(spec), (spec["topic"],), tls_enable=spec.get("tls", False))
    if not started(producer):
        return 1
    try:
        for item in spec["messages"]:
            if item.get("pause"):
                print(json.dumps({"paused": True}), flush=True)
                sys.stdin.readline()
                continue
            message = Message()
            message.topic = spec["topic"]
            message.body = item["body"].encode()
            if item.get("tag"):
                message.tag = item["tag"]
            if item.get("keys"):
                type(message).keys.fset(message, *item["keys"])  # a setter of *keys
            for key, value in item.get("properties", {}).items():
                message.add_property(key, value)
            if item.get("group"):
                message.message_group = item["group"]
            try:
                receipt = producer.send(message)
            except Exception as exc:  # one refused send is the test's to check
                print(json.dumps({"error": str(exc)}), flush=True)
                continue
            print(json.dumps({"message_id": receipt.message_id, "offset": receipt.offset}), flush=True)
            time.sleep(spec.get("interval_s", 0))
    finally:
        producer.shutdown()
    return 0


def consume(spec: dict) -> int:
    from rocketmq import FilterExpression, SimpleConsumer

    options = spec["consume"]
    consumer = SimpleConsumer(configuration(spec), options["group"], {options["topic"]: FilterExpression("*")},
                              await_duration=2, tls_enable=spec.get("tls", False))
    if not started(consumer):
        return 1
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    try:
        while not stop.is_set():
            try:
                messages = consumer.receive(32, options.get("invisible_s", 10))
            except Exception as exc:  # a failed receive is retried; the test sees it
                print(json.dumps({"receive_error": str(exc)}), flush=True)
                time.sleep(0.2)
                continue
            for message in messages:
                print(json.dumps({"received": message.body.decode(), "message_id": message.message_id,
                                  "attempt": message.delivery_attempt}), flush=True)
                if options.get("ack", True):
                    consumer.ack(message)
    finally:
        consumer.shutdown()
    print(json.dumps({"stopped": True}), flush=True)
    return 0


if __name__ == "__main__":
    arguments = json.loads(sys.argv[1])
    sys.exit(consume(arguments) if "consume" in arguments else main(arguments))
