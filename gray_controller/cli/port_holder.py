"""Which process holds a TCP port, for the one line a server prints when it cannot bind (Linux ``/proc``; elsewhere,
or without the right to read another user's ``/proc/PID/fd``, only the port is named)."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

BIND_ERRORS = (errno.EADDRINUSE, errno.EADDRNOTAVAIL)  # errnos only a bind gives
_LISTEN = "0A"  # the TCP state column of /proc/net/tcp
_ADDRESS_IN_MESSAGE = re.compile(r"\('([^']*)', (\d+)")  # asyncio/uvloop: "... bind on address ('H', P) ..."


def listening_inodes(port: int, proc: Path = Path("/proc")) -> set[str]:
    """The socket inodes listening on ``port`` (IPv4 and IPv6)."""
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == _LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def port_holder(port: int, proc: Path = Path("/proc")) -> str | None:
    """``pid 123 (graymq up --data ./graymq-data)`` for the process listening on ``port``, or None when unknown."""
    sockets = {f"socket:[{inode}]" for inode in listening_inodes(port, proc)}
    if not sockets:
        return None
    for pid_dir in proc.iterdir():
        if not pid_dir.name.isdigit() or int(pid_dir.name) == os.getpid():
            continue
        try:
            if any(os.readlink(fd) in sockets for fd in (pid_dir / "fd").iterdir()):
                command = (pid_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                return f"pid {pid_dir.name} ({_short(command)})"
        except OSError:  # gone meanwhile, or another user's
            continue
    return None


def bind_failure(host: str, port: int, exc: OSError) -> str:
    """The line for a failed bind: the address, why, and who holds the port when it is in use."""
    reason = exc.strerror or str(exc)
    if exc.errno != errno.EADDRINUSE:
        return f"cannot listen on {host}:{port}: {reason}"
    holder = port_holder(port)
    held = f"held by {holder}" if holder else "held by another process"
    return (f"cannot listen on {host}:{port}: port {port} is already in use ({held}); stop it or choose another "
            "port")


def bound_address(exc: OSError, host: str, port: int) -> tuple[str, int]:
    """The address an event loop's bind error names (a broker binds more than one port), else ``(host, port)``."""
    match = _ADDRESS_IN_MESSAGE.search(str(exc))
    return (match[1], int(match[2])) if match else (host, port)


def _short(command: str, limit: int = 120) -> str:
    """The command line, with the interpreter's path and ``-m graymq.gray_controller.cli`` shown as ``graymq``."""
    command = " ".join(command.split())
    command = re.sub(r"^(\S*python[\d.]* )?(-m graymq\.gray_controller\.cli|\S*/graymq)(?=\s|$)", "graymq", command)
    return command if len(command) <= limit else command[:limit - 1] + "…"
