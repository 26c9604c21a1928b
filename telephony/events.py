"""Typed events a call surfaces to asyncio, in arrival order."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AudioIn:
    """One 20 ms frame of caller audio: PCM16 LE mono at the endpoint's sample rate."""

    pcm: bytes
    at: float  # time.monotonic() when the conference bridge handed the frame over


@dataclass(frozen=True, slots=True)
class DtmfIn:
    """A DTMF digit (RFC 4733 telephone-event, or SIP INFO)."""

    digit: str
    duration_ms: int
    at: float


@dataclass(frozen=True, slots=True)
class CallEnded:
    """Last event of a call; the receive iterator stops after it."""

    reason: str
    by_remote: bool
    at: float


InboundEvent = AudioIn | DtmfIn | CallEnded
