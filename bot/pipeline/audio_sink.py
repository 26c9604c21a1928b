"""The bot's side of a call's audio, as the pipeline sees it."""

from __future__ import annotations

from typing import Protocol


class AudioSink(Protocol):
    """Where the bot's speech goes: a call's playout queue."""

    @property
    def queued_frames(self) -> int:
        """20 ms frames waiting to be played to the caller."""
        ...

    def send(self, pcm: bytes) -> None:
        """Queue 16-bit mono PCM for the caller (non-blocking)."""

    async def wait_playout_drained(self) -> None:
        """Return once everything queued has been played (or the call ended)."""

    def clear_playout(self) -> int:
        """Drop all queued audio; return how many frames were dropped."""
        ...
