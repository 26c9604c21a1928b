"""Phrases synthesized once, ahead of any call: greeting, apology, fillers."""

from __future__ import annotations

import logging
import time

from serve import TTS, ProviderError

log = logging.getLogger(__name__)

#: Tries per phrase: each is the synthesizer's own timeout and retry. A node that starts
#: on a busy machine (or a configuration applied during calls) waits longer for its
#: phrases rather than failing; a synthesizer that is really broken still fails the start.
ATTEMPTS = 3


class PromptAudio:
    """Ready telephone audio for fixed phrases, keyed by their text."""

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self._audio: dict[str, bytes] = {}

    async def add(self, tts: TTS, text: str) -> bytes:
        """Synthesize ``text`` (once) and keep it."""
        if text not in self._audio:
            started = time.monotonic()
            for attempt in range(1, ATTEMPTS + 1):
                try:
                    chunks = [c async for c in tts.synthesize(text, sample_rate=self.sample_rate)]
                    break
                except ProviderError as exc:
                    if attempt == ATTEMPTS:
                        raise
                    log.warning("pre-synthesis of %r failed (%s); trying again", text[:40], exc)
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
