"""Principals: add, list, remove, rotate; every change audited (the token itself never leaves this call)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from sqlalchemy.orm import Session

from graymq.nameserver.auth import BOOTSTRAP_BROKER_NAMES, new_access_key, new_token, token_sha256
from graymq.nameserver.clock import utc_now
from graymq.nameserver.errors import Conflict, NotFound
from graymq.nameserver.models import Principal
from graymq.nameserver.repositories.principals import PrincipalRepository
from graymq.nameserver.schemas import (
    PrincipalCreate,
    PrincipalDigest,
    PrincipalDigests,
    PrincipalToken,
    PrincipalView,
)
from graymq.nameserver.services.audit import AuditService
from graymq.nameserver.settings import DEV_TOKEN


def principal_view(principal: Principal) -> PrincipalView:
    return PrincipalView(name=principal.name, produce=principal.produce, consume=principal.consume,
                         admin=principal.admin, broker=principal.broker, broker_names=principal.broker_names,
                         access_key=principal.access_key, created_at=principal.created_at,
                         updated_at=principal.updated_at)


def _rights(principal: Principal) -> dict[str, object]:
    return principal_view(principal).model_dump(include={"produce", "consume", "admin", "broker", "broker_names"})


class PrincipalService:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.principals = PrincipalRepository(session)
        self.audit = AuditService(session)

    def all(self) -> list[PrincipalView]:
        return [principal_view(p) for p in self.principals.all()]

    def digests(self, admin_tokens: Mapping[str, str], broker_tokens: Mapping[str, str]) -> PrincipalDigests:
        """Every principal's token digest and rights, for brokers to cache and enforce on their own.

        The bootstrap admin tokens (``admin_tokens``, name → secret) follow as admins, so a broker accepts
        the admins the name server accepts; never the built-in dev token. A principal's access key comes with its
        secret (brokers check stock clients' HMAC signatures with it). The bootstrap broker tokens
        (``broker_tokens``) follow with the broker right for any broker name, so the replicas of a set
        deployed with one of them authenticate to their leader. ``version`` hashes the whole list: it
        changes with any principal and with the bootstrap tokens.
        """
        principals = [
            PrincipalDigest(name=p.name, token_sha256=p.token_sha256, produce=p.produce, consume=p.consume,
                            admin=p.admin, broker=p.broker, broker_names=p.broker_names, access_key=p.access_key,
                            secret_key=p.secret_key)
            for p in self.principals.all()
        ]
        principals += [
            PrincipalDigest(name=name, token_sha256=token_sha256(secret), produce=[], consume=[], admin=True,
                            broker=False, broker_names=[])
            for name, secret in sorted(admin_tokens.items()) if secret != DEV_TOKEN
        ]
        principals += [
            PrincipalDigest(name=name, token_sha256=token_sha256(secret), produce=[], consume=[], admin=False,
                            broker=True, broker_names=list(BOOTSTRAP_BROKER_NAMES))
            for name, secret in sorted(broker_tokens.items()) if secret != DEV_TOKEN
        ]
        content = "\n".join(p.model_dump_json() for p in principals)
        return PrincipalDigests(version=hashlib.sha256(content.encode()).hexdigest()[:16], principals=principals)

    def add(self, body: PrincipalCreate, actor: str) -> PrincipalToken:
        """409 when the name is taken."""
        if self.principals.get(body.name) is not None:
            raise Conflict(f"principal {body.name} already exists: remove it, or rotate its token")
        token, now = new_token(), utc_now()
        access_key, secret_key = new_access_key() if body.access_key else (None, None)
        principal = Principal(name=body.name, token_sha256=token_sha256(token), produce=body.produce,
                              consume=body.consume, admin=body.admin, broker=body.broker,
                              broker_names=body.broker_names or [], access_key=access_key, secret_key=secret_key,
                              created_at=now, updated_at=now)
        self.principals.add(principal)
        self.audit.record(actor=actor, object_type="principal", object_id=body.name, action="add",
                          after={**_rights(principal), "access_key": access_key})
        self.session.commit()
        return PrincipalToken(name=body.name, token=token, access_key=access_key, secret_key=secret_key)

    def _get(self, name: str) -> Principal:
        principal = self.principals.get(name)
        if principal is None:
            raise NotFound(f"principal {name} does not exist")
        return principal

    def remove(self, name: str, actor: str) -> None:
        principal = self._get(name)
        before = _rights(principal)
        self.principals.delete(principal)
        self.audit.record(actor=actor, object_type="principal", object_id=name, action="remove", before=before)
        self.session.commit()

    def rotate(self, name: str, actor: str) -> PrincipalToken:
        """A new token for the principal, and a new secret for its access key if it has one (the key stays); the
        old ones stop working at once (on a broker: once it learns the new list)."""
        principal = self._get(name)
        token = new_token()
        principal.token_sha256 = token_sha256(token)
        if principal.access_key is not None:
            principal.secret_key = new_access_key()[1]
        principal.updated_at = utc_now()
        self.audit.record(actor=actor, object_type="principal", object_id=name, action="rotate")
        self.session.commit()
        return PrincipalToken(name=name, token=token, access_key=principal.access_key,
                              secret_key=principal.secret_key)
