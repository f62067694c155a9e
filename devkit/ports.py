"""Free loopback ports for servers that cannot bind port 0 themselves (PostgreSQL) or must come back on the port they
had (a broker restarted by a test).

The port is drawn below the kernel's ephemeral range (``net.ipv4.ip_local_port_range``), where no bind to port 0
lands: the many servers of a parallel test run, which all bind port 0, cannot take it while its caller starts its
server (initdb takes seconds) or between a stop and a restart. A port someone listens on is drawn again.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 20000  # above the usual fixed service ports (graymq's own 9876, 10911 and 8081 among them)


def _ephemeral_start() -> int:
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):  # not Linux: IANA's range, which macOS and Windows use
        return 49152


def _listenable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A loopback port nothing is bound to, outside the ephemeral range when the range leaves room below it."""
    end = _ephemeral_start()
    if end - LOWEST >= 1000:
        for _ in range(100):
            port = random.randrange(LOWEST, end)
            if _listenable(port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
