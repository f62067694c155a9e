"""The partition harness itself (tests/support/netns.py): nodes on a bridge reach each other, a cut drops exactly
the links it names (one direction when asked), a heal restores them, and closing leaves no namespace, veth or
bridge behind. Skipped, saying why, without root, nftables or network namespaces."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.support.cli import wait_for
from tests.support.netns import Network, base36, sh, unavailable_reason

pytestmark = pytest.mark.integration

SERVE = "import socket,time;s=socket.socket();s.bind(('{0}',5000));s.listen(64);time.sleep(60)"
CONNECT = "import socket;socket.create_connection(('{0}',5000),timeout=1).close()"


@pytest.fixture
def net():
    if reason := unavailable_reason():
        pytest.skip(reason)
    network = Network()
    yield network
    network.close()


def reaches(net: Network, src: str, dst: str) -> bool:
    node = net.nodes[src]
    done = subprocess.run([*node.prefix, sys.executable, "-c", CONNECT.format(net.nodes[dst].address)],
                          capture_output=True, timeout=30)
    return done.returncode == 0


def test_a_cut_drops_the_named_links_only_and_a_heal_restores_them(net):
    a, b, c = net.add("a"), net.add("b"), net.add("c")
    servers = [subprocess.Popen([*n.prefix, sys.executable, "-c", SERVE.format(n.address)]) for n in (b, c)]
    try:
        for server_node in ("b", "c"):
            wait_for(lambda n=server_node: reaches(net, "a", n), 20, f"{server_node} listening")
        a.cut([b.address])
        assert not reaches(net, "a", "b") and reaches(net, "a", "c")
        a.heal()
        assert reaches(net, "a", "b")
        b.cut([a.address], inbound=True, outbound=False)  # b hears nothing from a; c still reaches b
        assert not reaches(net, "a", "b") and reaches(net, "c", "b")
    finally:
        for server in servers:
            server.kill()
            server.wait()


def test_closing_the_network_removes_its_namespaces_veths_and_bridge():
    if reason := unavailable_reason():
        pytest.skip(reason)
    network = Network()
    nodes = [network.add(name) for name in ("x", "y")]
    network.close()
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert not any(n.netns in namespaces or f" {n.veth}@" in links for n in nodes)
    assert f" {network.bridge}:" not in links


def test_a_new_network_sweeps_away_what_a_killed_test_process_left_and_nothing_of_a_live_one():
    """A pytest process SIGKILLed never runs its finalizers: its namespaces, veths, bridge and the servers in them
    stay. The names carry its pid; the next ``Network`` removes those whose pid is gone (and kills what runs there),
    and leaves a live process's alone."""
    if reason := unavailable_reason():
        pytest.skip(reason)
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead, live = base36(gone.pid), base36(os.getpid())
    netns, bridge, veth, mine = f"gmqn{dead}_0_2", f"gmqb{dead}_0", f"gmqv{dead}_0_2", f"gmqn{live}_zz_2"
    for args in (("netns", "add", netns), ("netns", "add", mine), ("link", "add", bridge, "type", "bridge"),
                 ("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns)):
        subprocess.run(["ip", *args], check=True, capture_output=True)
    server = subprocess.Popen(["ip", "netns", "exec", netns, "sleep", "60"])
    try:
        wait_for(lambda: str(server.pid) in sh("ip", "netns", "pids", netns).split(), 10, "the server in its node")
        network = Network()
        network.close()
        assert server.wait(10) == -signal.SIGKILL
        namespaces = sh("ip", "netns", "list")
        links = [line.split(":", 2)[1].strip().split("@")[0] for line in sh("ip", "-o", "link").splitlines()]
        assert netns not in namespaces and not {bridge, veth} & set(links)
        assert mine in namespaces
    finally:
        server.kill()
        server.wait()
        for args in (("netns", "del", mine), ("netns", "del", netns), ("link", "del", bridge)):
            subprocess.run(["ip", *args], capture_output=True)
