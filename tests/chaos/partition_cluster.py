"""A graymq cluster where every node has its own network namespace (tests/support/netns.py): PostgreSQL, name server
replicas, the replicas of broker set ``broker-a``, and one node per client (a producer, a consumer, the promote).

Servers listen on their node's address (``--host``), so what they register and advertise is that address; clients
run on a ``NodeLoop`` inside their node. The test process reaches every node through the bridge's own address,
which no fault cuts: it is the observer, not a participant.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx

from graymq.devkit.postgres import PostgresServer
from graymq.devkit.processes import GraymqProcess
from tests.support.cli import wait_for
from tests.support.cluster import FAST_ENV
from tests.support.netns import Network, Node, NodeLoop

BROKER = "broker-a"
LEASE_S = 2.0  # the replica lease: a cut leader stops acknowledging within it
ENV = {**FAST_ENV, "GRAYMQ_REPLICA_LEASE_SECONDS": str(LEASE_S), "GRAYMQ_CLIENT_STALE_SECONDS": "4"}


class PartitionCluster:
    """``net`` with nodes ``pg``, ``ns0``.., ``r0``.. (replicas of ``broker-a``) and client nodes made by
    ``client(name)``; ``replicas`` maps replica id to its process."""

    def __init__(self, net: Network, root: Path, stack: ExitStack) -> None:
        self.net = net
        self.root = root
        self._stack = stack
        self.pg_url = ""
        self.nameservers: list[GraymqProcess] = []
        self.replicas: dict[int, GraymqProcess] = {}
        self.loops: dict[str, NodeLoop] = {}

    def start(self, *args: str, node: Node, env: dict[str, str] | None = None, wait: bool = True) -> GraymqProcess:
        proc = GraymqProcess(args, env={**ENV, **(env or {})}, cwd=self.root, prefix=node.prefix)
        self._stack.callback(proc.terminate)
        if wait:
            proc.wait_ready(60)
        return proc

    def start_postgres(self) -> None:
        node = self.net.add("pg")
        pg = PostgresServer(host=node.address, prefix=node.prefix)
        self._stack.callback(pg.destroy)
        pg.start()
        self.pg_url = pg.create_database("graymq")

    def start_nameserver(self) -> GraymqProcess:
        node = self.net.add(f"ns{len(self.nameservers)}")
        proc = self.start("nameserver", "--host", node.address, "--port", "0", "--db", self.pg_url, "--migrate",
                          "--dev", node=node)
        self.nameservers.append(proc)
        return proc

    @property
    def ns_url(self) -> str:
        return ",".join(str(p.ready_info["url"]) for p in self.nameservers if p.ready_info)

    @property
    def ns_names(self) -> list[str]:
        return [f"ns{i}" for i in range(len(self.nameservers))]

    def add_replica(self, replica: int, replication: str) -> GraymqProcess:
        node = self.net.add(f"r{replica}")
        proc = self.start("broker", "--name", BROKER, "--replica-id", str(replica), "--replication", replication,
                          "--host", node.address, "--port", "0", "--store", str(self.root / f"r{replica}"),
                          "--nameserver", self.ns_url, "--segment-size", str(4 << 20), node=node)
        self.replicas[replica] = proc
        return proc

    def client(self, name: str) -> NodeLoop:
        """A client node ``name``: an event loop inside its own namespace."""
        loop = NodeLoop(self.net.add(name))
        self._stack.callback(loop.close)
        self.loops[name] = loop
        return loop

    def replica_set(self) -> dict[str, object]:
        """The set as the first name server that answers describes it (``{}`` when none does: a name server cut from
        PostgreSQL answers 503, a starved machine may answer late)."""
        for url in self.ns_url.split(","):
            try:
                response = httpx.get(f"{url}/v1/brokers", timeout=5)
            except httpx.HTTPError:
                continue
            if response.status_code == 200:
                return next((b["replica_set"] for b in response.json()
                             if b["broker_name"] == BROKER and b["replica_set"]), {})
        return {}

    def wait_in_sync(self, want: list[int], timeout: float = 30.0) -> None:
        wait_for(lambda: self.replica_set().get("in_sync") == want, timeout, f"replicas {want} of {BROKER} in sync")

    def leader(self) -> int:
        """The replica id the name server names leader."""
        return int(str(self.replica_set()["leader_replica_id"]))


@contextmanager
def partition_cluster(root: Path, replication: str, replicas: int = 2, nameservers: int = 2
                      ) -> Iterator[PartitionCluster]:
    """PostgreSQL, ``nameservers`` name servers and ``replicas`` replicas (0 leading, all in sync), each in its node;
    on exit every process stops, then every namespace, veth and the bridge go (a failing test included)."""
    with ExitStack() as stack:
        net = Network()
        stack.callback(net.close)  # runs last: after the processes in the namespaces stopped
        cluster = PartitionCluster(net, root, stack)
        cluster.start_postgres()
        for _ in range(nameservers):
            cluster.start_nameserver()
        for replica in range(replicas):
            cluster.add_replica(replica, replication)
            cluster.wait_in_sync(list(range(replica + 1)))
        assert cluster.leader() == 0, cluster.replica_set()
        yield cluster
