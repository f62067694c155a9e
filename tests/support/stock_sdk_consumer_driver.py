"""Drive the stock RocketMQ 5 Python SDK's SimpleConsumer one command at a time, in a process of its own.

Argument: a JSON spec ``{"endpoint", "ak", "sk", "tls", "group", "topic", "tags", "await"}``. Prints
``{"client_id"}`` once started (``{"startup_error"}`` and exit 1 when it cannot start), then answers each JSON
command line on stdin with one JSON line (``{"error"}`` when the SDK raised):

- ``{"receive": n, "invisible": s, "ack": bool}`` -> ``{"messages": [...]}`` (each acked at once when ``ack``,
  else held for the commands below);
- ``{"ack": message_id}`` -> ``{"acked": message_id}``;
- ``{"change_invisible": message_id, "invisible": s}`` -> ``{"changed": message_id}``.

An empty line or the end of stdin shuts the consumer down.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def received(message: Any) -> dict[str, Any]:
    return {"message_id": message.message_id, "body": message.body.decode(), "tag": message.tag,
            "keys": sorted(message.keys), "properties": dict(message.properties), "attempt": message.delivery_attempt,
            "group": message.message_group, "corrupted": message.corrupted}


def run_command(consumer: Any, command: dict[str, Any], held: dict[str, Any]) -> dict[str, Any]:
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


def main(spec: dict[str, Any]) -> int:
    from rocketmq import FilterExpression, SimpleConsumer
    from stock_sdk_driver import configuration, started  # beside this script: run as one, its folder is on the path

    subscription = {spec["topic"]: FilterExpression(spec.get("tags", "*"))}
    consumer = SimpleConsumer(configuration(spec), spec["group"], subscription, await_duration=spec.get("await", 2),
                              tls_enable=spec.get("tls", False))
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
    sys.exit(main(json.loads(sys.argv[1])))
