"""Speech to text for each finished turn."""

from __future__ import annotations

import logging

from bot.frames import DataFrame, EndOfTurn, StageFailed, Transcript
from bot.processor import Processor
from serve import ASR, ProviderError, StageTimings

log = logging.getLogger(__name__)


class Transcriber(Processor):
    """Transcribes each ``EndOfTurn``; drops turns that hold no words (noise, coughs)."""

    name = "transcriber"

    def __init__(self, asr: ASR, *, sample_rate: int, max_no_speech_prob: float = 0.8) -> None:
        super().__init__()
        self._asr = asr
        self._rate = sample_rate
        self._max_no_speech = max_no_speech_prob

    async def process(self, frame: DataFrame) -> None:
        if not isinstance(frame, EndOfTurn):
            await self.push(frame)
            return
        turn = frame.turn
        timings = StageTimings()
        try:
            result = await self._asr.transcribe(turn.audio, self._rate, timings=timings)
        except ProviderError as exc:
            turn.mark("transcript_ready")
            turn.error = f"asr: {exc}"
            await self.push(StageFailed(turn=turn, stage="asr", error=str(exc)))
            return
        finally:
            turn.model_ms.update(timings.durations_ms)
        turn.mark("transcript_ready")
        text = result.text.strip()
        if not text or result.no_speech_prob > self._max_no_speech:
            log.debug("turn %d of %s held no words; ignored", turn.index, turn.call_id)
            return
        turn.transcript = text
        await self.push(Transcript(turn=turn, text=text))
