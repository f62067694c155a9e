"""Request-scoped dependencies: settings, a database session, and the services built on it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from graymq.nameserver.refused_registrations import RefusedRegistrations
from graymq.nameserver.services.audit import AuditService
from graymq.nameserver.services.clients import ClientService
from graymq.nameserver.services.cutovers import CutoverService
from graymq.nameserver.services.groups import GroupService
from graymq.nameserver.services.health import HealthService
from graymq.nameserver.services.lanes import LaneService
from graymq.nameserver.services.principals import PrincipalService
from graymq.nameserver.services.registry import RegistryService
from graymq.nameserver.services.replica_sets import ReplicaSetService
from graymq.nameserver.services.topics import TopicService
from graymq.nameserver.settings import NameServerSettings


def get_settings(request: Request) -> NameServerSettings:
    settings: NameServerSettings = request.app.state.settings
    return settings


def get_session(request: Request) -> Iterator[Session]:
    """One session per request; services commit their changes, anything uncommitted is rolled back.
    GET requests only read (on SQLite they then take no write lock)."""
    state = request.app.state
    with (state.read_sessions if request.method in ("GET", "HEAD") else state.sessions)() as session:
        yield session


SettingsDep = Annotated[NameServerSettings, Depends(get_settings)]
SessionDep = Annotated[Session, Depends(get_session)]


def get_refused_registrations(request: Request) -> RefusedRegistrations:
    refused: RefusedRegistrations = request.app.state.refused_registrations
    return refused


RefusedDep = Annotated[RefusedRegistrations, Depends(get_refused_registrations)]


def registry_service(session: SessionDep, settings: SettingsDep) -> RegistryService:
    return RegistryService(session, settings)


def replica_set_service(session: SessionDep, settings: SettingsDep) -> ReplicaSetService:
    return ReplicaSetService(session, settings)


def topic_service(session: SessionDep, settings: SettingsDep) -> TopicService:
    return TopicService(session, settings)


def client_service(session: SessionDep, settings: SettingsDep) -> ClientService:
    return ClientService(session, settings)


def group_service(session: SessionDep, settings: SettingsDep) -> GroupService:
    return GroupService(session, settings)


def lane_service(session: SessionDep, settings: SettingsDep) -> LaneService:
    return LaneService(session, settings)


def cutover_service(session: SessionDep) -> CutoverService:
    return CutoverService(session)


def audit_service(session: SessionDep) -> AuditService:
    return AuditService(session)


def principal_service(session: SessionDep) -> PrincipalService:
    return PrincipalService(session)


def health_service(session: SessionDep, settings: SettingsDep) -> HealthService:
    return HealthService(session, settings)


Registry = Annotated[RegistryService, Depends(registry_service)]
ReplicaSets = Annotated[ReplicaSetService, Depends(replica_set_service)]
Topics = Annotated[TopicService, Depends(topic_service)]
Clients = Annotated[ClientService, Depends(client_service)]
Groups = Annotated[GroupService, Depends(group_service)]
Lanes = Annotated[LaneService, Depends(lane_service)]
Cutovers = Annotated[CutoverService, Depends(cutover_service)]
Audit = Annotated[AuditService, Depends(audit_service)]
Health = Annotated[HealthService, Depends(health_service)]
Principals = Annotated[PrincipalService, Depends(principal_service)]
