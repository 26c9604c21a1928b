"""The audit log: every change, who made it, when, and the thing before and after."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from admin.db import now
from admin.models import AuditEntry


def record(
    session: AsyncSession,
    actor: str,
    action: str,
    target: str,
    *,
    before: Any = None,
    after: Any = None,
) -> None:
    """Add an audit entry to ``session``: committed with the change itself, or not at all."""
    session.add(
        AuditEntry(at=now(), actor=actor, action=action, target=target, before=before, after=after)
    )
