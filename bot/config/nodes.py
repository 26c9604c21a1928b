"""Which configuration version each node runs, and the last one it could not apply.

A node writes its own row (``ConfigSync``): the version it applied, or the version its
check refused and why (an intent's examples not embedded in time, say). The admin API
reads them back, so that the console can show a version as "not applied on node X" while
that node keeps the last version it applied.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from bot.config.models import NodeConfigState, aware, now

#: A failure's reason is kept to this many characters (an exception's text can be long).
MAX_REASON = 500


@dataclass(frozen=True)
class NodeConfig:
    """One node's configuration state, as read back."""

    node: str
    applied_version: int | None
    applied_at: datetime | None
    failed_version: int | None
    failed_reason: str | None
    failed_at: datetime | None


def reason_of(exc: BaseException) -> str:
    """An exception as a reason an operator reads: its type and text, shortened."""
    text = str(exc).replace("\x00", "").strip()
    reason = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 1] + "…"


async def _write(engine: AsyncEngine, node: str, **values: object) -> None:
    async with AsyncSession(engine) as session:
        row = await session.get(NodeConfigState, node)
        if row is None:
            session.add(NodeConfigState(node=node, **values))
        else:
            for key, value in values.items():
                setattr(row, key, value)
        try:
            await session.commit()
        except IntegrityError:  # the same node name written twice at once: the other won
            await session.rollback()


async def report_applied(engine: AsyncEngine, node: str, version: int) -> None:
    """``node`` runs ``version`` now; a failure of that version or an older one is over."""
    async with AsyncSession(engine) as session:
        row = await session.get(NodeConfigState, node)
        failed = row.failed_version if row is not None else None
    clear = failed is not None and failed <= version
    values: dict[str, object] = {"applied_version": version, "applied_at": now()}
    if clear:
        values |= {"failed_version": None, "failed_reason": None, "failed_at": None}
    await _write(engine, node, **values)


async def report_failed(engine: AsyncEngine, node: str, version: int, reason: str) -> None:
    """``node`` could not apply ``version`` (and keeps the version it ran)."""
    await _write(
        engine,
        node,
        failed_version=version,
        failed_reason=reason[:MAX_REASON],
        failed_at=now(),
    )


async def node_states(session: AsyncSession) -> list[NodeConfig]:
    """Every node that reported, by name."""
    rows = (
        (await session.execute(select(NodeConfigState).order_by(NodeConfigState.node)))
        .scalars()
        .all()
    )
    return [
        NodeConfig(
            node=r.node,
            applied_version=r.applied_version,
            applied_at=aware(r.applied_at),
            failed_version=r.failed_version,
            failed_reason=r.failed_reason,
            failed_at=aware(r.failed_at),
        )
        for r in rows
    ]
