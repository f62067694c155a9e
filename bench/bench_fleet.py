"""A fleet of clients on one cluster: ``clients`` producers and consumers over ``processes`` worker processes.

Four fifths of the clients are consumers, the rest producers (registered, idle), a fifth of each gray. One consumer
group is big (500 consumers, or five eighths of the consumers of a smaller fleet) on a 100-queue topic served by both
brokers (200 queues, 20 gray); the other consumers are spread over ``groups - 1`` groups subscribing in turn to that
topic and to another one. A tenth of the clients are stock RocketMQ 5 SDK clients on the brokers' gRPC endpoint
(``fleet_stock``): a tenth of the producers, and simple consumers receiving in groups of their own (about their
share of the groups other than the big one); they run in ``fleet_stock.PODS`` processes of their own, as pods with
host names, and a rule on the host makes the gray fifth gray. The big group's consumers, and
every other graymq client, are graymq push consumers and producers; each worker process gives its clients one
``ClientConfig``, so they share one ``ClientInstance`` as one service's pod would. The name server runs on
PostgreSQL. The worker and pod processes stand for other hosts and run at niceness ``CLIENT_NICE``: on one
2-core machine the servers measured get the CPU first, as on hosts of their own.

Figures: the steady CPU per second of the name server, each broker, the workers and the stock pods once the fleet
converged (heartbeats, watches and idle pulls only), the stock clients the name server lists (and how many of them
gray), the time for a flip of the big group's gray switch to reach every one of its consumers (there and back), the
join and leave convergence of the big group (every queue held by one consumer of its side, evenly spread), and the
peak memory of each server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import multiprocessing as mp
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from graymq.bench.bench_group_scale import GRAY_QUEUES, QUEUES
from graymq.bench.common import Figures, cpu_seconds, serve_group_commands, worker_processes
from graymq.bench.fleet_stock import CLIENT_NICE, GRAY_RULE, STOCK_KINDS, Pod, is_pod_host, stock_pods, stop_pods
from graymq.bench.graymq_servers import Broker, NameServer
from graymq.client.consumer.settings import ConsumerSettings
from graymq.nameserver_api.client import NameServerClient
from graymq.nameserver_api.session import FULL_EVERY
from graymq.protocol.errors import GrayMQError

POLL_S = 0.01
STEADY_S = 20.0  # the steady figures' window
# After the big group converged, before that window: the start's last heartbeats and rebalances, and one whole cycle
# of full heartbeats (each client sends one every FULL_EVERY + 1 beats, the first ones spread over that cycle).
SETTLE_S = (FULL_EVERY + 1) * ConsumerSettings().nameserver_interval_s
TIMEOUT_S = 240.0
QUIET_S = 5.0  # a flip's aftermath is over once no big-group consumer's status changed this long
BIG_GROUP, TOPIC_A, TOPIC_B = "fleet_big", "FleetA", "FleetB"

TITLE = "A fleet of clients: producers and consumers over worker processes, name server on PostgreSQL, two brokers"
LABELS = {  # figure -> its line in RESULTS.md
    "steady_nameserver_cpu_per_s": "steady name server CPU (s per s)",
    "steady_broker_a_cpu_per_s": "steady broker a CPU (s per s)",
    "steady_broker_b_cpu_per_s": "steady broker b CPU (s per s)",
    "steady_heartbeats_stored_per_s": "steady client heartbeats the name server stored (per s)",
    "steady_stock_cpu_per_s": "steady stock SDK pods CPU (s per s)",
    "stock_clients": "stock RocketMQ 5 SDK clients (gRPC) in the fleet",
    "stock_clients_seen": "stock SDK clients the name server listed after the steady window",
    "stock_gray_seen": "of them gray (a rule on their host)",
    "flip_switch_off_to_all_s": "gray switch off → every consumer of the big group (s)",
    "flip_switch_on_to_all_s": "gray switch on → every consumer of the big group (s)",
    "flip_switch_off_converged_s": "gray switch off → the big group converged (s)",
    "flip_switch_on_converged_s": "gray switch on → the big group converged (s)",
    "flip_switch_off_gray_side_s": "gray switch off → no consumer of the big group in the gray lane (s)",
    "flip_switch_on_gray_side_s": "gray switch on → every gray consumer of the big group in the gray lane (s)",
    "flip_switch_off_settled_s": "gray switch off → the big group's status changes no more (s)",
    "converge_after_join_s": "one consumer joins the big group → converged (s)",
    "converge_after_leave_s": "it leaves → converged (s)",
}

Spec = tuple[str, str, str, str, bool]  # (kind, client id, group, topic, gray); kinds: consumer, producer, STOCK_KINDS
Status = dict[str, tuple[str | None, list[str], bool]]  # big group's client id -> (lane, "broker:queue id"s, switch)
BROKERS = ("fleet-a", "fleet-b")
# In dev mode the whole fleet is one principal: the gRPC budgets per principal (sized for one service's pods) are
# raised to the fleet's stock clients (each holds a stream, a client id and a registration on both brokers, a simple
# consumer a long poll), as giving each service a principal of its own would.
STOCK_BUDGETS = {f"GRAYMQ_BROKER_GRPC_MAX_{budget}_PER_PRINCIPAL": "8192"
                 for budget in ("STREAMS", "CLIENT_IDS", "REGISTRATIONS", "RECEIVES")}
# The brokers register (and beat their stock clients' batch) at the default interval, not the other benches' 0.5 s:
# the steady figures are a production fleet's.
BROKER_ENV = {**STOCK_BUDGETS, "GRAYMQ_BROKER_REGISTER_INTERVAL_S": "3.0"}


def fleet_specs(clients: int, groups: int) -> list[Spec]:
    """The fleet's clients: consumers (the big group first) and producers, a tenth of them stock SDK clients, a fifth
    of each kind gray.

    >>> from collections import Counter
    >>> specs = fleet_specs(1000, 10)
    >>> sum(s[2] == BIG_GROUP for s in specs), Counter(s[0] for s in specs)
    (500, Counter({'consumer': 720, 'producer': 180, 'stock_simple': 80, 'stock_producer': 20}))
    >>> len({s[2] for s in specs if s[0] in ("consumer", "stock_simple")})
    10
    """
    consumers = clients * 4 // 5
    big = min(500, consumers * 5 // 8)
    stock_producers = (clients - consumers) // 10
    stock = clients // 10 - stock_producers
    others = max(1, groups - 1)
    stock_groups = 0 if not stock else max(1, min(others - 1, max(2, round(others * stock / max(1, consumers - big)))))
    ours = max(1, others - stock_groups)
    specs: list[Spec] = []
    for i in range(consumers - stock):
        k = 0 if i < big else 1 + (i - big) % ours
        specs.append(("consumer", f"c{i:05d}", BIG_GROUP if k == 0 else f"fleet_g{k}",
                      TOPIC_A if k % 2 == 0 else TOPIC_B, i % 5 == 0))
    for i in range(stock):  # in blocks, so that each group has its gray fifth
        k = i * stock_groups // stock
        specs.append(("stock_simple", f"s{i:05d}", f"fleet_s{k}",
                      TOPIC_A if k % 2 == 0 else TOPIC_B, i % 5 == 0))
    specs += [("producer", f"p{i:05d}", f"fleet_p{i % 10}", "", i % 5 == 0)
              for i in range(clients - consumers - stock_producers)]
    specs += [("stock_producer", f"q{i:05d}", topic, topic, i % 5 == 0)  # its producer group: its topic
              for i, topic in zip(range(stock_producers), [TOPIC_A, TOPIC_B] * stock_producers, strict=False)]
    return specs


def stock_groups(specs: list[Spec]) -> list[str]:
    """The groups of the stock clients (a stock producer's is its topic)."""
    return sorted({s[2] for s in specs if s[0] in STOCK_KINDS})


def _worker(ns_url: str, specs: list[Spec], status_path: str, commands: Any, ready: Any) -> None:
    """Run ``specs``' clients; ``("join", id)`` starts one more consumer of the big group, ``("leave", id)`` stops
    it, ``None`` ends."""
    from graymq.bench.common import consumers_mark, quiet_logs
    from graymq.client import ClientConfig, Producer, PushConsumer

    os.nice(CLIENT_NICE)  # a pod of other hosts (fleet_stock.CLIENT_NICE)

    async def ignore(messages: list[Any]) -> None:
        return None

    async def run() -> None:
        config = ClientConfig.from_env(ns_url)
        big: dict[str, PushConsumer] = {}
        others: list[Any] = []

        def make(spec: Spec) -> Any:
            kind, client_id, group, topic, gray = spec
            if kind == "producer":
                producer = Producer(group, client_id=client_id, gray=gray, config=config)
                others.append(producer)
                return producer
            consumer = PushConsumer(group, listener=ignore, client_id=client_id, gray=gray, config=config)
            consumer.subscribe(topic)
            (big.__setitem__(client_id, consumer) if group == BIG_GROUP else others.append(consumer))
            return consumer

        await asyncio.gather(*(make(spec).start() for spec in specs))
        ready.set()
        await serve_group_commands(lambda: _big_group_status(big), status_path, commands,
                                   lambda cid: make(("consumer", cid, BIG_GROUP, TOPIC_A, False)).start(),
                                   lambda cid: big.pop(cid).stop(), POLL_S, mark=lambda: consumers_mark(big))
        await asyncio.gather(*(c.stop() for c in [*big.values(), *others]), return_exceptions=True)

    with quiet_logs():
        asyncio.run(run())


def _big_group_status(big: dict[str, Any]) -> str:
    """Each consumer of the big group: its lane, the queues of TOPIC_A it holds and the switch it sees."""
    return json.dumps({cid: (c.lane, sorted(f"{mq.broker_name}:{mq.queue_id}" for mq in c.assigned()
                                            if mq.topic == TOPIC_A), c.gray_switch) for cid, c in big.items()})


@contextlib.contextmanager
def _workers(ns_url: str, specs: list[Spec], processes: int, root: Path
             ) -> Iterator[tuple[list[Any], list[Path], list[Any], list[Any]]]:
    ctx = mp.get_context("spawn")
    commands = [ctx.Queue() for _ in range(processes)]
    paths = [root / f"fleet-{p}.json" for p in range(processes)]
    readies = [ctx.Event() for _ in range(processes)]
    procs = [ctx.Process(target=_worker, name=f"fleet-{p}",
                         args=(ns_url, specs[p::processes], str(paths[p]), commands[p], readies[p]))
             for p in range(processes)]
    with worker_processes(procs, commands, 60):
        yield procs, paths, commands, readies


def _status(paths: list[Path]) -> Status:
    status: Status = {}
    for path in paths:
        with contextlib.suppress(OSError, ValueError):
            status.update({cid: (lane, ids, switch)
                           for cid, (lane, ids, switch) in json.loads(path.read_text()).items()})
    return status


def _wait(paths: list[Path], done: Callable[[Status], bool], what: str) -> float:
    return _milestones(paths, {what: done})[what]


def _milestones(paths: list[Path], marks: dict[str, Callable[[Status], bool]]) -> dict[str, float]:
    """When each of ``marks`` (name -> a predicate on the status) first held, watched together."""
    deadline, reached = time.monotonic() + TIMEOUT_S, {}
    while time.monotonic() < deadline:
        status, now = _status(paths), time.monotonic()
        reached.update({name: now for name, done in marks.items() if name not in reached and done(status)})
        if len(reached) == len(marks):
            return reached
        time.sleep(POLL_S)
    raise TimeoutError(f"{', '.join(sorted(set(marks) - set(reached)))}: not reached after {TIMEOUT_S:g}s")


def big_group_converged(status: Status, switch: bool = True) -> bool:
    """Every queue of ``TOPIC_A`` on both brokers held by exactly one consumer of its side (gray queues by gray
    consumers), the totals of each side differing by at most one; with the ``switch`` off, one side of every
    consumer and every queue.

    >>> base = [f"{b}:{q}" for b in BROKERS for q in range(5, 95)]
    >>> gray = [f"{b}:{q}" for b in BROKERS for q in (*range(5), *range(95, 100))]
    >>> big_group_converged({"c1": (None, base, True), "c2": ("gray", gray, True)})
    True
    >>> big_group_converged({"c1": (None, base[1:], True), "c2": ("gray", gray, True)})
    False
    >>> big_group_converged({"c1": (None, base, False), "c2": ("gray", gray, False)}, switch=False)
    False
    >>> big_group_converged({"c1": (None, base[:80] + gray, False), "c2": ("gray", base[80:], False)}, switch=False)
    True
    """
    from graymq.core.queue_layout import slot_queue_ids

    gray_ids = set(slot_queue_ids(QUEUES, GRAY_QUEUES, 1, 0))
    wanted = {side: {f"{b}:{q}" for b in BROKERS for q in range(QUEUES) if (q in gray_ids) == (side == "gray")}
              for side in (None, "gray")}
    if not switch:
        wanted = {None: wanted[None] | wanted["gray"]}
    held: dict[str | None, list[str]] = {side: [] for side in wanted}
    counts: dict[str | None, list[int]] = {side: [] for side in wanted}
    for lane, queues, _ in status.values():
        side = lane if switch else None
        if side not in held:
            return False
        held[side] += queues
        counts[side].append(len(queues))
    return all(len(held[side]) == len(wanted[side]) and set(held[side]) == wanted[side]
               and (not counts[side] or max(counts[side]) - min(counts[side]) <= 1) for side in held)


def _converged(expected: int, switch: bool = True) -> Callable[[Status], bool]:
    return lambda status: len(status) == expected and big_group_converged(status, switch)


def _switched(expected: int, switch: bool) -> Callable[[Status], bool]:
    return lambda status: len(status) == expected and all(s == switch for _, _, s in status.values())


def _laned(expected: int, gray: int) -> Callable[[Status], bool]:
    """Every consumer listed, ``gray`` of them in the gray lane."""
    return lambda status: len(status) == expected and sum(lane == "gray" for lane, _, _ in status.values()) == gray


async def _set_switch(ns: NameServer, enabled: bool) -> float:
    """Set the big group's switch; how long the call took (its answer lists the group: long for a big one)."""
    admin = NameServerClient(ns.url, admin_token=ns.admin_token, timeout_s=TIMEOUT_S)
    began = time.monotonic()
    try:
        await admin.set_switch(BIG_GROUP, enabled, "bench fleet")
        return time.monotonic() - began
    finally:
        await admin.close()


def _flips(ns: NameServer, paths: list[Path], big: int, gray: int) -> Figures:
    """From the switch's call sent to every consumer of the big group seeing it, to its ``gray`` consumers in the
    gray lane (switch on) or none (off), and to the group converged in its new layout, off then on again, each flip
    from a settled group: the switch comes on once no consumer's status changed for ``QUIET_S`` (the off flip's
    layout "converges" at once, every queue held once already, while its 500 consumers still rebalance and report)."""
    figures: Figures = {}
    for enabled in (False, True):
        began = time.monotonic()
        side = "on" if enabled else "off"
        figures[f"flip_switch_{side}_call_s"] = asyncio.run(_set_switch(ns, enabled))
        reached = _milestones(paths, {"to_all": _switched(big, enabled),
                                      "gray_side": _laned(big, gray if enabled else 0),
                                      "converged": _converged(big, enabled)})
        figures.update({f"flip_switch_{side}_{name}_s": at - began for name, at in reached.items()})
        if not enabled:
            figures["flip_switch_off_settled_s"] = _quiet(paths) - began
    return figures


def _quiet(paths: list[Path]) -> float:
    """When the workers' status files last changed, once none has for ``QUIET_S`` (``TIMEOUT_S`` at most)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        changed = max(path.stat().st_mtime for path in paths)
        since = time.time() - changed
        if since >= QUIET_S or time.monotonic() > deadline:
            return time.monotonic() - since
        time.sleep(QUIET_S - since)


def stored_client_rows(db_url: str) -> float:
    """Client rows the name server's database has written so far (inserted or updated: one per heartbeat stored,
    PostgreSQL's table statistics, which a server publishes within a second)."""
    import psycopg
    from sqlalchemy.engine import make_url

    url = make_url(db_url).set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False)) as conn:
        row = conn.execute("SELECT n_tup_ins + n_tup_upd FROM pg_stat_user_tables WHERE relname = 'clients'"
                           ).fetchone()
    return float(row[0]) if row else math.nan


def _steady(sources: dict[str, Callable[[], float]]) -> Figures:
    """Each source's growth per second over ``STEADY_S``, ``SETTLE_S`` after now (a 5 s window right after the
    start's convergence read twice the name server's steady CPU: the start's burst was still going)."""
    time.sleep(SETTLE_S)
    before, began = {k: read() for k, read in sources.items()}, time.monotonic()
    time.sleep(STEADY_S)
    took = time.monotonic() - began
    return {f"steady_{k}_per_s": (read() - before[k]) / took for k, read in sources.items()}


def _join_leave(paths: list[Path], commands: list[Any], big: int) -> Figures:
    figures: Figures = {}
    for phase, command, expected in (("join", ("join", "joiner"), big + 1), ("leave", ("leave", "joiner"), big)):
        began = time.monotonic()
        commands[0].put(command)
        figures[f"converge_after_{phase}_s"] = _wait(paths, _converged(expected), f"after a {phase}") - began
    return figures


async def stock_rules(ns: NameServer, groups: list[str]) -> None:
    """In each of the stock clients' groups, the rule that makes the gray pod's clients gray (switch on)."""
    admin = NameServerClient(ns.url, admin_token=ns.admin_token, timeout_s=TIMEOUT_S)
    try:
        for group in groups:
            await admin.set_switch(group, True, "bench fleet")
            await admin.add_rule(group, GRAY_RULE, True)
    finally:
        await admin.close()


async def stock_listed(ns_url: str, groups: list[str]) -> tuple[int, int]:
    """The stock clients the name server lists live in ``groups``, and how many are gray: those whose host (the first
    part of the SDK's client id, a label the broker gives them) is a pod's."""
    client = NameServerClient(ns_url, timeout_s=TIMEOUT_S)
    try:
        listed = [c for group in groups for c in (await client.group_clients(group)).clients
                  if is_pod_host(c.labels.get("host", "")) and not c.stale]
    finally:
        await client.close()
    return len(listed), sum(c.gray for c in listed)


def _started(readies: list[Any], pods: list[Pod], began: float) -> Figures:
    """Wait for every worker and pod to have started its clients."""
    for ready in readies:
        ready.wait(TIMEOUT_S)
    said = [pod.line(TIMEOUT_S) for pod in pods]
    failed = sorted({reason for s in said for reason in s.get("failed", [s.get("error")]) if reason})
    return {"all_started_s": time.monotonic() - began, "stock_started": sum(s.get("started", 0) for s in said),
            **({"stock_start_errors": "; ".join(failed)[:300]} if failed else {})}


def _stock_seen(ns: NameServer, groups: list[str], expected: int, began: float) -> Figures:
    """How long until the name server listed every stock client (``nan``: not within a minute)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if asyncio.run(stock_listed(ns.url, groups))[0] >= expected:
            return {"stock_all_listed_s": time.monotonic() - began}
        time.sleep(0.5)
    return {"stock_all_listed_s": math.nan}


def _measured(ns: NameServer, paths: list[Path], commands: list[Any], sources: dict[str, Callable[[], float]],
              specs: list[Spec], began: float) -> Figures:
    """Convergence, the stock clients listed, the steady window, then the flips and the join and leave."""
    big = sum(s[2] == BIG_GROUP for s in specs)
    gray = sum(s[2] == BIG_GROUP and s[4] for s in specs)
    figures: Figures = {}
    try:
        figures["start_to_converged_s"] = _wait(paths, _converged(big), "the big group started") - began
    except TimeoutError:  # the steady load (what kept it from converging) and the memory are still shown
        figures["start_to_converged_s"] = math.nan
    groups, stock = stock_groups(specs), sum(s[0] in STOCK_KINDS for s in specs)
    figures.update(_stock_seen(ns, groups, stock, began))
    figures.update(_steady(sources))
    figures["stock_clients_seen"], figures["stock_gray_seen"] = asyncio.run(stock_listed(ns.url, groups))
    if not math.isnan(figures["start_to_converged_s"]):
        for phase, measure in (("flip", lambda: _flips(ns, paths, big, gray)),
                               ("join_leave", lambda: _join_leave(paths, commands, big))):
            try:
                figures.update(measure())
            except (TimeoutError, GrayMQError) as exc:  # shown with the figures measured before
                figures[f"{phase}_error"] = f"{type(exc).__name__}: {exc}"[:200]
    return figures


def _stopped(pods: list[Pod]) -> Figures:
    """Stop the stock pods: the clients they shut down, their simple consumers' failed receives (and the most
    frequent reason of a pod's), and how many pods had to be killed."""
    said = stop_pods(pods, 60)
    reasons = sorted({s["receive_error"] for s in said if "receive_error" in s})
    return {"stock_stopped": sum(s.get("stopped", 0) for s in said),
            "stock_receive_errors": sum(s.get("receive_errors", 0) for s in said),
            **({"stock_receive_error": "; ".join(reasons)[:300]} if reasons else {}),
            "stock_pods_killed": sum("killed" in s for s in said)}


def fleet_case(ns: NameServer, root: Path, log_dir: Path, clients: int = 5000, processes: int = 20,
               groups: int = 50) -> Figures:
    """The figures of one fleet (``ns`` on PostgreSQL; two brokers of its own, with their gRPC endpoint)."""
    specs = fleet_specs(clients, groups)
    ours = [s for s in specs if s[0] not in STOCK_KINDS]
    brokers = {name: Broker(name, root / name, log_dir, nameserver=ns.url, grpc=True, env=BROKER_ENV).wait_ready()
               for name in BROKERS}
    try:
        for topic in (TOPIC_A, TOPIC_B):
            ns.create_topic(topic, QUEUES, GRAY_QUEUES, set(BROKERS))
        asyncio.run(stock_rules(ns, stock_groups(specs)))
        with _workers(ns.url, ours, processes, root) as (procs, paths, commands, readies), stock_pods(
                brokers[BROKERS[0]].grpc_address, specs, log_dir) as pods:
            began = time.monotonic()
            figures: Figures = {"clients": clients, "processes": processes, "stock_processes": len(pods),
                                "big_group": sum(s[2] == BIG_GROUP for s in specs),
                                "stock_clients": len(specs) - len(ours), **_started(readies, pods, began)}
            sources = {"nameserver_cpu": ns.cpu_seconds, "broker_a_cpu": brokers["fleet-a"].cpu_seconds,
                       "broker_b_cpu": brokers["fleet-b"].cpu_seconds,
                       "workers_cpu": lambda: sum(cpu_seconds(p.pid) for p in procs if p.pid),
                       "stock_cpu": lambda: sum(cpu_seconds(pod.proc.pid) for pod in pods),
                       "heartbeats_stored": lambda: stored_client_rows(ns.db_url)}
            figures.update(_measured(ns, paths, commands, sources, specs, began))
            figures.update({"nameserver_peak_rss_mib": ns.peak_rss_mib(),
                            **{f"broker_{n[-1]}_peak_rss_mib": b.peak_rss_mib() for n, b in brokers.items()},
                            **_stopped(pods)})
            return figures
    finally:
        for broker in brokers.values():
            broker.stop()


def main() -> None:
    """``python -m graymq.bench.bench_fleet [clients] [processes] [groups]``: one run on a PostgreSQL of its own,
    figures as JSON."""
    import sys
    import tempfile

    from graymq.devkit.postgres import PostgresServer

    clients = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    processes = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    groups = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    postgres = PostgresServer()
    postgres.start()
    try:
        with tempfile.TemporaryDirectory() as tmp, NameServer(
                Path(tmp) / "ns", Path(tmp), postgres.create_database("bench_fleet")).wait_ready() as ns:
            figures = fleet_case(ns, Path(tmp), Path(tmp), clients, processes, groups)
    finally:
        postgres.destroy()
    print(json.dumps({k: round(v, 3) if isinstance(v, float) and not math.isnan(v) else v
                      for k, v in figures.items()}, indent=1))


if __name__ == "__main__":
    main()
