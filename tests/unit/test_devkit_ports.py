"""Ports for servers that cannot bind port 0: never one a port-0 bind could take meanwhile, never one in use."""

from __future__ import annotations

import socket

import pytest

from graymq.devkit import ports

pytestmark = pytest.mark.unit


def test_a_free_port_lies_below_the_ephemeral_range_where_no_port_0_bind_lands():
    port = ports.free_port()
    assert ports.LOWEST <= port < ports._ephemeral_start()
    with socket.create_server(("127.0.0.1", port)):
        pass


def test_a_port_someone_listens_on_is_drawn_again(monkeypatch):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        drawn = iter([taken.getsockname()[1], ports.LOWEST + 7])
        monkeypatch.setattr(ports.random, "randrange", lambda low, high: next(drawn))
        monkeypatch.setattr(ports, "_ephemeral_start", lambda: 60000)
        assert ports.free_port() == ports.LOWEST + 7
