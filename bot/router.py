"""Chooses who answers each transcript: the intent cache's ready audio, or the LLM."""

from __future__ import annotations

import logging

from bot.frames import DataFrame, PlayAudio, ResponseDone, Transcript
from bot.intent_cache import IntentCache
from bot.processor import Processor
from serve import ProviderError

log = logging.getLogger(__name__)


class Router(Processor):
    """Answers a transcript from the intent cache when it matches, else passes it on.

    A hit plays the intent's pre-synthesized answer (no LLM, no TTS). Anything that goes
    wrong in the lookup (embedder failure, cache not loaded, shared store away too long)
    is a miss: the Responder answers as if there were no cache.
    """

    name = "router"

    def __init__(self, cache: IntentCache) -> None:
        super().__init__()
        self._cache = cache

    async def process(self, frame: DataFrame) -> None:
        if not isinstance(frame, Transcript):
            await self.push(frame)
            return
        turn = frame.turn
        try:
            found = await self._cache.lookup(frame.text)
        except ProviderError as exc:
            log.warning("intent lookup failed on turn %d of %s: %s", turn.index, turn.call_id, exc)
            await self.push(frame)
            return
        turn.model_ms["intent_lookup"] = found.lookup_ms
        match, entry = found.match, found.entry
        if match.intent is None or entry is None or match.route == "none":
            log.debug("turn %d: no intent (%s, %.3f)", turn.index, match.reason, match.score)
            await self.push(frame)
            return
        turn.route = match.route
        turn.intent = match.intent
        turn.intent_score = round(match.score, 4)
        turn.mark("route_decided")
        turn.answer = entry.answer
        await self.push(PlayAudio(turn=turn, pcm=entry.audio, text=entry.answer))
        await self.push(ResponseDone(turn=turn))
