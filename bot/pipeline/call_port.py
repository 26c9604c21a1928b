"""What a call session needs from a call: the boundary to telephony/."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from telephony.events import InboundEvent, TransferResult


class CallPort(Protocol):
    """A live call as the bot sees it (``telephony.CallHandle`` implements it)."""

    call_id: str
    sample_rate: int
    #: The caller's and the called SIP URIs (personal data: mask before logging).
    remote_uri: str
    local_uri: str
    #: ``time.monotonic()`` when the call was answered.
    answered_at: float

    @property
    def queued_frames(self) -> int: ...

    def receive(self) -> AsyncIterator[InboundEvent]: ...

    def send(self, pcm: bytes) -> None: ...

    def clear_playout(self) -> int: ...

    async def wait_playout_drained(self) -> None: ...

    async def hangup(self) -> None: ...

    async def transfer(self, target: str, *, timeout_s: float = ...) -> TransferResult:
        """Blind transfer (SIP REFER to ``target``); the outcome, the call still up."""
        ...

    async def bridge(
        self, target: str, *, timeout_s: float = ..., summary: bytes = ...
    ) -> TransferResult:
        """Bridged transfer: call ``target`` and join it to this call, the agent first
        hearing ``summary`` (PCM at the call's rate); the outcome. Once joined, the bot
        gets no more of the caller's audio."""
        ...
