"""The bot's configuration in the database: versions of the whole profile, newest wins.

A change is the current profile with one part replaced, validated as a whole by
``BotProfile`` (so a threshold out of range, an example two intents share, a transfer
without a target are refused before anything is written), then written as the next
version. Nodes poll the newest version number and load a newer one on the next call.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from bot.config import limits
from bot.config.models import ConfigVersion, aware, now
from bot.profile import BotProfile


class Audit(Protocol):
    """Who writes a version's audit entry, in the version's own transaction (the admin's
    audit log: ``admin.audit.record``)."""

    def __call__(
        self,
        session: AsyncSession,
        actor: str,
        action: str,
        target: str,
        *,
        before: Any = None,
        after: Any = None,
    ) -> None: ...


@dataclass(frozen=True)
class ConfigProblem:
    """One reason a configuration is refused: where (a path of field names) and why."""

    loc: tuple[str | int, ...]
    msg: str


class ConfigRejected(ValueError):
    """A change that would make the configuration invalid; nothing was written."""

    def __init__(self, problems: list[ConfigProblem]) -> None:
        super().__init__("; ".join(f"{'.'.join(map(str, p.loc))}: {p.msg}" for p in problems))
        self.problems = problems


class ConfigConflict(RuntimeError):
    """Someone else wrote a version at the same moment: read again and retry."""


@dataclass(frozen=True)
class Versioned:
    """A configuration version and its profile."""

    version: int
    created_at: datetime
    created_by: str
    comment: str
    profile: BotProfile


def _control_characters(data: Any, loc: tuple[str | int, ...] = ()) -> list[ConfigProblem]:
    """Text with a NUL character: nothing a caller should hear, nor PostgreSQL store as text."""
    if isinstance(data, str):
        return [ConfigProblem(loc, "must not contain NUL characters")] if "\x00" in data else []
    if isinstance(data, dict):
        return [p for k, v in data.items() for p in _control_characters(v, (*loc, k))]
    if isinstance(data, list):
        return [p for i, v in enumerate(data) for p in _control_characters(v, (*loc, i))]
    return []


def validate(data: dict[str, Any]) -> BotProfile:
    """``data`` as a profile, or ``ConfigRejected`` naming each field and reason: a size
    beyond what a node can apply (``bot.config.limits``) first, then the profile's own rules."""
    too_large = limits.problems(data)
    if too_large:
        raise ConfigRejected([ConfigProblem(loc, msg) for loc, msg in too_large])
    problems = _control_characters(data)
    if problems:
        raise ConfigRejected(problems)
    try:
        return BotProfile.model_validate(data)
    except ValidationError as exc:
        raise ConfigRejected(
            [
                ConfigProblem(
                    tuple(p for p in err["loc"]), err["msg"].removeprefix("Value error, ")
                )
                for err in exc.errors(include_url=False)
            ]
        ) from None


def _versioned(row: ConfigVersion) -> Versioned:
    created = aware(row.created_at)
    assert created is not None
    return Versioned(
        version=row.version,
        created_at=created,
        created_by=row.created_by,
        comment=row.comment,
        profile=BotProfile.model_validate(row.profile),
    )


async def latest_version(session: AsyncSession) -> int | None:
    """The newest version's number (None: no configuration in the database yet)."""
    return (await session.execute(select(func.max(ConfigVersion.version)))).scalar_one()


async def latest(session: AsyncSession) -> Versioned | None:
    """The configuration nodes run now."""
    row = (
        await session.execute(select(ConfigVersion).order_by(ConfigVersion.version.desc()).limit(1))
    ).scalar_one_or_none()
    return None if row is None else _versioned(row)


async def get_version(session: AsyncSession, version: int) -> Versioned | None:
    row = await session.get(ConfigVersion, version)
    return None if row is None else _versioned(row)


async def save(
    session: AsyncSession,
    profile: BotProfile,
    *,
    actor: str,
    action: str,
    target: str,
    before: Any,
    after: Any,
    base: int | None,
    audit: Audit,
) -> int:
    """Write ``profile`` as the version after ``base`` (audited with it, by ``audit``); the
    new number.

    ``ConfigConflict`` when ``base`` is no longer the newest (another change won).
    """
    if await latest_version(session) != base:
        raise ConfigConflict("the configuration changed meanwhile: read it again")
    version = (base or 0) + 1
    session.add(
        ConfigVersion(
            version=version,
            created_at=now(),
            created_by=actor,
            comment=f"{action} {target}",
            profile=profile.model_dump(mode="json"),
        )
    )
    audit(session, actor, action, target, before=before, after=after)
    try:
        await session.flush()
    except IntegrityError:
        raise ConfigConflict("the configuration changed meanwhile: read it again") from None
    return version


def _unaudited(
    session: AsyncSession,
    actor: str,
    action: str,
    target: str,
    *,
    before: Any = None,
    after: Any = None,
) -> None:
    """No audit entry (a database without the admin's audit log in use)."""


async def seed(
    engine: AsyncEngine, profile: BotProfile, source: str, *, audit: Audit = _unaudited
) -> Versioned:
    """The newest configuration; an empty table first gets ``profile`` as version 1
    (audited by ``audit``: the node passes the admin's audit log)."""
    async with AsyncSession(engine, expire_on_commit=False) as session:
        found = await latest(session)
        if found is not None:
            return found
        try:
            await save(
                session,
                profile,
                actor=source,
                action="config.seed",
                target=source,
                before=None,
                after={"name": profile.name},
                base=None,
                audit=audit,
            )
            await session.commit()
        except ConfigConflict:
            await session.rollback()  # another node seeded it first
        found = await latest(session)
        assert found is not None
        return found
