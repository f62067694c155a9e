"""The audit log."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from graymq.nameserver.deps import Audit
from graymq.nameserver.schemas import AuditView, GroupName, Text

router = APIRouter(prefix="/v1/audit", tags=["audit"])


@router.get("")
def audit_log(
    audit: Audit,
    group: Annotated[GroupName | None, Query()] = None,
    object_type: Annotated[Text | None, Query(max_length=32)] = None,
    object_id: Annotated[Text | None, Query(max_length=255)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[AuditView]:
    """Entries newest first, optionally for one group, object type or object."""
    return audit.query(group=group, object_type=object_type, object_id=object_id, limit=limit)
