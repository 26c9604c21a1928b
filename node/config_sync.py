"""The node's bot configuration kept at the database's newest version, without a restart.

At start the database's newest version is what the node runs (the profile file seeds an
empty database as version 1). Then the newest version number is polled every
``SWITCHBOARD_ADMIN__CONFIG_POLL_S``; a newer version is loaded and handed to the node,
which uses it from its next call (and the intent cache from the next turn).

A version the node cannot apply (its check fails: an intent's examples not embedded in
time, say) leaves the node on the version it ran; the failure, with its reason, is written
to ``bot_config_nodes`` for the console (``bot.config.nodes``), and the version is tried
again (the cause may pass) until a newer one replaces it: after one poll, then after twice
as long each time, up to ``RETRY_MAX_S``. Applying a version embeds its examples and
synthesizes its answers; retried at every poll, a version that keeps failing would take
that work from live calls every two seconds. A newer version is tried at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from admin.audit import record
from bot.config import nodes as node_config
from bot.config import store as config_store
from bot.config.store import Versioned
from bot.profile import BotProfile
from bot.tasks import cancel_and_wait

log = logging.getLogger(__name__)

#: How long start-up waits for the database before running the profile file.
SEED_TIMEOUT_S = 5.0
#: The longest wait before a refused version is tried again.
RETRY_MAX_S = 300.0

Apply = Callable[[Versioned], Awaitable[None]]


class ConfigSync:
    """Seeds, then follows, the configuration versions of one database."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        poll_s: float,
        apply: Apply,
        node: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self._clock = clock
        #: When the refused version may be tried again, and the wait after that.
        self._retry_at = 0.0
        self._retry_wait = poll_s
        self.poll_s = poll_s
        self._apply = apply
        #: The name this node reports its versions under (None: it reports nothing).
        self.node = node
        self.version: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._failing = False
        #: The version that failed to apply, and why (reported once a version and reason).
        self.refused: tuple[int, str] | None = None

    async def initial(self, profile: BotProfile, source: str) -> Versioned | None:
        """The configuration to start with; None when the database is away (the file then)."""
        try:
            async with asyncio.timeout(SEED_TIMEOUT_S):
                found = await config_store.seed(self.engine, profile, source, audit=record)
        except Exception as exc:
            log.warning(
                "configuration database unreachable at start, running %s until it is back: %s",
                source,
                exc,
            )
            return None
        self.version = found.version
        await self._report_applied(found.version)
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
        await cancel_and_wait(self._task)
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
        refused_before = self.refused is not None and self.refused[0] == found.version
        if refused_before and self._clock() < self._retry_at:
            return False  # refused lately: tried again after the wait
        try:
            await self._apply(found)
        except Exception as exc:
            if not refused_before:
                self._retry_wait = self.poll_s
            self._retry_at = self._clock() + self._retry_wait
            self._retry_wait = min(self._retry_wait * 2, RETRY_MAX_S)
            await self._report_failed(found.version, node_config.reason_of(exc))
            raise
        self.version = found.version
        self.refused = None
        await self._report_applied(found.version)
        return True

    async def _report_applied(self, version: int) -> None:
        if self.node is None:
            return
        try:
            await node_config.report_applied(self.engine, self.node, version)
        except Exception as exc:  # the version is in use all the same
            log.warning("could not report configuration version %d in use: %s", version, exc)

    async def _report_failed(self, version: int, reason: str) -> None:
        if self.refused == (version, reason):
            return  # reported already
        self.refused = (version, reason)
        log.error(
            "configuration version %d not applied, still running version %s: %s",
            version,
            self.version,
            reason,
        )
        if self.node is None:
            return
        try:
            await node_config.report_failed(self.engine, self.node, version, reason)
        except Exception as exc:
            log.warning("could not report configuration version %d refused: %s", version, exc)

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
