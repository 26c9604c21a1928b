"""The node's bot configuration kept at the database's newest version, without a restart.

At start the database's newest version is what the node runs (the profile file seeds an
empty database as version 1). Then the newest version number is polled every
``SWITCHBOARD_ADMIN__CONFIG_POLL_S``; a newer version is loaded and handed to the node,
which uses it from its next call (and the intent cache from the next turn).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from admin import config_store
from admin.config_store import Versioned
from bot.profile import BotProfile

log = logging.getLogger(__name__)

#: How long start-up waits for the database before running the profile file.
SEED_TIMEOUT_S = 5.0

Apply = Callable[[Versioned], Awaitable[None]]


class ConfigSync:
    """Seeds, then follows, the configuration versions of one database."""

    def __init__(self, engine: AsyncEngine, *, poll_s: float, apply: Apply) -> None:
        self.engine = engine
        self.poll_s = poll_s
        self._apply = apply
        self.version: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    async def initial(self, profile: BotProfile, source: str) -> Versioned | None:
        """The configuration to start with; None when the database is away (the file then)."""
        try:
            async with asyncio.timeout(SEED_TIMEOUT_S):
                found = await config_store.seed(self.engine, profile, source)
        except Exception as exc:
            log.warning(
                "configuration database unreachable at start, running %s until it is back: %s",
                source,
                exc,
            )
            return None
        self.version = found.version
        if found.profile != profile:
            log.info(
                "running configuration version %d from the database (the profile file only "
                "seeds an empty database; `switchboard admin import-profile` loads it)",
                found.version,
            )
        return found

    def start(self) -> None:
        self._task = asyncio.create_task(self._poll(), name="config-sync")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def check(self) -> bool:
        """Load and apply a newer version if there is one; True if it did."""
        async with AsyncSession(self.engine) as session:
            newest = await config_store.latest_version(session)
            if newest is None or newest == self.version:
                return False
            found = await config_store.get_version(session, newest)
        if found is None:  # pragma: no cover - versions are never deleted
            return False
        await self._apply(found)
        self.version = found.version
        return True

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.poll_s)
            try:
                await self.check()
            except Exception as exc:
                if not self._failing:
                    log.warning("configuration check failed (retrying): %s", exc)
                self._failing = True
            else:
                self._failing = False
