"""Words a turn's decision will say, synthesized while the caller pauses.

The operator's words that no phrase list holds ready (a two-choice question is made of two
topics) were synthesized when they were said: at 8 calls on two cores that came 275-1,840 ms
after the end of the turn, on top of the question's own wait (docs/benchmarks.md). The
pause's pass decides the turn ahead of its end (``bot.pipeline.speculation``); when what it
would say has no ready audio, it is synthesized then, in the caller's pause, with the pass's
priority (behind turns that have ended, dropped when the caller speaks again), and the
speaker plays it from here (``take``) instead of synthesizing it again. A phrase still being
synthesized when its turn ends is waited for; one whose synthesis failed or was dropped is
synthesized as before.

One store for the node: the same question in another call is played from here too. Bounded
(``max_phrases``, least recently used first out); a synthesizer whose output is cacheable
also keeps the audio in the speech cache on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING

from bot.pipeline.speech_cache import SpeechCache, pre_synthesized
from serve import TTS, ProviderError

if TYPE_CHECKING:
    from bot.pipeline.deciding.decision import Decision

log = logging.getLogger(__name__)

#: Phrases kept (a few seconds of 8 kHz audio each: ~64 KB).
MAX_PHRASES = 64


def live_words(decision: Decision) -> str | None:
    """What ``decision`` will say in words that the intent cache's ready audio does not
    carry (None: nothing, the cache's audio, or the model's words, unknown yet)."""
    say = decision.say
    if not say or decision.kind == "generate":
        return None
    entry = decision.entry
    if entry is not None and say in (entry.answer, entry.confirm):
        return None
    return say


class SaidAhead:
    """Phrases synthesized ahead of the turn that says them, keyed by their text."""

    def __init__(
        self,
        sample_rate: int,
        *,
        speech_cache: SpeechCache | None = None,
        max_phrases: int = MAX_PHRASES,
    ) -> None:
        self.sample_rate = sample_rate
        self.speech_cache = speech_cache
        self.max_phrases = max_phrases
        self._audio: OrderedDict[str, bytes] = OrderedDict()
        self._making: dict[str, asyncio.Task[bytes | None]] = {}
        #: Phrases started, played from here, and whose synthesis failed or was dropped.
        self.started = 0
        self.used = 0
        self.failed = 0

    def start(self, tts: TTS, text: str) -> None:
        """Synthesize ``text`` in the background, unless it is here or on its way. The
        synthesizer's jobs carry the calling context's priority (``serve.priority_pool``)."""
        if not text or text in self._audio or text in self._making:
            return
        self.started += 1
        task = asyncio.create_task(self._make(tts, text), name="said-ahead")
        self._making[text] = task
        task.add_done_callback(lambda _t: self._making.pop(text, None))

    async def take(self, text: str) -> bytes | None:
        """The audio of ``text`` when it was said ahead (waiting for it while it is being
        made); None: synthesize it now."""
        audio = self._audio.get(text)
        if audio is None:
            task = self._making.get(text)
            if task is None:
                return None
            with contextlib.suppress(asyncio.CancelledError):
                audio = await asyncio.shield(task)
            if audio is None:
                return None
        self._audio.move_to_end(text)
        self.used += 1
        return audio

    async def _make(self, tts: TTS, text: str) -> bytes | None:
        async def synthesize() -> bytes:
            chunks = [c async for c in tts.synthesize(text, sample_rate=self.sample_rate)]
            return b"".join(chunks)

        try:
            audio, _ = await pre_synthesized(
                self.speech_cache, tts, text, self.sample_rate, synthesize
            )
        except (ProviderError, asyncio.CancelledError) as exc:
            # Dropped (late, or the caller spoke again: its job withdrawn) or failed: said
            # as before, when its turn comes.
            self.failed += 1
            log.debug("said ahead: %r not made: %s", text[:40], str(exc) or type(exc).__name__)
            return None
        if not audio:
            return None
        self._audio[text] = audio
        while len(self._audio) > self.max_phrases:
            self._audio.popitem(last=False)
        return audio
