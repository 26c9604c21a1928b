"""The nodes' load, where the tier's autoscaling policy can read it.

Each bot node reports its calls in flight and its call-queue depth every
``report_every_s`` to one named Ray actor, the ``LoadBoard``; each replica of the tier reads
the board's totals in ``record_autoscaling_stats``, and Serve hands them to the policy
(``serve.scale.policy``). A node that stops reporting (gone, or cut off) stops counting
after ``report_stale_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import ray

from serve.scale.policy import CALL_QUEUE_DEPTH, CALLS_IN_FLIGHT, NODES_REPORTING
from serve.scale.settings import TierSettings

log = logging.getLogger(__name__)

BOARD_NAME = "switchboard-load-board"


class LoadBoard:
    """The latest report of each node (a Ray actor; see ``load_board``)."""

    def __init__(self) -> None:
        self._reports: dict[str, tuple[float, float, float]] = {}

    def report(self, node: str, calls_in_flight: float, call_queue_depth: float) -> None:
        self._reports[node] = (time.monotonic(), float(calls_in_flight), float(call_queue_depth))

    def forget(self, node: str) -> None:
        self._reports.pop(node, None)

    def totals(self, stale_s: float) -> dict[str, float]:
        """The sums over nodes that reported within ``stale_s``."""
        now = time.monotonic()
        fresh = [r for r in self._reports.values() if now - r[0] <= stale_s]
        return {
            CALLS_IN_FLIGHT: sum(r[1] for r in fresh),
            CALL_QUEUE_DEPTH: sum(r[2] for r in fresh),
            NODES_REPORTING: float(len(fresh)),
        }


def load_board(tier: TierSettings) -> Any:
    """A handle to the cluster's board, created on first use (Ray must be connected)."""
    actor = ray.remote(num_cpus=0, max_restarts=-1)(LoadBoard)
    return actor.options(
        name=BOARD_NAME, namespace=tier.namespace, get_if_exists=True, lifetime="detached"
    ).remote()


def remove_board(tier: TierSettings) -> bool:
    """Kill the board (``switchboard serve shutdown``); False when there was none."""
    try:
        board = ray.get_actor(BOARD_NAME, namespace=tier.namespace)
    except ValueError:
        return False
    ray.kill(board)
    return True


class LoadReporter:
    """A node's task reporting ``calls_in_flight()`` and ``call_queue_depth()``."""

    def __init__(
        self,
        tier: TierSettings,
        node: str,
        calls_in_flight: Callable[[], int],
        call_queue_depth: Callable[[], int],
    ) -> None:
        self._tier = tier
        self._node = node
        self._in_flight = calls_in_flight
        self._queued = call_queue_depth
        self._board: Any = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._board = load_board(self._tier)
        self._task = asyncio.create_task(self._run(), name="tier-load-report")

    async def report_now(self) -> None:
        """One report (also the loop's body)."""
        await self._board.report.remote(self._node, self._in_flight(), self._queued())

    async def _run(self) -> None:
        while True:
            try:
                await self.report_now()
            except Exception as exc:  # the board restarts; the next report goes through
                log.warning("tier load report failed: %s", exc)
            await asyncio.sleep(self._tier.report_every_s)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._board is not None:
            with contextlib.suppress(Exception):
                await self._board.forget.remote(self._node)
