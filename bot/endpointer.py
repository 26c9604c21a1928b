"""Voice activity and end-of-turn detection, and barge-in."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from typing import Protocol

from bot.frames import (
    AudioIn,
    DataFrame,
    EndOfTurn,
    Interrupt,
    UserStartedSpeaking,
    UserStoppedSpeaking,
)
from bot.processor import Processor
from bot.profile import EndpointingConfig
from bot.turn import Turn


class SpeechDetector(Protocol):
    """Per-call voice activity state: one 20 ms frame in, speech probability out."""

    def push(self, frame: bytes) -> float: ...

    def reset(self) -> None: ...


class Endpointer(Processor):
    """Turns the caller's audio frames into turns.

    A turn starts after ``min_speech_ms`` of voiced audio (``barge_in_ms`` while the bot
    is talking, in which case an ``Interrupt`` goes out first) and ends after
    ``end_silence_ms`` of silence. Frame times come from the frames, so tests can drive it
    on a virtual clock.
    """

    name = "endpointer"

    def __init__(
        self,
        vad: SpeechDetector,
        config: EndpointingConfig,
        *,
        call_id: str,
        bot_speaking: Callable[[], bool],
        frame_ms: int = 20,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self._vad = vad
        self._cfg = config
        self._call_id = call_id
        self._bot_speaking = bot_speaking
        self._frame_ms = frame_ms
        self._clock = clock
        self._preroll: collections.deque[bytes] = collections.deque(
            maxlen=max(1, config.preroll_ms // frame_ms)
        )
        self._in_speech = False
        self._voiced_run_ms = 0
        self._silence_ms = 0
        self._turn_ms = 0
        self._audio = bytearray()
        self._last_voiced_at = 0.0

    async def process(self, frame: DataFrame) -> None:
        if not isinstance(frame, AudioIn):
            await self.push(frame)
            return
        voiced = self._vad.push(frame.pcm) >= self._cfg.vad_threshold
        if self._in_speech:
            await self._in_turn(frame, voiced)
        else:
            await self._listening(frame, voiced)

    async def _listening(self, frame: AudioIn, voiced: bool) -> None:
        self._preroll.append(frame.pcm)
        self._voiced_run_ms = self._voiced_run_ms + self._frame_ms if voiced else 0
        bot_talking = self._bot_speaking()
        needed = self._cfg.barge_in_ms if bot_talking else self._cfg.min_speech_ms
        if self._voiced_run_ms < needed:
            return
        self._in_speech = True
        self._silence_ms = 0
        self._audio = bytearray(b"".join(self._preroll))
        self._turn_ms = len(self._preroll) * self._frame_ms
        self._preroll.clear()
        self._last_voiced_at = frame.at
        if bot_talking:
            await self.push(Interrupt(at=frame.at))
        await self.push(UserStartedSpeaking(at=frame.at))

    async def _in_turn(self, frame: AudioIn, voiced: bool) -> None:
        self._audio += frame.pcm
        self._turn_ms += self._frame_ms
        if voiced:
            self._silence_ms = 0
            self._last_voiced_at = frame.at
        else:
            self._silence_ms += self._frame_ms
        too_long = self._turn_ms >= self._cfg.max_turn_s * 1000
        if self._silence_ms < self._cfg.end_silence_ms and not too_long:
            return
        turn = Turn(call_id=self._call_id, audio=bytes(self._audio))
        turn.mark("speech_end", self._last_voiced_at)
        turn.mark("eot_decided", self._clock())
        self._in_speech = False
        self._voiced_run_ms = 0
        self._audio = bytearray()
        await self.push(UserStoppedSpeaking(at=self._last_voiced_at))
        await self.push(EndOfTurn(turn=turn))
