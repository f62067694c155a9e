"""Drive the stock RocketMQ 5 Python SDK (``rocketmq-python-client``) in a process of its own.

The SDK's generated modules and graymq's register the same ``apache/rocketmq/v2`` protos, so they cannot share a
process: the tests run this script. Argument: a JSON spec ``{"endpoint", "ak", "sk", "tls", "topic", "messages"}``,
each message ``{"body", "tag", "keys", "properties", "group"}`` or ``{"pause": true}``. Prints ``{"client_id"}``
once started, then one JSON line per message, ``{"message_id", "offset"}`` or ``{"error"}``, and
``{"paused": true}`` at a pause (it goes on after a line on stdin); exits 0 (1 when the producer cannot start: the
reason on the last line).
"""

from __future__ import annotations

import json
import sys


def main(spec: dict) -> int:
    from rocketmq import ClientConfiguration, Credentials, Message, Producer
    from rocketmq.v5.util.misc import Misc

    # The SDK finds its address with a UDP connect to a public address: a test machine may have no route.
    Misc.get_local_ip = staticmethod(lambda: "127.0.0.1")
    config = ClientConfiguration(spec["endpoint"], Credentials(spec.get("ak", ""), spec.get("sk", "")),
                                 request_timeout=5)
    producer = Producer(config, (spec["topic"],), tls_enable=spec.get("tls", False))
    try:
        producer.startup()
    except Exception as exc:  # the reason is the test's to check
        print(json.dumps({"startup_error": str(exc)}), flush=True)
        return 1
    print(json.dumps({"client_id": producer.client_id}), flush=True)
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
    finally:
        producer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
