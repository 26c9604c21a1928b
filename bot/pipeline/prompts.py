"""Phrases synthesized once, ahead of any call: greeting, apology, fillers."""

from __future__ import annotations

import logging
import time

from serve import TTS

log = logging.getLogger(__name__)


class PromptAudio:
    """Ready telephone audio for fixed phrases, keyed by their text."""

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self._audio: dict[str, bytes] = {}

    async def add(self, tts: TTS, text: str) -> bytes:
        """Synthesize ``text`` (once) and keep it."""
        if text not in self._audio:
            started = time.monotonic()
            chunks = [c async for c in tts.synthesize(text, sample_rate=self.sample_rate)]
            self._audio[text] = b"".join(chunks)
            log.info(
                "pre-synthesized %r in %.0f ms", text[:40], (time.monotonic() - started) * 1000
            )
        return self._audio[text]

    def find(self, text: str) -> bytes | None:
        """The audio for ``text``, or None if it was never added."""
        return self._audio.get(text)

    def get(self, text: str) -> bytes:
        """The audio for ``text``; KeyError if it was never added."""
        return self._audio[text]
