"""The names a client and the name server share: a client's role, its gray state, a group's orphan policy.

The values travel as they are in heartbeats and REST bodies, are stored by the name server and
shown by ``graymq gray status``; the client, the name server and the controller import them from here.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, get_args

Role = Literal["consumer", "producer", "spark"]
ROLES: tuple[str, ...] = get_args(Role)

OrphanPolicy = Literal["hold", "adopt"]
"""``hold``: a gray queue without a gray consumer waits for one; ``adopt``: normal consumers take it over."""
ORPHAN_POLICIES: tuple[str, ...] = get_args(OrphanPolicy)


class ClientState(StrEnum):
    """A client's gray state; ``graymq.core.gray_state`` holds the transitions."""

    NORMAL = "NORMAL"
    GRAY = "GRAY"
    DRAINING = "DRAINING"  # still gray: consuming its gray queues dry before it becomes normal
    RETIRED = "RETIRED"  # still gray, its group's gray side rolled back: it holds and consumes nothing

    @classmethod
    def settled(cls, gray: bool) -> ClientState:
        """The state of a client that is not draining: GRAY or NORMAL."""
        return cls.GRAY if gray else cls.NORMAL


# The same values as a Literal, for pydantic models (an inline enum in the name server's OpenAPI schema).
ClientStateName = Literal["GRAY", "DRAINING", "NORMAL", "RETIRED"]
CLIENT_STATES: tuple[str, ...] = get_args(ClientStateName)
