"""The fleet's stock RocketMQ 5 clients: the Python SDK (``rocketmq-python-client``) on the brokers' gRPC endpoint,
in pods of their own.

A stock client cannot say that it is gray: the broker takes its labels from the client id the SDK sends, whose first
part is its host name (``gethostname()``: a pod's name on Kubernetes), and the name server's rules decide. So the
stock clients run in ``PODS`` processes, each in a UTS namespace of its own under a host name as a pod would
(``unshare --uts --map-root-user``): the gray fifth in ``fleet-gray-0``, the others in turn in ``fleet-stock-1`` ...
One rule ``host=fleet-gray-*`` in each group the stock clients join makes them gray. A graymq worker process cannot
hold them: it has one host name for all its clients, and the SDK's threads (about five a client) would compete with
its event loop for the GIL, which would skew the big group's figures.

A pod: ``python -m graymq.bench.fleet_stock SPEC`` (SPEC: JSON ``{"endpoint", "clients": [[kind, id, group, topic,
gray], ...]}``, kind ``stock_simple`` or ``stock_producer``) starts its clients — simple consumers each receiving
in a chain of ``receive_async`` (one long poll at a time), producers idle — prints ``{"started": n, "failed":
[reasons]}``, and at a line or the end of its stdin shuts them down and prints ``{"stopped": n, "receive_errors":
n}`` (with the most frequent ``receive_error`` when there were some). It imports nothing of graymq: graymq's copy
of the RocketMQ protos and the SDK's cannot share a process.

No SDK ``PushConsumer`` in the pods yet: the broker serves its receives (``auto_renew``, renewed while it is
connected: ``broker_ext/grpc_endpoint/renewals.py``), but an idle one holds a long poll per assigned queue where a
simple consumer holds one, a fleet's idle load of its own to measure.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from graymq.devkit.lines import PipeLines

PODS = 5
GRAY_HOST, HOST = "fleet-gray-0", "fleet-stock-{}"
GRAY_RULE = {"host": "fleet-gray-*"}
RECEIVE_BATCH, INVISIBLE_S, AWAIT_S = 32, 30, 20
STARTING = 16  # clients started (and shut down) at once in a pod
STOCK_KINDS = ("stock_simple", "stock_producer")

Spec = Sequence[Any]  # (kind, client id, group, topic, gray), as bench_fleet's


# ---------------------------------------------------------------- a pod (its own process: the SDK only)

def _configuration(endpoint: str) -> Any:
    from rocketmq import ClientConfiguration, Credentials
    from rocketmq.v5.util.misc import Misc

    Misc.get_local_ip = staticmethod(lambda: "127.0.0.1")  # it would UDP-connect to a public address
    return ClientConfiguration(endpoint, Credentials("", ""), request_timeout=10)


class Receiving:
    """A simple consumer receiving until ``stopping``: each ``receive_async``'s answer (acked) issues the next."""

    def __init__(self, consumer: Any, stopping: threading.Event) -> None:
        self.consumer = consumer
        self.stopping = stopping
        self.errors: Counter[str] = Counter()  # why a receive failed -> how often

    def startup(self) -> None:
        self.consumer.startup()
        self._next()

    def _next(self) -> None:
        if self.stopping.is_set():
            return
        try:
            self.consumer.receive_async(RECEIVE_BATCH, INVISIBLE_S).add_done_callback(self._received)
        except Exception as exc:  # noqa: BLE001 - shut down meanwhile (counted; the pod reports its errors)
            self.errors[_reason(exc)] += 1

    def _received(self, future: Any) -> None:
        try:
            for message in future.result() or []:
                self.consumer.ack(message)
        except Exception as exc:  # noqa: BLE001 - a refused or timed-out receive: counted, tried again a second later
            if self.stopping.is_set():  # cut short by the shutdown
                return
            self.errors[_reason(exc)] += 1
            self.stopping.wait(1.0)
        self._next()

    def shutdown(self) -> None:
        self.consumer.shutdown()


def _client(endpoint: str, spec: Spec, stopping: threading.Event) -> Any:
    """The SDK client of one spec, not started."""
    from rocketmq import FilterExpression, Producer, SimpleConsumer

    kind, _, group, topic, _ = spec
    config = _configuration(endpoint)
    if kind == "stock_producer":
        return Producer(config, (topic,))
    return Receiving(SimpleConsumer(config, group, {topic: FilterExpression("*")}, await_duration=AWAIT_S), stopping)


def run_pod(endpoint: str, specs: list[Spec]) -> None:
    """Start ``specs``' clients, say so, wait for a line (or the end) of stdin, shut them down, say so."""
    import logging

    logging.getLogger("rocketmq-python-client").setLevel(logging.WARNING)  # not its INFO line a heartbeat
    stopping = threading.Event()
    clients = [_client(endpoint, spec, stopping) for spec in specs]
    with ThreadPoolExecutor(STARTING) as pool:
        started = list(pool.map(_outcome, [client.startup for client in clients]))
        print(json.dumps({"started": started.count(""), "failed": sorted({s for s in started if s})}), flush=True)
        sys.stdin.readline()
        stopping.set()
        running = [client for client, outcome in zip(clients, started, strict=True) if not outcome]
        stopped = list(pool.map(_outcome, [client.shutdown for client in running]))
    errors = sum((c.errors for c in clients if isinstance(c, Receiving)), Counter[str]())
    print(json.dumps({"stopped": stopped.count(""), "receive_errors": errors.total(),
                      **({"receive_error": errors.most_common(1)[0][0]} if errors else {})}), flush=True)


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:200]


def _outcome(call: Any) -> str:
    """``call()``; "" or why it failed."""
    try:
        call()
        return ""
    except Exception as exc:  # noqa: BLE001 - the reason goes to the bench's figures
        return _reason(exc)


# ---------------------------------------------------------------- the bench's side

def pod_specs(specs: Sequence[Spec]) -> list[tuple[str, list[Spec]]]:
    """The stock clients of ``specs`` by pod, as ``(host name, specs)``: the gray ones in the gray pod, the others
    in turn in the ``PODS - 1`` others.

    >>> specs = [("stock_simple", f"s{i}", "g", "T", i % 5 == 0) for i in range(10)] + [("consumer", "c", "g", "T", 1)]
    >>> [(host, [s[1] for s in pod]) for host, pod in pod_specs(specs)][:3]
    [('fleet-gray-0', ['s0', 's5']), ('fleet-stock-1', ['s1', 's6']), ('fleet-stock-2', ['s2', 's7'])]
    """
    stock = [s for s in specs if s[0] in STOCK_KINDS]
    normal = [s for s in stock if not s[4]]
    pods = [(GRAY_HOST, [s for s in stock if s[4]]), *((HOST.format(n), normal[n - 1::PODS - 1])
                                                        for n in range(1, PODS))]
    return [(host, pod) for host, pod in pods if pod]


def is_pod_host(host: str) -> bool:
    """Whether ``host`` names one of the pods.

    >>> is_pod_host("fleet-gray-0"), is_pod_host("fleet-stock-3"), is_pod_host("orders-v2-7f9c")
    (True, True, False)
    """
    return host == GRAY_HOST or host.startswith(HOST.format(""))


# The fleet's clients stand for other hosts' pods: their processes run at this niceness, so that on one machine the
# servers measured are not starved by the load they serve (at 5,000 clients the 25 client processes took each an
# equal share of the two cores, the name server 1/25th: it stopped accepting connections while mostly idle).
CLIENT_NICE = 19


def in_pod(host: str, command: list[str]) -> list[str]:
    """``command`` under the host name ``host``, in a UTS namespace of its own (as a pod's), at ``CLIENT_NICE``."""
    return ["unshare", "--uts", "--map-root-user", "nice", "-n", str(CLIENT_NICE), "sh", "-c",
            'hostname "$0" && exec "$@"', host, *command]


class Pod:
    """One pod's process: its JSON lines as they come (``line``), its end (``stop``)."""

    def __init__(self, host: str, endpoint: str, specs: list[Spec], home: Path) -> None:
        spec = json.dumps({"endpoint": endpoint, "clients": [list(s) for s in specs]})
        self.host = host
        self.stopped = False
        self._log = open(home / f"{host}.log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(in_pod(host, [sys.executable, "-m", "graymq.bench.fleet_stock", spec]),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
                                     env={**os.environ, "HOME": str(home)})  # HOME: where the SDK logs
        assert self.proc.stdout is not None
        self._lines = PipeLines(self.proc.stdout)

    def line(self, timeout_s: float) -> dict[str, Any]:
        """Its next JSON line (``{"error"}`` when it ended or said nothing in time)."""
        try:
            line = self._lines.next(timeout_s)
        except queue.Empty:
            return {"error": f"pod {self.host}: nothing in {timeout_s:g}s"}
        return dict(json.loads(line)) if line.startswith("{") else {"error": f"pod {self.host} ended "
                                                                              f"({self.proc.poll()})"}

    def ask_stop(self) -> None:
        """Ask it to shut its clients down (a line on stdin)."""
        with contextlib.suppress(OSError, ValueError):
            assert self.proc.stdin is not None
            self.proc.stdin.write("\n")
            self.proc.stdin.close()

    def wait_stopped(self, deadline: float) -> dict[str, Any]:
        """What it said at its end (``{"stopped", "receive_errors"}``, ``"killed"`` added when it did not end by
        ``deadline``, a ``time.monotonic()``)."""
        self.stopped = True
        said = self.line(max(0.1, deadline - time.monotonic()))
        try:
            self.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            said = {**said, "killed": True}
        self._log.close()
        return said


def stop_pods(pods: Sequence[Pod], timeout_s: float) -> list[dict[str, Any]]:
    """Stop every pod (all asked first, then each awaited, those not ended within ``timeout_s`` of the asking
    killed); what each said at its end."""
    deadline = time.monotonic() + timeout_s
    for pod in pods:
        pod.ask_stop()
    return [pod.wait_stopped(deadline) for pod in pods]


@contextlib.contextmanager
def stock_pods(endpoint: str, specs: Sequence[Spec], home: Path, stop_s: float = 60.0) -> Iterator[list[Pod]]:
    """The pods of ``specs``' stock clients, started on ``endpoint`` (one gRPC endpoint: the SDK finds the others
    in the routes); on leaving, those not stopped yet (``stop_pods``) are stopped, killed after ``stop_s``."""
    pods: list[Pod] = []
    try:
        for host, pod in pod_specs(specs):
            pods.append(Pod(host, endpoint, pod, home))
        yield pods
    finally:
        stop_pods([pod for pod in pods if not pod.stopped], stop_s)


if __name__ == "__main__":
    arguments = json.loads(sys.argv[1])
    run_pod(arguments["endpoint"], arguments["clients"])
