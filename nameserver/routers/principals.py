"""Principals and their tokens (admin only; brokers read the token digests)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Response, status

from graymq.nameserver.auth import AdminActor, BrokerCaller
from graymq.nameserver.deps import Principals, SettingsDep
from graymq.nameserver.schemas import (
    PrincipalCreate,
    PrincipalDigests,
    PrincipalPath,
    PrincipalToken,
    PrincipalView,
)

router = APIRouter(prefix="/v1/principals", tags=["principals"])


@router.get("")
def list_principals(_actor: AdminActor, principals: Principals) -> list[PrincipalView]:
    """Every principal with its rights (never a token)."""
    return principals.all()


@router.get("/digests", response_model=PrincipalDigests, responses={
    status.HTTP_304_NOT_MODIFIED: {"description": "the list is the one whose version ``If-None-Match`` names"}})
def principal_digests(_caller: BrokerCaller, principals: Principals, settings: SettingsDep, response: Response,
                      if_none_match: Annotated[str | None, Header(max_length=1024)] = None
                      ) -> PrincipalDigests | Response:
    """For brokers (broker right): every principal's token SHA-256 and rights, then the bootstrap admin tokens
    (``GRAYMQ_ADMIN_TOKENS``) as admins and the bootstrap broker tokens (``GRAYMQ_BROKER_TOKENS``) as brokers, and
    a ``version`` that changes with them, so a broker can check tokens itself and keep doing so while the name
    server is down. The version is the answer's ``ETag``: a broker reading again every registration sends the one
    it has as ``If-None-Match``, and while the list is the same gets 304 with no body."""
    digests = principals.digests(settings.admin_tokens, settings.broker_tokens)
    etag = f'"{digests.version}"'
    if if_none_match is not None and etag in (tag.strip() for tag in if_none_match.split(",")):
        return Response(status_code=status.HTTP_304_NOT_MODIFIED, headers={"ETag": etag})
    response.headers["ETag"] = etag
    return digests


@router.post("", status_code=status.HTTP_201_CREATED)
def add_principal(body: PrincipalCreate, actor: AdminActor, principals: Principals) -> PrincipalToken:
    """Create a principal; the answer holds its token, shown this once (409 when the name is taken). Audited."""
    return principals.add(body, actor)


@router.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT)
def remove_principal(name: PrincipalPath, actor: AdminActor, principals: Principals) -> None:
    """Remove a principal (404 unknown); its token stops working at once. Audited."""
    principals.remove(name, actor)


@router.post("/{name}/rotate")
def rotate_principal(name: PrincipalPath, actor: AdminActor, principals: Principals) -> PrincipalToken:
    """Give the principal a new token (shown this once); the old one stops working at once. Audited."""
    return principals.rotate(name, actor)
