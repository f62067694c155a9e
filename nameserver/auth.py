"""Bearer-token authentication of admin calls; the token's configured name is the audit actor."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from graymq.nameserver.errors import Unauthorized

_bearer = HTTPBearer(auto_error=False, description="an admin token from GRAYMQ_ADMIN_TOKENS")
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def actor_for(token_actors: Mapping[str, str], presented: str) -> str | None:
    """The actor name of the presented token, comparing against every secret in constant time."""
    actor = None
    for secret, name in token_actors.items():
        if hmac.compare_digest(secret.encode(), presented.encode()):
            actor = name
    return actor


def admin_actor(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> str:
    """Dependency of every admin mutation: 401 unless a configured bearer token is presented."""
    if credentials is None:
        raise Unauthorized("missing bearer token", "send Authorization: Bearer <admin token>", _CHALLENGE)
    actor = actor_for(request.app.state.token_actors, credentials.credentials)
    if actor is None:
        raise Unauthorized("invalid bearer token", None, _CHALLENGE)
    return actor


AdminActor = Annotated[str, Depends(admin_actor)]
