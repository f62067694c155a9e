"""``make demo``: a local cluster (name server on SQLite + one broker) and a scripted gray release.

v1 (normal) and v2 (gray) consumers share one consumer group; normal and gray producers send
orders; the status table shows who holds which queue; ``promote`` drains the gray queues and
flips v2 to normal while producers keep sending; the final table shows who consumed what from
which queue, and the counts of lost and duplicated messages.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from graymq.client import ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from graymq.gray_controller.cli.common import READY_PREFIX, table
from graymq.gray_controller.cli.text import format_timings
from graymq.nameserver_api.client import NameServerClient
from graymq.runbooks.cutover import CutoverRunner
from graymq.runbooks.group_state import GroupInspector
from graymq.runbooks.policy import CutoverPolicy

GROUP = "ORDER_GROUP"
TOPIC = "TOPIC_V_ORDER"
FAST = dict(rebalance_interval_s=1.0, heartbeat_interval_s=0.5, nameserver_interval_s=0.3, long_poll_s=1.0,
            persist_interval_s=0.2, drain_poll_s=0.1)


def say(text: str) -> None:
    print(f"\n== {text}", flush=True)


def start_cluster(data: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", GRAYMQ_BROKER_REGISTER_INTERVAL_S="0.5",
               GRAYMQ_LOG_LEVEL="WARNING")
    proc = subprocess.Popen(
        [sys.executable, "-m", "graymq.gray_controller.cli", "up", "--data", str(data), "--nameserver-port", "0",
         "--broker-port", "0"], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    for line in proc.stdout:
        if line.startswith(READY_PREFIX):
            return proc, json.loads(line[len(READY_PREFIX):])
        if time.monotonic() > deadline:
            break
    proc.kill()
    raise SystemExit("the local cluster did not start")


class Ledger:
    """Who consumed which message from which queue."""

    def __init__(self) -> None:
        self.consumed: list[tuple[str, MessageExt]] = []

    def listener(self, client_id: str):  # type: ignore[no-untyped-def]
        async def on_messages(messages: list[MessageExt]) -> ConsumeStatus:
            for m in messages:
                await asyncio.sleep(0.01)  # some work per order
                self.consumed.append((client_id, m))
            return ConsumeStatus.CONSUME_SUCCESS

        return on_messages


async def status_table(inspector: GroupInspector) -> None:
    status = await inspector.status(GROUP)
    rows = [[c.client_id, c.role, c.labels.get("version", ""), "gray" if c.gray else "normal", c.state,
             " ".join(q.split(":")[-1] for q in c.queues if TOPIC in q)] for c in status.clients]
    print(table(rows, ["client", "role", "version", "flag", "state", f"{TOPIC} queues"]))
    print(f"gray backlog: {status.gray_backlog}")


async def create_topic(ns: NameServerClient) -> None:
    """The demo topic and its gray rule, usable once a broker serves its route."""
    say(f"topic {TOPIC}: 6 queues, 2 gray (0 and 5); rule: clients labelled version=v2 are gray")
    await ns.put_topic(TOPIC, 6, 2)
    await ns.add_rule(GROUP, {"version": "v2"}, True)
    while True:
        try:
            route = await ns.get_route(TOPIC)
            if route.brokers:
                break
        except Exception:
            await asyncio.sleep(0.2)
    await asyncio.sleep(0.8)


async def start_clients(ns_url: str, ledger: Ledger) -> tuple[list[PushConsumer], dict[str, Producer]]:
    """Two v1 and two v2 consumers in one group, a v1 and a v2 producer; returns once the queues are shared out."""
    consumers = []
    for client_id, version in (("v1-a", "v1"), ("v1-b", "v1"), ("v2-a", "v2"), ("v2-b", "v2")):
        c = PushConsumer(GROUP, ns_url, listener=ledger.listener(client_id), client_id=client_id,
                         labels={"version": version}, consume_from="first", **FAST)  # type: ignore[arg-type]
        c.subscribe(TOPIC, "*")
        consumers.append(c)
        await c.start()
    producers = {v: Producer(GROUP, ns_url, client_id=f"producer-{v}", labels={"version": v},
                             heartbeat_interval_s=0.3) for v in ("v1", "v2")}
    for p in producers.values():
        await p.start()
    deadline = time.monotonic() + 20
    while sorted(len(c.assigned()) for c in consumers) != [1, 1, 2, 2] and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return consumers, producers


class Orders:
    """Orders sent continuously by each producer until ``stop``; ``sent``: msg_id -> (producer, queue id, gray)."""

    def __init__(self, producers: dict[str, Producer]) -> None:
        self.sent: dict[str, tuple[str, int, bool]] = {}
        self._stopping = asyncio.Event()
        self._senders = [asyncio.create_task(self._send(p, v)) for v, p in producers.items()]

    async def _send(self, producer: Producer, version: str) -> None:
        n = 0
        while not self._stopping.is_set():
            n += 1
            result = await producer.send(Message(TOPIC, f"order-{version}-{n}".encode(), tags=version))
            self.sent[result.msg_id] = (version, result.queue.queue_id, result.gray)
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        self._stopping.set()
        await asyncio.gather(*self._senders)


def summary(ledger: Ledger, sent: dict[str, tuple[str, int, bool]]) -> bool:
    """Print who consumed what from which queue, and the counts; whether nothing was lost or consumed by v1
    from the gray side."""
    per_client: dict[str, Counter[str]] = defaultdict(Counter)
    queues: dict[str, set[int]] = defaultdict(set)
    for client_id, m in ledger.consumed:
        per_client[client_id]["gray" if m.gray else "normal"] += 1
        queues[client_id].add(m.queue_id)
    rows = [[cid, per_client[cid]["gray"], per_client[cid]["normal"], " ".join(map(str, sorted(queues[cid])))]
            for cid in sorted(per_client)]
    print(table(rows, ["client", "gray msgs", "normal msgs", "queues"]))
    consumed_ids = Counter(m.msg_id for _, m in ledger.consumed)
    lost = set(sent) - set(consumed_ids)
    duplicates = sum(n - 1 for n in consumed_ids.values() if n > 1)
    wrong = sum(1 for cid, m in ledger.consumed if m.gray and cid.startswith("v1"))
    print(f"\nsent {len(sent)}, consumed {len(consumed_ids)} distinct, lost {len(lost)}, duplicates {duplicates}, "
          f"gray messages consumed by v1: {wrong}")
    return not lost and not wrong


async def release(ns_url: str) -> int:
    ns = NameServerClient(ns_url, admin_token="dev-token")
    inspector = GroupInspector(ns)
    ledger = Ledger()
    await create_topic(ns)
    consumers, producers = await start_clients(ns_url, ledger)
    say("v1 (normal) and v2 (gray) consumers in one group")
    await status_table(inspector)

    say("both producers send orders continuously")
    orders = Orders(producers)
    sent = orders.sent
    await asyncio.sleep(2.0)
    print(f"sent so far: {sum(1 for s in sent.values() if s[2])} gray, {sum(1 for s in sent.values() if not s[2])} "
          "normal")
    await status_table(inspector)

    say("promote: flip producers, drain the gray queues, flip v2 consumers, verify")
    runner = CutoverRunner(ns, GROUP, CutoverPolicy((GROUP,), timeout_s=60))
    report = await runner.promote()
    await runner.close()
    print(f"promote #{report.operation_id} {report.state}: {format_timings(report.timings_s)}")
    await asyncio.sleep(2.0)
    await orders.stop()
    deadline = time.monotonic() + 20
    while set(sent) - {m.msg_id for _, m in ledger.consumed} and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    say("after promote: every client normal, gray queues empty and unassigned")
    await status_table(inspector)

    for c in consumers:
        await c.stop()
    for p in producers.values():
        await p.stop()
    await inspector.close()
    await ns.close()

    say("who consumed what from which queue")
    clean = summary(ledger, sent)
    return 0 if clean and report.state == "SUCCEEDED" else 1


def main() -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="graymq-demo-") as tmp:
        say(f"starting a local cluster (graymq up) in {tmp}")
        proc, info = start_cluster(Path(tmp))
        print(f"name server {info['nameserver']}, broker {info['broker']}")
        try:
            code = asyncio.run(release(info["nameserver"]))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    print(f"\ndemo finished in {time.monotonic() - started:.1f}s: {'OK' if code == 0 else 'FAILED'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
