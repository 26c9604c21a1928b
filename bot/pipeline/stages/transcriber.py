"""Speech to text for each finished turn."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bot.pipeline.frames import DataFrame, EndOfTurn, StageFailed, Transcript
from bot.pipeline.language.end_of_turn import strip_hold
from bot.pipeline.processor import Processor
from bot.pipeline.speculation import Speculation, Speculator
from bot.pipeline.turn import Turn
from serve import ASR, ProviderError, StageTimings
from serve.asr import Vocabulary

if TYPE_CHECKING:
    from bot.pipeline.context import CallContext

log = logging.getLogger(__name__)


class Transcriber(Processor):
    """Transcribes each ``EndOfTurn``; drops turns that hold no words (noise, coughs).

    When a speculative pass already transcribed exactly this turn during the caller's
    pause, its transcript is taken instead of running the model again. What only asked
    for time ("hold on, let me find it") is left out of the words answered: a turn of
    nothing else holds no request.

    A turn that goes on with the one before (``Turn.continues``: the caller was pausing
    mid-request and started again over the bot's answer) is heard as one request: the
    audio of both, a short silence between, transcribed together. The recognizer then
    hears the first half with what follows it, where alone it often made a sentence of it
    ("Could you check if" heard as "Can you hack it?").
    """

    name = "transcriber"

    def __init__(
        self,
        asr: ASR,
        *,
        sample_rate: int,
        max_no_speech_prob: float = 0.8,
        speculator: Speculator | None = None,
        vocabulary: Vocabulary | None = None,
    ) -> None:
        super().__init__()
        self._asr = asr
        #: The profile's words, heard by (bot/vocabulary.py), as in the caller's pause.
        self._vocabulary = vocabulary
        self._rate = sample_rate
        self._max_no_speech = max_no_speech_prob
        self._speculator = speculator

    @classmethod
    def build(cls, ctx: CallContext) -> Transcriber:
        return cls(
            ctx.models.asr,
            sample_rate=ctx.sample_rate,
            speculator=ctx.speculator,
            vocabulary=ctx.vocabulary,
        )

    async def process(self, frame: DataFrame) -> None:
        if not isinstance(frame, EndOfTurn):
            await self.push(frame)
            return
        turn = frame.turn
        if _goes_on(turn, self._rate):
            own = await self._own_words(turn)
            _join_previous(turn, self._rate)
            turn.own_words = own
        elif await self._take_speculation(turn):
            return
        timings = StageTimings()
        try:
            result = await self._asr.transcribe(
                turn.audio, self._rate, vocabulary=self._vocabulary, timings=timings
            )
        except ProviderError as exc:
            turn.mark("transcript_ready")
            turn.error = f"asr: {exc}"
            await self.push(StageFailed(turn=turn, stage="asr", error=str(exc)))
            return
        finally:
            turn.model_ms.update(timings.durations_ms)
        turn.mark("transcript_ready")
        text = strip_hold(result.text)
        if not text or result.no_speech_prob > self._max_no_speech:
            log.debug("turn %d of %s held no words; ignored", turn.index, turn.call_id)
            return
        turn.transcript = text
        await self.push(Transcript(turn=turn, text=text))

    async def _pass_over(self, turn: Turn) -> Speculation | None:
        """The speculative pass over exactly this turn's audio, if there was one."""
        if self._speculator is None or turn.pause_id is None:
            return None
        return await self._speculator.result_for(turn.pause_id, len(turn.audio))

    async def _own_words(self, turn: Turn) -> str:
        """What the speculative pass over exactly this turn's audio heard ("": none)."""
        spec = await self._pass_over(turn)
        return "" if spec is None else strip_hold(spec.transcript)

    async def _take_speculation(self, turn: Turn) -> bool:
        """Use the speculative pass over this turn, if there was one; True when handled."""
        spec = await self._pass_over(turn)
        if spec is None:
            return False
        turn.speculation = spec
        turn.model_ms.update(spec.model_ms)
        turn.mark("transcript_ready")
        text = strip_hold(spec.transcript)
        if not text:
            log.debug("turn %d of %s held no words; ignored", turn.index, turn.call_id)
            return True
        turn.transcript = text
        await self.push(Transcript(turn=turn, text=text))
        return True


#: The silence put between two halves of a request heard together.
_JOIN_GAP_S = 0.3
#: The longest request heard together (a caller going on over the bot again and again is
#: heard in parts beyond it): Whisper decodes up to 30 s at once.
_JOIN_MAX_S = 25.0


def _goes_on(turn: Turn, sample_rate: int) -> bool:
    """Whether the turn goes on with one that has audio (``Turn.continues``), and the two
    together are not too long to hear at once."""
    previous = turn.continues
    if previous is None or not previous.audio or not turn.audio:
        return False
    return len(previous.audio) + len(turn.audio) <= 2 * sample_rate * _JOIN_MAX_S


def _join_previous(turn: Turn, sample_rate: int) -> None:
    """Put the audio of the turn this one goes on with before its own."""
    previous = turn.continues
    assert previous is not None
    gap = bytes(2 * round(_JOIN_GAP_S * sample_rate))
    turn.audio = previous.audio + gap + turn.audio
    log.info(
        "turn %d of %s goes on with turn %d (%r): heard together",
        turn.index,
        turn.call_id,
        previous.index,
        previous.transcript,
    )
