"""A private network for partition tests: one Linux bridge, every node in its own network namespace on it.

``Network`` creates the bridge (an address of its own in the host's namespace, so the test process reaches every
node) and, per node, a namespace with a veth pair into the bridge and one address of the bridge's /24. Faults are
nftables rules in a node's namespace (a table ``graymq_chaos``): ``cut`` drops what the node receives from and/or
sends to given addresses, ``heal`` removes them. Processes run in a node with ``node.prefix`` before their command
(``ip netns exec NS``); a client thread enters one with ``NodeLoop`` (setns applies to the calling thread only).

Names carry the pid and a counter, so parallel pytest-xdist workers never collide; the subnet is chosen under a
file lock among those no interface of the host uses. ``close()`` deletes every namespace, veth and the bridge; a
test process killed before it could (SIGKILL) leaves them behind, and the next ``Network`` sweeps away those whose
pid is no longer alive (``sweep_stale``).
"""

from __future__ import annotations

import asyncio
import ctypes
import fcntl
import itertools
import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Awaitable, Coroutine
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")
CLONE_NEWNET = 0x40000000
LOCK_FILE = "/tmp/graymq-netns.lock"
SUBNETS = range(1, 255)  # 10.77.N.0/24
TABLE = "graymq_chaos"
_names = itertools.count()
# gmq + kind (b: bridge, n: namespace, v: veth, p: probe) + the owning process's pid in base 36 + "_": the pid is
# read back by the sweep; interface names stay within Linux's 15 characters (a pid is at most 5 base-36 digits)
OWNED = re.compile(r"^gmq[bnvp]([0-9a-z]+)_")


def base36(n: int) -> str:
    """``n`` in base 36 (Linux's largest pid, 4194304, in 5 digits).

    >>> base36(4194304)
    '2hwcg'
    """
    digits = ""
    while True:
        n, digit = divmod(n, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[digit] + digits
        if not n:
            return digits


def owner_pid(name: str) -> int | None:
    """The pid of the test process that made namespace or link ``name`` (None: not one of this harness's names).

    >>> owner_pid("gmqn2hwcg_0_2"), owner_pid("eth0")
    (4194304, None)
    """
    match = OWNED.match(name)
    return int(match.group(1), 36) if match else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stale(name: str) -> bool:
    pid = owner_pid(name)
    return pid is not None and not _alive(pid)


def sweep_stale() -> list[str]:
    """Remove the namespaces, veths and bridges of test processes that are gone (killed before their finalizers
    ran), killing first what still runs in such a namespace (the servers that run started); what was removed."""
    removed = []
    for netns in (line.split()[0] for line in sh("ip", "netns", "list").splitlines() if line.strip()):
        if _stale(netns):
            for pid in sh("ip", "netns", "pids", netns).split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            subprocess.run(["ip", "netns", "del", netns], capture_output=True)
            removed.append(netns)
    for line in sh("ip", "-o", "link", "show").splitlines():
        link = line.split(":", 2)[1].strip().split("@")[0]
        if _stale(link) and subprocess.run(["ip", "link", "del", link], capture_output=True).returncode == 0:
            removed.append(link)
    return removed


def unavailable_reason() -> str | None:
    """Why partition tests cannot run here (``None`` when they can): they need root, ``ip`` and ``nft``, and
    network namespaces."""
    if os.geteuid() != 0:
        return "partition tests need root (network namespaces, veth pairs, nftables)"
    for tool, package in (("ip", "iproute2"), ("nft", "nftables")):
        if shutil.which(tool) is None:
            return f"partition tests need `{tool}` (apt package {package}; `make system-deps` installs it)"
    name = f"gmqp{base36(os.getpid())}_probe"
    probe = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"network namespaces unavailable: {probe.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return None


def sh(*args: str) -> str:
    """Run a command; raise with its stderr when it fails."""
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


@dataclass
class Node:
    """One namespace on the bridge: ``name`` (of the node), ``netns``, ``address``."""

    name: str
    netns: str
    address: str
    veth: str
    cuts: dict[str, set[str]] = field(default_factory=lambda: {"input": set(), "output": set()})

    @property
    def prefix(self) -> list[str]:
        """What runs a command in this node."""
        return ["ip", "netns", "exec", self.netns]

    def nft(self, script: str) -> None:
        subprocess.run([*self.prefix, "nft", "-f", "-"], input=script, text=True, check=True, capture_output=True)

    def cut(self, addresses: list[str], inbound: bool = True, outbound: bool = True) -> None:
        """Drop packets from (``inbound``) and to (``outbound``) ``addresses``, on top of the cuts in force."""
        if inbound:
            self.cuts["input"].update(addresses)
        if outbound:
            self.cuts["output"].update(addresses)
        self._apply()

    def heal(self) -> None:
        """Remove every cut of this node."""
        for chosen in self.cuts.values():
            chosen.clear()
        self._apply()

    def _apply(self) -> None:
        lines = [f"table inet {TABLE} {{}}", f"delete table inet {TABLE}", f"table inet {TABLE} {{"]
        for hook, direction in (("input", "saddr"), ("output", "daddr")):
            lines.append(f"  chain {hook} {{ type filter hook {hook} priority 0; policy accept;")
            if self.cuts[hook]:
                lines.append(f"    ip {direction} {{ {', '.join(sorted(self.cuts[hook]))} }} drop")
            lines.append("  }")
        lines.append("}")
        self.nft("\n".join(lines) + "\n")


class Network:
    """The bridge and its nodes; ``add(name)`` makes a node, ``close()`` removes everything."""

    def __init__(self) -> None:
        self.tag = f"{base36(os.getpid())}_{base36(next(_names))}"
        self.bridge = f"gmqb{self.tag}"
        self.nodes: dict[str, Node] = {}
        self._hosts = itertools.count(2)
        with open(LOCK_FILE, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            sweep_stale()  # a leftover bridge would hold its subnet
            used = sh("ip", "-4", "-o", "addr", "show")
            self.subnet = next(n for n in SUBNETS if f" 10.77.{n}." not in used)
            sh("ip", "link", "add", self.bridge, "type", "bridge")
            sh("ip", "addr", "add", f"10.77.{self.subnet}.1/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        self.host_address = f"10.77.{self.subnet}.1"

    def add(self, name: str) -> Node:
        """A node ``name`` with its own namespace and the next address of the subnet."""
        n = next(self._hosts)
        netns, veth = f"gmqn{self.tag}_{base36(n)}", f"gmqv{self.tag}_{base36(n)}"
        node = Node(name, netns, f"10.77.{self.subnet}.{n}", veth)
        sh("ip", "netns", "add", netns)
        self.nodes[name] = node
        sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns)
        sh("ip", "link", "set", veth, "master", self.bridge, "up")
        sh(*node.prefix, "ip", "addr", "add", f"{node.address}/24", "dev", "eth0")
        sh(*node.prefix, "ip", "link", "set", "eth0", "up")
        sh(*node.prefix, "ip", "link", "set", "lo", "up")
        node.nft(f"table inet {TABLE} {{}}\n")
        return node

    def addresses(self, *names: str) -> list[str]:
        return [self.nodes[n].address for n in names]

    def heal_all(self) -> None:
        for node in self.nodes.values():
            if any(node.cuts.values()):
                node.heal()

    def close(self) -> None:
        """Delete every namespace (its veth end goes with it) and the bridge; errors are collected, not raised
        midway, so one leftover does not keep the others."""
        errors = []
        for node in self.nodes.values():
            for args in (("ip", "link", "del", node.veth), ("ip", "netns", "del", node.netns)):
                result = subprocess.run(args, capture_output=True, text=True)
                if result.returncode != 0 and "Cannot find" not in result.stderr and "not exist" not in result.stderr:
                    errors.append(result.stderr.strip())
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
        self.nodes.clear()
        if errors:
            raise RuntimeError(f"network cleanup: {errors}")


class NodeLoop:
    """An event loop on a thread inside ``node``'s namespace: sockets it opens are the node's. ``run(coro)`` from
    another loop awaits a coroutine on it."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.loop = asyncio.new_event_loop()
        self._entered: Future[None] = Future()
        self._thread = threading.Thread(target=self._main, name=f"netns-{node.name}", daemon=True)
        self._thread.start()
        self._entered.result(10)

    def _main(self) -> None:
        try:
            fd = os.open(f"/var/run/netns/{self.node.netns}", os.O_RDONLY)
            try:
                if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns into {self.node.netns}")
            finally:
                os.close(fd)
        except OSError as exc:
            self._entered.set_exception(exc)
            return
        self._entered.set_result(None)
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T]) -> Awaitable[T]:
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def close(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()
