"""The store directory's lock: one broker per store, and no offline check under a running broker.

``store_dir/lock`` holds a POSIX record lock (``lockf``) for as long as the store is open: exclusive
for the broker, shared for ``graymq broker verify`` (which never waits: a held lock is an answer).
The kernel drops it when the process dies, so a crash leaves nothing to clean up. The file holds
the owner's pid, for the error message only.

A POSIX lock belongs to the process: a second store opened on the same directory *in the same
process* is not refused, and closing any descriptor of the file releases it.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from graymq.protocol.errors import ConfigError

LOCK_FILE = "lock"


class StoreLockedError(ConfigError):
    """Another process holds the store directory."""


class StoreLock:
    """The lock of one store directory, held from ``acquire`` to ``release``."""

    def __init__(self, store_dir: Path) -> None:
        self.path = Path(store_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self, shared: bool = False) -> None:
        """Take the lock now or raise ``StoreLockedError`` (exclusive: the broker; shared: an offline check).
        The file is created when missing, so a broker starting meanwhile finds the check's lock; a directory
        where it cannot be created is a ``ConfigError``."""
        try:
            fd = os.open(self.path, (os.O_RDONLY if shared else os.O_RDWR) | os.O_CREAT, 0o644)
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            raise ConfigError(f"store {self.path.parent}: cannot create its lock file {self.path.name} "
                              f"({os.strerror(exc.errno)}): the directory is not writable") from exc
        try:
            fcntl.lockf(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EACCES, errno.EAGAIN):
                raise
            raise StoreLockedError(f"store {self.path.parent} is in use by another process{_owner(self.path)}") from exc
        if not shared:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _owner(path: Path) -> str:
    try:
        pid = path.read_text().strip()
    except OSError:
        return ""
    return f" (pid {pid})" if pid.isdigit() else ""
