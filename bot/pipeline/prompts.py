"""Phrases synthesized once, ahead of any call: greeting, apology, fillers."""

from __future__ import annotations

import logging
import re
import time

from bot.pipeline.said_ahead import SaidAhead
from bot.pipeline.speech_cache import SpeechCache, pre_synthesized
from serve import TTS, ProviderError
from serve.audio import trim_trailing_silence

log = logging.getLogger(__name__)

#: Tries per phrase: each is the synthesizer's own timeout and retry. A node that starts
#: on a busy machine (or a configuration applied during calls) waits longer for its
#: phrases rather than failing; a synthesizer that is really broken still fails the start.
ATTEMPTS = 3
#: The silence between two phrases joined at a comma, in place of the first one's own
#: trailing silence: a clause's pause, as a speaker makes it.
CLAUSE_PAUSE_MS = 150
_COMMA = re.compile(r", ")


class PromptAudio:
    """Ready telephone audio for fixed phrases, keyed by their text."""

    def __init__(self, sample_rate: int, *, speech_cache: SpeechCache | None = None) -> None:
        self.sample_rate = sample_rate
        #: Audio of earlier starts, read instead of synthesizing (None: always synthesize).
        self.speech_cache = speech_cache
        self._audio: dict[str, bytes] = {}
        self._pause = bytes(2 * round(sample_rate * CLAUSE_PAUSE_MS / 1000))
        #: The operator's words a turn will say that are not among these phrases (a
        #: two-choice question), synthesized in the caller's pause (said_ahead.py).
        self.ahead = SaidAhead(sample_rate, speech_cache=speech_cache)

    async def add(self, tts: TTS, text: str) -> bytes:
        """Synthesize ``text`` (once, or read it from the speech cache) and keep it."""
        if text not in self._audio:
            started = time.monotonic()
            audio, from_disk = await pre_synthesized(
                self.speech_cache, tts, text, self.sample_rate, lambda: self._synthesize(tts, text)
            )
            self._audio[text] = audio
            log.info(
                "pre-synthesized %r in %.0f ms%s",
                text[:40],
                (time.monotonic() - started) * 1000,
                " (from disk)" if from_disk else "",
            )
        return self._audio[text]

    async def _synthesize(self, tts: TTS, text: str) -> bytes:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                chunks = [c async for c in tts.synthesize(text, sample_rate=self.sample_rate)]
                return b"".join(chunks)
            except ProviderError as exc:
                if attempt == ATTEMPTS:
                    raise
                log.warning("pre-synthesis of %r failed (%s); trying again", text[:40], exc)
        raise AssertionError("unreachable")

    def find(self, text: str) -> bytes | None:
        """The audio for ``text``, or None if it was never added: added itself, or made of
        two added phrases that ``text`` is, split at a comma and its space (a two-choice
        question from its halves, ``bot.intents.choice.choice_halves``), joined by a
        clause's pause."""
        audio = self._audio.get(text)
        if audio is not None:
            return audio
        for comma in _COMMA.finditer(text):
            first = self._audio.get(text[: comma.start() + 1])
            second = self._audio.get(text[comma.end() :])
            if first is not None and second is not None:
                return trim_trailing_silence(first, self.sample_rate) + self._pause + second
        return None

    def get(self, text: str) -> bytes:
        """The audio for ``text``; KeyError if it was never added."""
        return self._audio[text]
