"""Client self-reports (no token: clients report themselves)."""

from __future__ import annotations

from fastapi import APIRouter

from nameserver.deps import Clients
from nameserver.schemas import ClientHeartbeat, ClientHeartbeatResponse

router = APIRouter(prefix="/v1/clients", tags=["clients"])


@router.post("/heartbeat")
def client_heartbeat(body: ClientHeartbeat, clients: Clients) -> ClientHeartbeatResponse:
    """Report a client's labels, effective flag, state and queues; answers with the flag it should have."""
    return clients.heartbeat(body)
