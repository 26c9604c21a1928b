"""Voice activity and end-of-turn detection, and barge-in."""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import numpy as np

from bot.pipeline.frames import (
    AudioIn,
    CallFinished,
    Collecting,
    DataFrame,
    EndOfTurn,
    Frame,
    Interrupt,
    SystemFrame,
    UserStartedSpeaking,
    UserStoppedSpeaking,
)
from bot.pipeline.language.end_of_turn import Thought, ThoughtJudge, expected_digits, judge
from bot.pipeline.line_state import LineState
from bot.pipeline.pause_reading import PauseReading, read_pause
from bot.pipeline.processor import Processor
from bot.pipeline.speculation import Speculator
from bot.pipeline.turn import EotReason, Turn
from bot.profile import BotProfile, EndpointingConfig
from serve.vad import VadStream

if TYPE_CHECKING:
    from bot.pipeline.context import CallContext


def _level_dbfs(pcm: bytes) -> float:
    """RMS level of 16-bit PCM in dB below full scale."""
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float32)
    if samples.size == 0:
        return -120.0
    rms = float(np.sqrt(np.mean(samples * samples))) / 32768.0
    return 20.0 * math.log10(rms + 1e-9)


#: A pass that heard nothing is made again after this much more silence.
_AGAIN_AFTER_MS = 200


class SpeechDetector(Protocol):
    """Per-call voice activity state: one 20 ms frame in, speech probability out."""

    def push(self, frame: bytes) -> float: ...

    def reset(self) -> None: ...


class TurnDetector(Processor):
    """Turns the caller's audio frames into turns.

    A turn starts after ``min_speech_ms`` of voiced audio (``barge_in_ms`` while the bot
    is talking, in which case an ``Interrupt`` goes out first) and ends after
    ``end_silence_ms`` of silence. With a ``Speculator``, the turn so far is transcribed
    (and looked up) once the caller has paused for ``speculate_after_ms``, and ``thought``
    reads the words (``bot.pipeline.language.end_of_turn``):

    - a finished thought ends the turn at once (on quiet) where the operator's words
      answer it (a cached intent, a knowledge entry as written: ``Speculation.answers``),
      else after ``sentence_end_silence_ms``, without waiting out ``end_silence_ms``;
    - an unfinished one ("my order number is", digits still to come) keeps listening for
      up to ``unfinished_silence_ms``: nothing is looked up, cached or said on a fragment;
    - words that lead to no cached answer are heard again by a second recognizer, if the
      ASR has one, and its words decide; where neither hears an end to them (no final
      punctuation), or the two heard different sentences, the turn waits up to
      ``unsure_silence_ms``; where both heard a finished sentence that nothing answers
      (only "not sure" would be said), up to ``nowhere_silence_ms``; a finished sentence
      the cache would only ask about waits up to ``question_silence_ms``, and words an
      intent would hang up on up to ``hangup_silence_ms``;
    - "hold on" keeps listening for up to ``hold_silence_ms``, after ``hold_reply`` once;
    - while the pass is still running, the turn waits for it (up to the unfinished limit):
      the transcript it makes is what the turn would wait for anyway.
    Frame times come from the frames, so tests can drive it on a virtual clock.
    """

    name = "endpointer"

    def __init__(
        self,
        vad: SpeechDetector,
        config: EndpointingConfig,
        *,
        call_id: str,
        line: LineState | None = None,
        frame_ms: int = 20,
        clock: Callable[[], float] = time.monotonic,
        speculator: Speculator | None = None,
        thought: Callable[[str], Thought] = judge,
        say: Callable[[Turn | None, str], DataFrame] | None = None,
    ) -> None:
        super().__init__()
        self._vad = vad
        self._cfg = config
        self._call_id = call_id
        #: Whether the bot has the line, as the stages after this one tell (``LineHeld``).
        self.line: LineState = line if line is not None else LineState()
        self._frame_ms = frame_ms
        self._clock = clock
        # The voiced run that starts a turn (up to ``barge_in_ms``) and ``preroll_ms``
        # before it: the VAD calls a word voiced only after its first sounds.
        longest_run = max(config.min_speech_ms, config.barge_in_ms)
        self._preroll: collections.deque[bytes] = collections.deque(
            maxlen=max(1, -(-(longest_run + config.preroll_ms) // frame_ms))
        )
        self._in_speech = False
        self._voiced_run_ms = 0
        self._silence_ms = 0
        #: Of that silence, the last frames in a row under the energy floor: quiet, not
        #: a sound the VAD does not call speech (a fricative: "weeks | for").
        self._quiet_ms = 0
        self._turn_ms = 0
        self._audio = bytearray()
        self._last_voiced_at = 0.0
        self._speculator = speculator
        self._floor = config.energy_floor_dbfs
        self._pause_id = 0
        self._speculating = False
        self._thought = thought
        self._say = say
        #: What the finished pass of this pause says (None: no pass finished yet): how
        #: long the turn waits, and why (``bot.pipeline.pause_reading``).
        self._reading: PauseReading | None = None
        self._hold_said = False
        #: The number the digit collector asks for now (``Collecting``, upstream).
        self.collecting: str | None = None
        #: Silence after which this pause's pass is made again (0: no second pass).
        self._again_at_ms = 0
        #: The last turn ended, and the one the turn in progress goes on with (if any).
        self._last_turn: Turn | None = None
        self._continues: Turn | None = None
        #: When the turn in progress started (its first voiced frame), whether it has
        #: stopped the bot yet, and its current run of voiced frames.
        self._started_at = 0.0
        self._yielded = False
        self._run_ms = 0

    @classmethod
    def build(cls, ctx: CallContext) -> TurnDetector:
        profile = ctx.profile
        detector = cls(
            ctx.models.vad.create_stream(ctx.sample_rate),
            profile.endpointing,
            call_id=ctx.call_id,
            clock=ctx.clock.now,
            speculator=ctx.speculator,
            say=ctx.say,
        )
        # What the words so far say (end_of_turn.py), with the number being collected.
        detector._thought = ThoughtJudge(
            lambda: expected_digits(
                profile.collectors, detector.collecting, profile.endpointing.number_min_digits
            )
        )
        return detector

    async def process_upstream(self, frame: Frame) -> None:
        if isinstance(frame, Collecting):
            self.collecting = frame.name  # the head of the pipeline: it goes no further
            return
        await super().process_upstream(frame)

    @classmethod
    def phrases(cls, profile: BotProfile) -> list[str]:
        # "Take your time." to a caller who asked for a moment.
        hold = profile.endpointing.hold_reply
        return [hold] if hold else []

    async def process_system(self, frame: SystemFrame) -> None:
        await super().process_system(frame)
        if isinstance(frame, CallFinished) and isinstance(self._vad, VadStream):
            # The VAD's model back to its pool now: the call's objects (reference cycles)
            # wait for the garbage collector, and meanwhile a new call would build another.
            self._vad.close()

    async def process(self, frame: DataFrame) -> None:
        if not isinstance(frame, AudioIn):
            await self.push(frame)
            return
        voiced = self._vad.push(frame.pcm) >= self._cfg.vad_threshold
        if self._in_speech:
            # The VAD's view of the end of speech trails the audio by ~80-200 ms (its
            # context window); a frame under the energy floor is silence whatever it says.
            quiet = self._floor is not None and _level_dbfs(frame.pcm) < self._floor
            if voiced and quiet:
                voiced = False
            self._quiet_ms = self._quiet_ms + self._frame_ms if quiet and not voiced else 0
            await self._in_turn(frame, voiced)
        else:
            await self._listening(frame, voiced)

    async def _listening(self, frame: AudioIn, voiced: bool) -> None:
        self._preroll.append(frame.pcm)
        self._voiced_run_ms = self._voiced_run_ms + self._frame_ms if voiced else 0
        bot_talking = self.line.held
        needed = self._cfg.barge_in_ms if bot_talking else self._cfg.min_speech_ms
        if self._voiced_run_ms < needed:
            return
        self._in_speech = True
        self._silence_ms = 0
        keep = -(-(self._voiced_run_ms + self._cfg.preroll_ms) // self._frame_ms)
        kept = list(self._preroll)[-keep:]
        self._audio = bytearray(b"".join(kept))
        self._turn_ms = len(kept) * self._frame_ms
        self._preroll.clear()
        self._last_voiced_at = frame.at
        self._hold_said = False
        self._new_pause()
        self._started_at = frame.at - (self._voiced_run_ms - self._frame_ms) / 1000.0
        self._run_ms = self._voiced_run_ms
        self._continues = None
        self._yielded = bot_talking
        if bot_talking:
            await self._stop_the_bot(frame.at)
        await self.push(UserStartedSpeaking(at=frame.at))

    async def _stop_the_bot(self, at: float) -> None:
        """The caller is speaking over the bot: it stops. If they started again soon after
        their last turn, this one goes on with it (``_went_on``)."""
        self._continues = self._went_on(self._started_at)
        await self.push(Interrupt(at=at))

    def _went_on(self, started: float) -> Turn | None:
        """The last turn, when the caller's voice came back within ``continuation_ms`` of
        its end (at ``started``): the bot is answering a request the caller had only paused
        in."""
        last = self._last_turn
        if last is None or self._cfg.continuation_ms == 0:
            return None
        ended = last.stages.get("speech_end")
        if ended is None or (started - ended) * 1000.0 > self._cfg.continuation_ms:
            return None
        return last

    async def _in_turn(self, frame: AudioIn, voiced: bool) -> None:
        self._audio += frame.pcm
        self._turn_ms += self._frame_ms
        if voiced:
            if self._silence_ms:
                self._new_pause()
            self._silence_ms = 0
            self._last_voiced_at = frame.at
            self._run_ms += self._frame_ms
            # The bot started talking after this turn did (its answer to the turn before,
            # a reply to "hold on"): a caller still speaking stops it, as at a barge-in.
            if not self._yielded and self._run_ms >= self._cfg.barge_in_ms and self.line.held:
                self._yielded = True
                await self._stop_the_bot(frame.at)
        else:
            self._run_ms = 0
            self._silence_ms += self._frame_ms
            self._speculate()
            await self._hear_pass()
        if self._turn_ms >= self._cfg.max_turn_s * 1000:
            await self._end_turn("max_turn")
        elif self._early_end_ready():
            await self._end_turn("early")
        elif self._silence_ms >= self._silence_limit_ms():
            await self._end_turn("silence")

    def _new_pause(self) -> None:
        """The caller is speaking (again): a running speculative pass is out of date."""
        if self._speculating and self._speculator is not None:
            self._speculator.discard()
        self._speculating = False
        self._reading = None
        self._again_at_ms = 0
        self._pause_id += 1

    def _speculate(self) -> None:
        spec = self._speculator
        after = self._cfg.speculate_after_ms
        if spec is None or after <= 0 or self._speculating:
            return
        if self._silence_ms < max(after, self._again_at_ms):
            return
        # Refused while an older pass still runs: the turn is then transcribed as usual.
        self._speculating = spec.start(self._pause_id, bytes(self._audio))

    async def _hear_pass(self) -> None:
        """Read the words of this pause's pass once it is done; say ``hold_reply`` once."""
        if self._reading is not None or not self._speculating or self._speculator is None:
            return
        done = self._speculator.ready(self._pause_id)
        if done is None:
            return
        if not done.heard and not done.failed and not self._again_at_ms:
            # Whisper often hears nothing in a fragment cut 100 ms into a pause, and the
            # words in the same audio with more silence after it: once more, a little later.
            self._again_at_ms = self._silence_ms + _AGAIN_AFTER_MS
            self._speculating = False
            return
        # Still nothing: noise (nothing would be answered) or words it cannot make out
        # yet; either way, more of them is worth waiting for (``read_pause``).
        self._reading = read_pause(done, self._thought, self._cfg)
        reply = self._cfg.hold_reply
        if self._reading.thought == "hold" and not self._hold_said and reply and self._say:
            self._hold_said = True
            await self.push(self._say(None, reply))

    def _silence_limit_ms(self) -> int:
        """The silence that ends the turn, after what the pause's pass heard."""
        cfg = self._cfg
        reading = self._reading
        if reading is not None:
            return reading.silence_limit_ms(cfg)
        if self._speculating or self._again_at_ms:
            # The pass is still running, or will run again: wait for it, as for a fragment.
            return max(cfg.end_silence_ms, cfg.unfinished_silence_ms)
        return cfg.end_silence_ms

    def _early_end_ready(self) -> bool:
        if not (self._speculating and self._cfg.early_end and self._speculator is not None):
            return False
        done = self._speculator.ready(self._pause_id)
        reading = self._reading
        if done is None or reading is None or not reading.may_end_early:
            # no cached answer on a fragment, nor on words heard as a guess; nothing to say
            # but "not sure", a question, a hang-up: the caller may go on
            return False
        finished = reading.thought == "finished"
        if done.answers and not done.acts and finished:
            # At once, but on quiet: the VAD takes a fricative for silence, and "I've been
            # waiting two weeks" is a cached intent 200 ms into the "s f" of "weeks | for
            # my parcel". A line too noisy to be quiet waits as for a finished sentence.
            return self._quiet_enough() or self._silence_ms >= self._cfg.sentence_end_silence_ms
        # A finished sentence, an intent that would transfer (or hang up, with
        # ``hangup_silence_ms`` at 0), or a cached intent in words that say neither (no
        # final punctuation): a little more silence first, in case the caller was only
        # pausing.
        return (finished or done.hit) and self._silence_ms >= self._cfg.sentence_end_silence_ms

    def _quiet_enough(self) -> bool:
        """Quiet for ``hit_quiet_ms`` under the energy floor (no floor: the VAD alone)."""
        return self._floor is None or self._quiet_ms >= self._cfg.hit_quiet_ms

    async def _end_turn(self, reason: EotReason) -> None:
        turn = Turn(call_id=self._call_id, audio=bytes(self._audio), clock=self._clock)
        turn.mark("speech_end", self._last_voiced_at)
        turn.mark("eot_decided", self._clock())
        turn.eot_reason = reason
        turn.continues, self._continues = self._continues, None
        self._last_turn = turn
        if self._speculating:
            turn.pause_id = self._pause_id
        turn.pause_reading = self._reading
        self._in_speech = False
        self._speculating = False
        self._reading = None
        self._again_at_ms = 0
        self._voiced_run_ms = 0
        self._audio = bytearray()
        await self.push(UserStoppedSpeaking(at=self._last_voiced_at))
        await self.push(EndOfTurn(turn=turn))
