"""Readiness and the cluster gauges behind ``/metrics``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from graymq.nameserver.clock import utc_now
from graymq.nameserver.metrics import GroupRelease
from graymq.nameserver.repositories.brokers import BrokerRepository
from graymq.nameserver.repositories.clients import ClientRepository
from graymq.nameserver.repositories.cutovers import CutoverRepository
from graymq.nameserver.repositories.groups import GroupRepository
from graymq.nameserver.settings import NameServerSettings
from graymq.protocol.health import add_up_lanes


class HealthService:
    def __init__(self, session: Session, settings: NameServerSettings) -> None:
        self.session = session
        self.settings = settings

    def check_database(self) -> None:
        """Raise when the database cannot answer ``SELECT 1``."""
        self.session.execute(select(1))

    def live_brokers(self) -> int:
        return BrokerRepository(self.session).count_live(utc_now())

    def consumer_health(self) -> dict[str, dict[str, dict[str, float]]]:
        """Per group and lane (base included), the live consumers' reports added up
        (``protocol.health.add_up_lanes``)."""
        seen_after = utc_now() - timedelta(seconds=self.settings.client_expiry_seconds)
        reports: dict[str, list[dict[str, Any]]] = {}
        for group, health in ClientRepository(self.session).live_health(seen_after):
            reports.setdefault(group, []).append(health)
        return {group: add_up_lanes(group_reports) for group, group_reports in reports.items()}

    def live_clients(self) -> list[tuple[str, str, bool, str | None, int]]:
        seen_after = utc_now() - timedelta(seconds=self.settings.client_expiry_seconds)
        return ClientRepository(self.session).live_counts(seen_after)

    def group_releases(self) -> list[GroupRelease]:
        """Every group's gray switch, weight and cutover operations counted by kind and state."""
        operations: dict[str, dict[tuple[str, str], int]] = {}
        for group, kind, state, count in CutoverRepository(self.session).counts():
            operations.setdefault(group, {})[(kind, state)] = count
        return [GroupRelease(g.name, g.gray_switch, g.gray_weight, operations.get(g.name, {}))
                for g in GroupRepository(self.session).all()]
