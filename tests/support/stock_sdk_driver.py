"""Drive the stock RocketMQ 5 Python SDK (``rocketmq-python-client``) in a process of its own.

The SDK's generated modules and graymq's register the same ``apache/rocketmq/v2`` protos, so they cannot share a
process: the tests run this script. Argument: a JSON spec ``{"endpoint", "ak", "sk", "tls", "topic", "messages"}``,
each message ``{"body", "tag", "keys", "properties", "group", "deliver_in_s"}`` or ``{"pause": true}``. Prints
``{"client_id"}`` once started, then one JSON line per message, ``{"message_id", "offset"}`` (with the
``delivery_timestamp`` in ms given a ``deliver_in_s``) or ``{"error"}``, and
``{"paused": true}`` at a pause (it goes on after a line on stdin); exits 0 (1 when the producer cannot start: the
reason on the last line). ``"interval_s"`` paces the sends.

With ``"consume": {"group", "topic", "tags", "await"}`` in place of the messages it runs a SimpleConsumer:
``{"client_id"}`` once started, then one JSON line answering each JSON command line on stdin (``{"error"}`` when the
SDK raised):

- ``{"receive": n, "invisible": s, "ack": bool}`` -> ``{"messages": [...]}`` (each acked at once when ``ack``,
  else held for the commands below);
- ``{"ack": message_id}`` -> ``{"acked": message_id}``;
- ``{"change_invisible": message_id, "invisible": s}`` -> ``{"changed": message_id}``.

An empty line or the end of stdin shuts the consumer down.
"""

from __future__ import annotations

import json
import sys
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
            if "deliver_in_s" in item:  # ms since the epoch, as the SDK documents it
                message.delivery_timestamp = int((time.time() + item["deliver_in_s"]) * 1000)
            try:
                receipt = producer.send(message)
            except Exception as exc:  # one refused send is the test's to check
                print(json.dumps({"error": str(exc)}), flush=True)
                continue
            result = {"message_id": receipt.message_id, "offset": receipt.offset}
            if message.delivery_timestamp:
                result["delivery_timestamp"] = message.delivery_timestamp
            print(json.dumps(result), flush=True)
            time.sleep(spec.get("interval_s", 0))
    finally:
        producer.shutdown()
    return 0


def received(message: Any) -> dict[str, Any]:
    """A received message as the tests read it."""
    return {"message_id": message.message_id, "body": message.body.decode(), "tag": message.tag,
            "keys": sorted(message.keys), "properties": dict(message.properties), "attempt": message.delivery_attempt,
            "group": message.message_group, "corrupted": message.corrupted}


def run_command(consumer: Any, command: dict[str, Any], held: dict[str, Any]) -> dict[str, Any]:
    """One consumer command's answer (the messages received and not acked are kept in ``held``)."""
    if "receive" in command:
        messages = consumer.receive(command["receive"], command.get("invisible", 10)) or []
        for message in messages:
            held[message.message_id] = message
            if command.get("ack"):
                consumer.ack(message)
        return {"messages": [received(m) for m in messages]}
    if "ack" in command:
        consumer.ack(held[command["ack"]])
        return {"acked": command["ack"]}
    consumer.change_invisible_duration(held[command["change_invisible"]], command["invisible"])
    return {"changed": command["change_invisible"]}


def consume(spec: dict) -> int:
    from rocketmq import FilterExpression, SimpleConsumer

    options = spec["consume"]
    subscription = {options["topic"]: FilterExpression(options.get("tags", "*"))}
    consumer = SimpleConsumer(configuration(spec), options["group"], subscription,
                              await_duration=options.get("await", 2), tls_enable=spec.get("tls", False))
    if not started(consumer):
        return 1
    held: dict[str, Any] = {}
    try:
        for line in sys.stdin:
            if not line.strip():
                break
            try:
                answer = run_command(consumer, json.loads(line), held)
            except Exception as exc:  # a refused call is the test's to check
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            print(json.dumps(answer), flush=True)
    finally:
        consumer.shutdown()
    return 0


if __name__ == "__main__":
    arguments = json.loads(sys.argv[1])
    sys.exit(consume(arguments) if "consume" in arguments else main(arguments))
