"""Wait as a person reading the README would before the next line: ``python -m tests.docs.readme_wait LINE [N]``.

After ``graymq up ... &`` a person waits for the "cluster up" message; after the N-th
``graymq consume ... &`` (or Spark job ``run ... &``) for N members of the group to hold
queues. Both are read from the name server, so the commands' output stays as written.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time

import httpx

DEADLINE_S = 60.0


def _until(check, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    sys.exit(f"readme_wait: gave up waiting for {what}")


def _cluster_up(url: str) -> bool:
    try:
        return bool(httpx.get(f"{url}/v1/brokers", timeout=2).json())
    except (httpx.HTTPError, ValueError):
        return False


def _members_hold_queues(group: str, expected: int) -> bool:
    result = subprocess.run(["graymq", "gray", "status", group, "--json"], capture_output=True, text=True)
    if result.returncode != 0:
        return False
    members = [c for c in json.loads(result.stdout)["clients"] if c["role"] in ("consumer", "spark") and c["queues"]]
    return len(members) >= expected


def main(line: str, members: int) -> None:
    words = shlex.split(line, comments=True)
    url = os.environ.get("GRAYMQ_NAMESERVER", "http://127.0.0.1:9876")
    if words[:2] == ["graymq", "up"]:
        _until(lambda: _cluster_up(url), "graymq up")
    elif words[:2] == ["graymq", "consume"] or "run" in words:  # a consumer or a Spark job
        group = words[words.index("--group") + 1]
        _until(lambda: _members_hold_queues(group, members), f"{members} consumers of {group}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1)
