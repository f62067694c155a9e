"""A command started while its cluster is still coming up (``graymq up &`` pasted with the lines after it) says so
once and waits, at most ``GRAYMQ_NAMESERVER_WAIT_S`` seconds (default 60), for a name server to answer and, for the
commands that send or consume, for a broker to register. Past the bound the command goes on and fails with its own
one-line error; a name server that answers wrongly (an untrusted certificate, not a name server) is not waited for."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import TYPE_CHECKING

from graymq.protocol.errors import ConfigError

if TYPE_CHECKING:
    from graymq.nameserver_api.client import NameServerClient

WAIT_ENV = "GRAYMQ_NAMESERVER_WAIT_S"
DEFAULT_WAIT_S = 60.0  # a TLS name server took ~20 s to listen on a loaded machine, its broker longer to register
MAX_WAIT_S = 600.0
POLL_S = 0.25


def wait_bound() -> float:
    """The seconds to wait for a cluster coming up: ``GRAYMQ_NAMESERVER_WAIT_S``, else 60 (0: do not wait)."""
    text = os.environ.get(WAIT_ENV, "").strip()
    if not text:
        return DEFAULT_WAIT_S
    try:
        bound = float(text)
    except ValueError:
        bound = -1.0
    if not 0 <= bound <= MAX_WAIT_S:
        raise ConfigError(f"{WAIT_ENV} must be a number of seconds from 0 to {MAX_WAIT_S:g}, got {text!r}")
    return bound


async def until_cluster_answers(ns: NameServerClient, command: str, *, need_broker: bool = False) -> None:
    """Return once ``ns`` answers (and, with ``need_broker``, lists a live broker), or once the bound has passed;
    while it does not, say so once on stderr."""
    bound = wait_bound()
    if not bound:
        return
    deadline = time.monotonic() + bound
    said = False
    while (problem := await coming_up(ns, need_broker)) is not None and time.monotonic() < deadline:
        if not said:
            print(f"graymq {command}: {problem}; waiting up to {bound:g} s for it to come up ({WAIT_ENV})",
                  file=sys.stderr, flush=True)
            said = True
        await asyncio.sleep(POLL_S)


async def coming_up(ns: NameServerClient, need_broker: bool) -> str | None:
    """What the cluster is still missing (None: nothing the command should wait for)."""
    import httpx

    from graymq.protocol.errors import GrayMQError
    from graymq.protocol.tls import https_verify, untrusted_certificate

    refused = []
    async with httpx.AsyncClient(timeout=httpx.Timeout(2.0), verify=https_verify()) as http:
        for url in ns.urls:
            try:
                answer = await http.get(f"{url}/readyz")
            except httpx.ConnectError as exc:
                if untrusted_certificate(exc):
                    return None  # the command's own call says so, in one line
                refused.append(url)
                continue
            except httpx.HTTPError:
                return None  # something answered, not as a name server would: the command's own call says what
            if answer.status_code != 503:  # 503: its database does not answer yet
                break
            refused.append(url)
        else:
            return f"name server {', '.join(refused)} is not answering yet (connection refused or not ready)"
    if not need_broker:
        return None
    try:
        brokers = await ns.list_brokers()
    except GrayMQError:
        return None  # a token that may not list brokers, or an error the command reports itself
    return None if brokers else f"name server {ns.urls[0]} answers, but no broker has registered with it yet"
