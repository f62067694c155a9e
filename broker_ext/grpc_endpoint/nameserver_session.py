"""The stock clients' heartbeats and watches, batched over one name-server session per credential.

The broker keeps a membership per stock client and group; their heartbeats beat on one grid of the interval
(``Membership(aligned=True)``), so those due together arrive within ``WINDOW_S`` of each other and go out as one
``POST /v1/clients/heartbeats`` (nameserver_api/session.py): one request per credential and interval for a whole
fleet's registrations, where each used to send its own.
"""

from __future__ import annotations

import logging

from graymq.nameserver_api import session


class NameServerSession(session.NameServerSession):
    """A ``MembershipLink`` batching the heartbeats and watches of one credential's stock clients."""

    label = "stock clients'"
    log = logging.getLogger(__name__)
