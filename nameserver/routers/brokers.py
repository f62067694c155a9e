"""Broker self-registration (no token: brokers report themselves) and the live broker list."""

from __future__ import annotations

from fastapi import APIRouter

from graymq.nameserver.deps import Registry
from graymq.nameserver.schemas import BrokerHeartbeat, BrokerHeartbeatResponse, BrokerView

router = APIRouter(prefix="/v1/brokers", tags=["brokers"])


@router.post("/heartbeat")
def broker_heartbeat(body: BrokerHeartbeat, registry: Registry) -> BrokerHeartbeatResponse:
    """Register or renew a broker with its topics; answers with every configured topic."""
    return registry.heartbeat(body)


@router.get("")
def list_brokers(registry: Registry) -> list[BrokerView]:
    """Brokers whose lease has not expired."""
    return registry.live_brokers()
