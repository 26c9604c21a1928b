"""Speech synthesis streamed clause by clause into the call."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from bot.pipeline.audio_sink import AudioSink
from bot.pipeline.clock import MONOTONIC, Clock
from bot.pipeline.frames import (
    AnswerPending,
    CallFinished,
    DataFrame,
    Frame,
    PlayAudio,
    ResponseDone,
    Speak,
    SystemFrame,
    UserStartedSpeaking,
)
from bot.pipeline.processor import Processor
from bot.pipeline.turn import Turn
from bot.pipeline.turnlog import FILLER_AUDIO_OUT, SAID_AHEAD_WAIT, TurnSink
from bot.tasks import cancel_and_wait
from serve import TTS, ProviderError, StageTimings

if TYPE_CHECKING:
    from bot.pipeline.context import CallContext
    from bot.pipeline.said_ahead import SaidAhead
    from bot.profile import BotProfile

log = logging.getLogger(__name__)

FRAME_S = 0.02

#: Told when a filler starts to play: the turn, the filler's text, when it is heard.
FillerSink = Callable[[Turn, str, float], None]


class Speaker(Processor):
    """Synthesizes each clause and queues its audio to the caller as it is made.

    On interruption the call's queued audio is flushed at once, so the bot stops within
    a frame or two. Each finished (or interrupted) turn goes to ``on_turn``.

    Fillers: when the LLM starts on an answer (``AnswerPending``) and the answer's first
    audio has not gone out ``filler_after_s`` after the caller's turn ended, one filler
    (the next of ``fillers``, in turn) is queued; the answer's audio queues behind it.
    With ``filler_every_s`` another follows that long after each filler ends, for as long
    as the answer stays silent and the caller does not start speaking again.

    It has the line (``LineHeld``, upstream) from the moment it takes a frame to say until
    the call's playout has drained with nothing more to say: the greeting and a filler as
    much as an answer.
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
        fillers: Sequence[tuple[str, bytes]] = (),
        filler_after_s: float = 1.0,
        filler_every_s: float = 0.0,
        on_filler: FillerSink | None = None,
        clock: Clock = MONOTONIC,
        ahead: SaidAhead | None = None,
    ) -> None:
        super().__init__()
        #: Words synthesized in the caller's pause (said_ahead.py): played from there.
        self._ahead = ahead
        #: The call's clock: when audio is heard, when a filler is due.
        self._clock = clock
        self._tts = tts
        self._out = out
        self._rate = sample_rate
        self._apology = apology_pcm
        self._on_turn = on_turn
        self._turn: Turn | None = None
        #: An LLM turn the caller is waiting on (``AnswerPending``), audible or not yet.
        self._pending: Turn | None = None
        self._apologised: set[int] = set()
        self._fillers = itertools.cycle(fillers) if fillers else None
        self._filler_after_s = filler_after_s
        self._filler_every_s = filler_every_s
        self._on_filler = on_filler
        self._filler_timer: asyncio.Task[None] | None = None
        #: Waits for the call's playout to drain once the speaker has nothing more to say.
        self._playout: asyncio.Task[None] | None = None
        self.busy = False

    @classmethod
    def build(cls, ctx: CallContext) -> Speaker:
        profile, prompts = ctx.profile, ctx.prompts
        return cls(
            ctx.models.tts,
            ctx.call,
            sample_rate=ctx.sample_rate,
            apology_pcm=prompts.get(profile.apology),
            on_turn=ctx.on_turn,
            fillers=[(text, prompts.get(text)) for text in profile.fillers],
            filler_after_s=profile.filler_after_ms / 1000.0,
            filler_every_s=profile.filler_every_ms / 1000.0,
            on_filler=lambda turn, text, at: ctx.log_event("filler", text, at),
            clock=ctx.clock,
            ahead=ctx.prompts.ahead,
        )

    @classmethod
    def phrases(cls, profile: BotProfile) -> list[str]:
        return [profile.apology, *profile.fillers]

    async def process(self, frame: DataFrame) -> None:
        self.busy = True
        await self._tell_line()
        try:
            if isinstance(frame, Speak):
                await self._say(frame.turn, frame.text, ahead=not frame.generated)
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
            await self._tell_line()

    async def _tell_line(self) -> None:
        """Tell the stages before this one whether the speaker has the line: while it works
        on a frame, or audio it sent waits to be played (``_until_played`` tells when it
        has been)."""
        queued = self._out.queued_frames > 0
        if queued and not self.busy and (self._playout is None or self._playout.done()):
            self._playout = asyncio.create_task(self._until_played(), name="speaker-playout")
        await self.hold_line(self.busy or queued)

    async def _until_played(self) -> None:
        await self._out.wait_playout_drained()
        self._playout = None
        await self._tell_line()

    async def stop(self) -> None:
        await super().stop()
        task, self._playout = self._playout, None
        if task is not None and task is not asyncio.current_task():
            await cancel_and_wait(task)

    async def process_upstream(self, frame: Frame) -> None:
        """Words a stage after this one says (the call control's "please hold"): said
        here, in turn with the rest."""
        if isinstance(frame, (Speak, PlayAudio)):
            await self.put(frame)
            return
        await super().process_upstream(frame)

    async def process_system(self, frame: SystemFrame) -> None:
        if isinstance(frame, AnswerPending):
            self._pending = frame.turn
            self._arm_filler(frame.turn)
        elif isinstance(frame, UserStartedSpeaking):
            # The caller has moved on (a new question over a silent wait): a filler for the
            # turn before would talk over them, or land in front of the next answer.
            self._disarm_filler()
        elif isinstance(frame, CallFinished):
            self._disarm_filler()
            # The caller hung up while the bot was answering (or before it had said a
            # word): the turn still counts.
            for turn in self._open_turns():
                self._finish(turn)
        await super().process_system(frame)

    async def on_interrupt(self) -> None:
        self._disarm_filler()
        dropped = self._out.clear_playout()
        self.busy = False
        await self._tell_line()
        # A turn cut before its first word (the caller spoke again while the model was
        # still thinking) is finished here too, or it would never reach the call log.
        for turn in self._open_turns():
            turn.barged_in = True
            self._finish(turn)
        log.debug("barge-in: flushed %d frames", dropped)

    async def _say(self, turn: Turn | None, text: str, *, ahead: bool = False) -> None:
        if ahead and self._ahead is not None:
            asked = time.monotonic()
            pcm = await self._ahead.take(text)
            if pcm is not None:
                if turn is not None:
                    # 0 when it was ready; else how long its synthesis in the pause ran on
                    # past the turn's end (the words' first audio waited that long).
                    turn.model_ms.setdefault(
                        SAID_AHEAD_WAIT, round((time.monotonic() - asked) * 1000.0, 1)
                    )
                self._send(turn, pcm)
                return
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
            turn.mark("first_audio_out", self._clock.now() + self._out.queued_frames * FRAME_S)
        self._out.send(pcm)

    def _arm_filler(self, turn: Turn) -> None:
        """Play a filler for ``turn`` if its answer is still silent once the time comes."""
        self._disarm_filler()
        if self._fillers is None:
            return
        now = self._clock.now()
        ended = turn.stages.get("eot_decided", turn.stages.get("speech_end", now))
        delay = max(0.0, ended + self._filler_after_s - now)
        self._filler_timer = self._filler_in(delay, turn)

    def _filler_in(self, delay: float, turn: Turn) -> asyncio.Task[None]:
        """``_play_filler(turn)`` once ``delay`` seconds have passed on the call's clock, then
        the line told of the audio it sent; cancel the task to call it off."""

        async def play() -> None:
            await self._clock.sleep(max(0.0, delay))
            self._play_filler(turn)
            await self._tell_line()

        return asyncio.create_task(play(), name="filler")

    def _disarm_filler(self) -> None:
        if self._filler_timer is not None:
            self._filler_timer.cancel()
            self._filler_timer = None

    def _play_filler(self, turn: Turn) -> None:
        # Synchronous, on the loop (the timer's task calls it once its time has come): no
        # answer chunk can be queued between check and send.
        self._filler_timer = None
        if self._fillers is None or turn.barged_in or turn.route != "llm":
            return
        if "first_audio_out" in turn.stages or "response_done" in turn.stages:
            return  # the answer is out already, or there is none to wait for
        text, pcm = next(self._fillers)
        now = self._clock.now()
        heard_at = now + self._out.queued_frames * FRAME_S
        turn.mark(FILLER_AUDIO_OUT, heard_at)  # the first filler's; later ones are events
        self._turn = turn  # the turn is audible now: a barge-in or a hang-up ends it
        self._out.send(pcm)
        log.debug("turn %d of %s: filler played", turn.index, turn.call_id)
        if self._on_filler is not None:
            self._on_filler(turn, text, heard_at)
        if self._filler_every_s > 0:
            # Still silent a while after this filler ends: another, so the line never
            # sounds dead while a busy model works (the model's timeout bounds the wait).
            ends_at = heard_at + len(pcm) / 2 / self._rate
            delay = max(0.0, ends_at + self._filler_every_s - now)
            self._filler_timer = self._filler_in(delay, turn)

    def _open_turns(self) -> list[Turn]:
        """The turn the caller hears and the LLM turn they wait on (often the same one)."""
        turns = [] if self._turn is None else [self._turn]
        if self._pending is not None and self._pending is not self._turn:
            turns.append(self._pending)
        return turns

    def _finish(self, turn: Turn) -> None:
        if self._turn is turn:
            self._turn = None
        if self._pending is turn:
            self._pending = None
        self._apologised.discard(turn.index)
        self._on_turn(turn)
