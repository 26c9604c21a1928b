"""Helpers of the SipServer tests: a recording on_call, tones, waiting, process checks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

from telephony import AudioIn, CallEnded, InboundEvent
from telephony.dialer import DialGate, DialResult, dial
from telephony.remote_call import RemoteCall

RATE = 8000


async def wait_until(cond: Callable[[], bool], timeout_s: float = 5.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met in {timeout_s} s: {what}")
        await asyncio.sleep(0.02)


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def tone(freq: float, seconds: float, amplitude: int = 8000) -> bytes:
    t = np.arange(int(seconds * RATE)) / RATE
    return (amplitude * np.sin(2 * np.pi * freq * t)).astype("<i2").tobytes()


class Calls:
    """on_call for tests: records every call's events; optional per-call behaviour."""

    def __init__(self) -> None:
        self.calls: list[RemoteCall] = []
        self.events: dict[str, list[InboundEvent]] = {}
        self.echo = False
        self.action: Callable[[RemoteCall], Awaitable[None]] | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    async def __call__(self, call: RemoteCall) -> None:
        self.calls.append(call)
        events = self.events.setdefault(call.call_id, [])
        if self.action is not None:
            task = asyncio.get_running_loop().create_task(self.action(call))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        async for event in call.receive():
            events.append(event)
            if self.echo and isinstance(event, AudioIn):
                call.send(event.pcm)

    def ended(self) -> list[CallEnded]:
        return [e for evs in self.events.values() for e in evs if isinstance(e, CallEnded)]

    def frames(self, call_id: str) -> int:
        return sum(1 for e in self.events.get(call_id, []) if isinstance(e, AudioIn))


async def all_ready(gates: list[DialGate], timeout_s: float = 60.0) -> None:
    """Wait until every gate's dialer is set up (each a process that takes seconds to start
    on a busy machine), so that calls placed next overlap as the test means them to."""
    await asyncio.wait_for(asyncio.gather(*(g.ready.wait() for g in gates)), timeout_s)


async def dial_tone(
    port: int, freq: float, seconds: float = 3.0, uri_params: str = "", **kw: Any
) -> DialResult:
    return await dial(
        f"sip:bot@127.0.0.1:{port}{uri_params}",
        play=tone(freq, seconds - 1.0),
        play_at_s=0.2,
        record_seconds=seconds,
        **kw,
    )
