"""The partition harness itself (tests/support/netns.py): nodes on a bridge reach each other, a cut drops exactly
the links it names (one direction when asked), a heal restores them, and closing leaves no namespace, veth or
bridge behind. Skipped, saying why, without root, nftables or network namespaces."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.cli import wait_for
from tests.support.netns import Network, unavailable_reason

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
