"""Small builders for call-log tests."""

from __future__ import annotations

import time
from pathlib import Path

from bot.calllog import CallLog
from bot.calllog.settings import CallLogSettings
from bot.pipeline.turn import STAGES, Turn

FAST = CallLogSettings(batch_window_ms=5, write_timeout_s=2.0, retry_s=0.2)


def a_turn(call_id: str, n: int, *, text: str = "where is my order") -> Turn:
    """A finished turn with every stage marked, 50 ms apart."""
    turn = Turn(call_id=call_id, transcript=f"{text} {n}", answer=f"it ships today {n}")
    turn.route = "llm"
    base = time.monotonic() - 1.0
    for i, stage in enumerate(STAGES):
        turn.mark(stage, base + 0.05 * i)
    turn.model_ms["asr"] = 12.5
    return turn


async def open_log(
    url: str, spool: Path, *, node: str = "test-node", options: CallLogSettings = FAST
) -> CallLog:
    return await CallLog.open(
        url, spool_dir=spool, node=node, config_version="0" * 64, options=options
    )


async def wait_for(predicate: object, timeout_s: float = 10.0) -> None:
    """Poll ``predicate()`` (sync or async) until true."""
    import asyncio  # noqa: PLC0415
    import inspect  # noqa: PLC0415

    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()  # type: ignore[operator]
        if inspect.isawaitable(value):
            value = await value
        if value:
            return
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)
