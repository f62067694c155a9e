"""Run the stock RocketMQ 5 Node.js SDK (``stock_sdk_node/driver.js``) in its own process and read what it printed.

The SDK comes from the npm registry at the version ``stock_sdk_node/package-lock.json`` pins; ``install`` puts it
in ``.venv/stock-sdk-node`` once (a stamp holds the lock file's hash, so a changed pin installs again)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.support.stock_sdk import in_pod, printed_results

SOURCE = Path(__file__).with_name("stock_sdk_node")
TARGET = Path(__file__).resolve().parents[2] / ".venv" / "stock-sdk-node"


def install(target: Path = TARGET) -> Path:
    """The folder whose ``node_modules`` holds the SDK: installed with ``npm ci`` unless its stamp is current."""
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed: `make system-deps` installs nodejs and npm")
    lock = (SOURCE / "package-lock.json").read_bytes()
    stamp = target / ".installed"
    wanted = hashlib.sha256(lock).hexdigest()
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".lock", "w") as guard:  # two sessions installing at once share one install
        fcntl.flock(guard, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == wanted:
            return target
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(SOURCE / name, target / name)
        done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=target,
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"npm ci of the Node.js SDK failed: {done.stderr[-2000:]}")
        stamp.write_text(wanted)
    return target


def node_sdk(spec: dict[str, Any], home: Path, *, sdk: Path = TARGET, hostname: str = "",
             timeout: float = 60.0) -> list[dict[str, Any]]:
    """Run the driver with ``spec`` (see driver.js) and return the JSON lines it printed after ``client_id``, or a
    single ``startup_error``. ``home`` takes the SDK's log; ``hostname``: run it under ``unshare --uts`` with that
    host name (a pod's, as the name server's rules see it)."""
    command = ["node", str(SOURCE / "driver.js"), json.dumps(spec)]
    if hostname:
        command = in_pod(hostname, command)
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "NODE_PATH": str(sdk / "node_modules")}
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    return printed_results(done, "Node.js SDK")


def node_sdk_log(home: Path) -> str:
    """What the SDK logged under ``home`` (refusals' reasons are there)."""
    log = home / "logs" / "rocketmq" / "rocketmq_client_nodejs.log"
    return log.read_text() if log.exists() else ""
