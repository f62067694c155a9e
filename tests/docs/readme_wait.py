"""Wait as a person reading the README would before the next line: ``python -m tests.docs.readme_wait LINE [N]``.

After ``graymq up ... &`` a person waits for the "cluster up" message, after ``graymq nameserver ... &`` for its
"listening" line, after ``graymq broker --name B [--replica-id R] ... &`` for its "serving on" line (a replica of a
set also for it to be in sync, as a person re-running ``topic route`` would); after the N-th ``graymq consume ... &``
(or Spark job ``run ... &``) for N members of the group to hold queues. Each is read from the servers, so the
commands' output stays as written.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time

import httpx

DEADLINE_S = 180.0  # a Spark job's JVM on a loaded machine (the suite runs on several workers) takes minutes


def _until(check, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    sys.exit(f"readme_wait: gave up waiting for {what}")


def _get_json(url: str) -> object:
    """``url``'s JSON answer, or None while the server is not answering (a server over TLS is not verified here:
    the README's own commands check its certificate)."""
    try:
        answer = httpx.get(url, timeout=2, verify=False)
        return answer.json() if answer.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def _broker_listed(url: str, name: str, replica_id: int | None) -> bool:
    for broker in _get_json(f"{url}/v1/brokers") or []:  # type: ignore[union-attr]
        if broker["broker_name"] != name:
            continue
        replicas = (broker.get("replica_set") or {}).get("replicas") or []
        if replica_id is None or any(r["replica_id"] == replica_id and r["live"] and r.get("in_sync", True)
                                     for r in replicas):
            return True
    return False


def _members_hold_queues(group: str, expected: int) -> bool:
    result = subprocess.run(["graymq", "gray", "status", group, "--json"], capture_output=True, text=True)
    if result.returncode != 0:
        return False
    members = [c for c in json.loads(result.stdout)["clients"] if c["role"] in ("consumer", "spark") and c["queues"]]
    return len(members) >= expected


def _option(words: list[str], flag: str, default: str | None = None) -> str | None:
    return words[words.index(flag) + 1] if flag in words else default


def main(line: str, members: int) -> None:
    words = shlex.split(line, comments=True)
    while words and "=" in words[0]:  # VAR=value before the command
        words.pop(0)
    url = os.environ.get("GRAYMQ_NAMESERVER", "http://127.0.0.1:9876")
    if words[:2] == ["graymq", "up"]:
        _until(lambda: bool(_get_json(f"{url}/v1/brokers")), "graymq up")
    elif words[:2] == ["graymq", "nameserver"]:
        scheme = "https" if "--tls-cert" in words else "http"
        ready = f"{scheme}://127.0.0.1:{_option(words, '--port', '9876')}/readyz"
        _until(lambda: _get_json(ready) is not None, ready)
    elif words[:2] == ["graymq", "broker"]:
        name = _option(words, "--name", "broker-a") or "broker-a"
        replica = _option(words, "--replica-id")
        nameserver = _option(words, "--nameserver", url) or url
        _until(lambda: _broker_listed(nameserver, name, None if replica is None else int(replica)),
               f"broker {name} in {nameserver}")
    elif words[:2] == ["graymq", "consume"] or "run" in words:  # a consumer or a Spark job
        group = words[words.index("--group") + 1]
        _until(lambda: _members_hold_queues(group, members), f"{members} consumers of {group}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1)
