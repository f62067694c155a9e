"""A real PostgreSQL server for tests and benchmarks, started from the machine's server binaries.

initdb refuses to run as root, so as root the server runs as the ``postgres`` system user.
The cluster lives in a temporary directory, listens on 127.0.0.1 only, trusts local
connections and runs with ``fsync=off`` (nobody needs durability of a throwaway database).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from graymq.devkit.ports import free_port


def find_pg_bin() -> Path:
    """The directory of ``initdb``/``pg_ctl``: Debian's layout first, then PATH."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True)
    for candidate in candidates:
        if os.access(os.path.join(candidate, "initdb"), os.X_OK):
            return Path(candidate)
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise RuntimeError("PostgreSQL server binaries not found (run `make test`, which installs them)")


class PostgresServer:
    """One throwaway PostgreSQL cluster; ``stop()``/``start()`` may be called repeatedly. ``host``: the address
    it listens on; ``prefix``: what its commands run under (``ip netns exec NS`` for a partition test's node)."""

    def __init__(self, host: str = "127.0.0.1", prefix: Sequence[str] = ()) -> None:
        self.bin = find_pg_bin()
        self.port = free_port()
        self.host = host
        self._prefix = list(prefix)
        self._root = Path(tempfile.mkdtemp(prefix="graymq-pg-"))
        self.data_dir = self._root / "data"
        self.log_file = self._root / "postgres.log"
        self._as_user: str | None = None
        if os.geteuid() == 0:
            self._as_user = "postgres"
            entry = pwd.getpwnam("postgres")
            os.chmod(self._root, 0o755)
            os.chown(self._root, entry.pw_uid, entry.pw_gid)
        self._run([str(self.bin / "initdb"), "-D", str(self.data_dir), "-U", "postgres", "--auth=trust",
                   "--encoding=UTF8", "--no-sync"])
        with open(self.data_dir / "postgresql.conf", "a") as conf:
            conf.write(
                f"\nlisten_addresses = '{self.host}'\nport = {self.port}\nunix_socket_directories = ''\n"
                "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\nmax_connections = 200\n"
            )
        if host != "127.0.0.1":  # a partition test's private bridge: its other nodes connect over it
            with open(self.data_dir / "pg_hba.conf", "a") as hba:
                hba.write("host all all 0.0.0.0/0 trust\n")

    def _run(self, args: Sequence[str]) -> None:
        if self._as_user:
            args = ["runuser", "-u", self._as_user, "--", *args]
        result = subprocess.run([*self._prefix, *args], capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")

    def start(self) -> None:
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data_dir), "-l", str(self.log_file), "-w",
                   "-t", "60", "start"])
        self._wait_ready()

    def stop(self, mode: str = "fast") -> None:
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data_dir), "-m", mode, "-w", "stop"])

    def _wait_ready(self, timeout: float = 30.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.dsn("postgres"), connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def dsn(self, database: str) -> str:
        """A libpq connection string for ``database``."""
        return f"host={self.host} port={self.port} user=postgres dbname={database}"

    def url(self, database: str) -> str:
        """A SQLAlchemy URL (psycopg 3 driver) for ``database``."""
        return f"postgresql+psycopg://postgres@{self.host}:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def destroy(self) -> None:
        try:
            self.stop("immediate")
        except RuntimeError:
            pass
        shutil.rmtree(self._root, ignore_errors=True)
