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

An empty line or the end of stdin shuts the consumer down. ``"request_timeout"`` (seconds, 5 by default) is the
SDK's: a receive's deadline is it plus the consumer's ``await``.

With ``"push": {"group", "topic", "tags", "hold": {body: seconds}, "block": [body, ...]}`` it runs a PushConsumer
(the SDK receives with ``auto_renew`` and leaves renewing to the broker): ``{"client_id"}`` once started, then per
message its listener gets ``{"received": body, "message_id", "attempt", "lane"}``; it holds a body of ``hold`` that
long and one of ``block`` for ever, then consumes it (the SDK acks it) and prints ``{"consumed": body}``. A line on
stdin shuts it down.

With ``"relay": {"group", "topic", "to", "name"}`` it is a stock relay service, as a user writes one: a
SimpleConsumer of ``topic`` sending each message on to ``to`` with a Producer, then acking it. What it sends carries
the body, the keys (the message id when it had none), the ``graymq.lane`` property the broker delivered it with (the
lane it was delivered in) and the trace context: the relay's own span (OpenTelemetry, a child of the message's
``traceparent``, ``graymq.lane`` on it) is injected in its place. One JSON line per message relayed: ``{"relayed"``
(its first key), ``"relay", "lane", "attempt"`` (its delivery attempt), ``"at"`` (when, epoch seconds), ``"trace_id",
"span_id", "parent_id"}`` (or ``{"error"}``); any line on stdin stops it.
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
                               request_timeout=spec.get("request_timeout", 5))


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


def relayed_span(tracer: Any, name: str, properties: dict[str, str]) -> tuple[Any, dict[str, str]]:
    """The relay's span of a message with ``properties`` (its parent from their ``traceparent``, ``graymq.lane``
    on it) and the properties to send on: the lane and the span's own trace context."""
    from opentelemetry import propagate, trace

    lane = properties.get("graymq.lane")
    span = tracer.start_span(name, context=propagate.extract(properties),
                             attributes={"graymq.lane": lane} if lane else {})
    carrier: dict[str, str] = {} if lane is None else {"graymq.lane": lane}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    return span, carrier


def relay_one(producer: Any, tracer: Any, options: dict[str, Any], received_message: Any) -> dict[str, Any]:
    from rocketmq import Message

    span, properties = relayed_span(tracer, f"relay {options['topic']}", dict(received_message.properties))
    try:
        message = Message()
        message.topic = options["to"]
        message.body = received_message.body
        keys = sorted(received_message.keys) or [received_message.message_id]
        type(message).keys.fset(message, *keys)  # the SDK keeps keys as a set: their order is lost
        for key, value in properties.items():
            message.add_property(key, value)
        producer.send(message)
    finally:
        span.end()
    context, parent = span.get_span_context(), span.parent
    return {"relayed": keys[0], "relay": options["name"], "lane": properties.get("graymq.lane"),
            "attempt": received_message.delivery_attempt, "at": time.time(),
            "trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}",
            "parent_id": f"{parent.span_id:016x}" if parent else None}


def relay(spec: dict) -> int:
    import threading

    from opentelemetry.sdk.trace import TracerProvider
    from rocketmq import FilterExpression, Producer, SimpleConsumer

    options = spec["relay"]
    consumer = SimpleConsumer(configuration(spec), options["group"], {options["topic"]: FilterExpression("*")},
                              await_duration=options.get("await", 2))
    producer = Producer(configuration(spec), (options["to"],))
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    tracer = TracerProvider().get_tracer("stock-relay")
    producer.startup()
    if not started(consumer):
        return 1
    try:
        while not stop.is_set():
            try:
                for message in consumer.receive(32, 30) or []:
                    print(json.dumps(relay_one(producer, tracer, options, message)), flush=True)
                    consumer.ack(message)
            except Exception as exc:  # the test counts them
                print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
    finally:
        consumer.shutdown()
        producer.shutdown()
    return 0


def push(spec: dict) -> int:
    import threading

    from rocketmq import ConsumeResult, FilterExpression, MessageListener, PushConsumer

    options = spec["push"]
    printing = threading.Lock()

    def say(line: dict[str, Any]) -> None:
        with printing:
            print(json.dumps(line), flush=True)

    class Listener(MessageListener):
        def consume(self, message: Any) -> Any:
            body = message.body.decode()
            say({"received": body, "message_id": message.message_id, "attempt": message.delivery_attempt,
                 "lane": dict(message.properties).get("graymq.lane")})
            if body in options.get("block", ()):
                threading.Event().wait()
            time.sleep(options.get("hold", {}).get(body, 0))
            say({"consumed": body})
            return ConsumeResult.SUCCESS

    consumer = PushConsumer(configuration(spec), options["group"], Listener(),
                            {options["topic"]: FilterExpression(options.get("tags", "*"))})
    if not started(consumer):
        return 1
    try:
        sys.stdin.readline()
    finally:
        consumer.shutdown()
    return 0


if __name__ == "__main__":
    arguments = json.loads(sys.argv[1])
    modes = {"consume": consume, "relay": relay, "push": push}
    mode = next((run for key, run in modes.items() if key in arguments), main)
    sys.exit(mode(arguments))
