"""Principals (tokens kept as SHA-256 only, and rights)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from graymq.nameserver.models import Principal


class PrincipalRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, name: str) -> Principal | None:
        return self.session.scalars(select(Principal).where(Principal.name == name)).one_or_none()

    def by_token_sha256(self, digest: str) -> Principal | None:
        return self.session.scalars(select(Principal).where(Principal.token_sha256 == digest)).one_or_none()

    def by_access_key(self, access_key: str) -> Principal | None:
        return self.session.scalars(select(Principal).where(Principal.access_key == access_key)).one_or_none()

    def all(self) -> Sequence[Principal]:
        return self.session.scalars(select(Principal).order_by(Principal.name)).all()

    def add(self, principal: Principal) -> None:
        self.session.add(principal)
        self.session.flush()

    def delete(self, principal: Principal) -> None:
        self.session.delete(principal)
        self.session.flush()
