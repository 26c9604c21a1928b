"""Speech synthesis streamed clause by clause into the call."""

from __future__ import annotations

import logging
import time

from bot.audio_out import AudioSink
from bot.frames import CallEnded, DataFrame, PlayAudio, ResponseDone, Speak, SystemFrame
from bot.processor import Processor
from bot.turn import Turn
from bot.turnlog import TurnSink
from serve import TTS, ProviderError, StageTimings

log = logging.getLogger(__name__)

FRAME_S = 0.02


class Speaker(Processor):
    """Synthesizes each clause and queues its audio to the caller as it is made.

    On interruption the call's queued audio is flushed at once, so the bot stops within
    a frame or two. Each finished (or interrupted) turn goes to ``on_turn``.
    """

    name = "speaker"

    def __init__(
        self,
        tts: TTS,
        out: AudioSink,
        *,
        sample_rate: int,
        apology_pcm: bytes,
        on_turn: TurnSink,
    ) -> None:
        super().__init__()
        self._tts = tts
        self._out = out
        self._rate = sample_rate
        self._apology = apology_pcm
        self._on_turn = on_turn
        self._turn: Turn | None = None
        self._apologised: set[int] = set()
        self.busy = False

    async def process(self, frame: DataFrame) -> None:
        self.busy = True
        try:
            if isinstance(frame, Speak):
                await self._say(frame.turn, frame.text)
            elif isinstance(frame, PlayAudio):
                self._send(frame.turn, frame.pcm)
            elif isinstance(frame, ResponseDone):
                frame.turn.mark("response_done")
                # The turn is over once the caller has heard it; until then a barge-in
                # can still cut it.
                await self._out.wait_playout_drained()
                self._finish(frame.turn)
            else:
                await self.push(frame)
        finally:
            self.busy = not self._queue.empty()

    async def process_system(self, frame: SystemFrame) -> None:
        if isinstance(frame, CallEnded) and self._turn is not None:
            # The caller hung up while the bot was answering: the turn still counts.
            self._finish(self._turn)
        await super().process_system(frame)

    async def on_interrupt(self) -> None:
        dropped = self._out.clear_playout()
        self.busy = False
        turn = self._turn
        if turn is not None:
            turn.barged_in = True
            self._finish(turn)
        log.debug("barge-in: flushed %d frames", dropped)

    async def _say(self, turn: Turn | None, text: str) -> None:
        timings = StageTimings()
        try:
            async for chunk in self._tts.synthesize(text, sample_rate=self._rate, timings=timings):
                self._send(turn, chunk)
        except ProviderError as exc:
            log.warning("tts failed: %s", exc)
            if turn is not None:
                turn.error = f"tts: {exc}"
                if turn.index not in self._apologised:
                    self._apologised.add(turn.index)
                    self._send(turn, self._apology)
        finally:
            if turn is not None:
                for name, ms in timings.durations_ms.items():
                    turn.model_ms.setdefault(name, ms)

    def _send(self, turn: Turn | None, pcm: bytes) -> None:
        if turn is not None:
            if turn is not self._turn:
                self._turn = turn
            # The caller hears this chunk once what is already queued has played.
            turn.mark("first_audio_out", time.monotonic() + self._out.queued_frames * FRAME_S)
        self._out.send(pcm)

    def _finish(self, turn: Turn) -> None:
        if self._turn is turn:
            self._turn = None
        self._apologised.discard(turn.index)
        self._on_turn(turn)
