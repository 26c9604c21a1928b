"""Boundary fakes for pipeline unit tests: scripted models and an in-memory call.

An in-memory call runs in real time, or on a clock of the test's (``MemoryCall(clock=
FakeClock())``, the same clock handed to the ``CallSession`` and to ``fake_models``):
each 20 ms frame then moves the clock on by 20 ms once the call has settled, and a
scripted model's delay passes on that clock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import TypeVar

import numpy as np

from bot.pipeline.clock import MONOTONIC, Clock, wait_for
from serve import (
    ASR,
    LLM,
    TTS,
    VAD,
    ChatMessage,
    ModelSet,
    ProviderError,
    StageTimings,
    Transcription,
)
from serve.errors import ProviderTimeout
from serve.vad import VadStream
from telephony.events import AudioIn, CallEnded, InboundEvent, TransferResult
from tests.support.clock import FakeClock

T = TypeVar("T")

RATE = 8000
FRAME_BYTES = 320


def tone(ms: int, amplitude: int = 8000) -> bytes:
    """A 440 Hz tone: the fake VAD hears it as speech."""
    n = RATE * ms // 1000
    t = np.arange(n) / RATE
    return (amplitude * np.sin(2 * np.pi * 440 * t)).astype("<i2").tobytes()


def voice(contour_hz: np.ndarray, rate: int = RATE) -> bytes:
    """A voiced sound with the pitch ``contour_hz`` (one value a sample): a pulse train's
    first eight harmonics with a falling spectrum, as a vowel's source has."""
    phase = 2 * np.pi * np.cumsum(contour_hz) / rate
    wave = sum(np.sin(k * phase) / k for k in range(1, 9))
    pcm = (wave / np.max(np.abs(wave)) * 12000).astype("<i2")
    return pcm.tobytes()


def glide(start_hz: float, level_s: float, end_hz: float, glide_s: float) -> np.ndarray:
    return np.concatenate(
        [
            np.full(int(level_s * RATE), start_hz),
            np.geomspace(start_hz, end_hz, int(glide_s * RATE)),
        ]
    )


def silence(ms: int) -> bytes:
    return bytes(RATE * ms // 1000 * 2)


class EnergyStream(VadStream):
    def push(self, frame: bytes) -> float:
        rms = float(np.sqrt(np.mean(np.frombuffer(frame, "<i2").astype(np.float64) ** 2)))
        return 1.0 if rms > 500 else 0.0

    def reset(self) -> None:
        pass


class EnergyVAD(VAD):
    def _load(self) -> None:
        pass

    def _create_stream_impl(self, sample_rate: int) -> VadStream:
        return EnergyStream()


class ScriptedASR(ASR):
    def __init__(self, text: str = "where is my order", fail: bool = False) -> None:
        super().__init__(timeout_s=2.0, retries=0)
        self.text = text
        self.fail = fail
        self.calls = 0

    def _load(self) -> None:
        pass

    async def warmup(self) -> None:
        pass

    def _transcribe_impl(self, pcm: bytes, sample_rate: int) -> Transcription:
        self.calls += 1
        if self.fail:
            raise ProviderError("asr exploded")
        return Transcription(
            text=self.text, confidence=0.9, audio_ms=len(pcm) / 16, no_speech_prob=0.0
        )


class ScriptedLLM(LLM):
    """Says ``pieces``, each ``delay_s`` after the one before (the first after the
    request). On a test's clock (``clock``, or set by ``fake_models``) the delays and the
    first piece's ``timeout_s`` pass on that clock, not on a worker thread in real time."""

    def __init__(
        self,
        pieces: Sequence[str],
        delay_s: float = 0.0,
        fail: bool = False,
        timeout_s: float = 2.0,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(timeout_s=timeout_s, retries=0)
        self.pieces = list(pieces)
        self.delay_s = delay_s
        self.fail = fail
        self.clock = clock
        self.prompts: list[Sequence[ChatMessage]] = []
        self.prefilled: list[Sequence[ChatMessage]] = []

    def _load(self) -> None:
        pass

    async def warmup(self) -> None:
        pass

    can_prefill = True

    def _prefill_impl(self, messages: Sequence[ChatMessage]) -> None:
        self.prefilled.append(messages)

    def _stream_impl(
        self, messages: Sequence[ChatMessage], max_tokens: int, temperature: float
    ) -> Iterator[str]:
        self.prompts.append(messages)
        if self.fail:
            raise ProviderError("llm exploded")
        for piece in self.pieces:
            time.sleep(self.delay_s)
            yield piece

    def stream(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int = 96,
        temperature: float = 0.3,
        timings: StageTimings | None = None,
    ) -> AsyncGenerator[str, None]:
        if self.clock is None:
            return super().stream(
                messages, max_tokens=max_tokens, temperature=temperature, timings=timings
            )
        prompt = tuple(self._checked(messages, max_tokens))
        return self._counted(
            self._stream_async("llm_first_token", "llm_total", lambda: self._paced(prompt), timings)
        )

    async def _paced(self, messages: Sequence[ChatMessage]) -> AsyncIterator[str]:
        """The pieces on the clock, as ``_stream_impl`` makes them on a thread."""
        assert self.clock is not None
        self.prompts.append(messages)
        if self.fail:
            raise ProviderError("llm exploded")
        for piece in self.pieces:
            await self.clock.sleep(self.delay_s)
            yield piece

    async def _attempt(self, work: Callable[[], Awaitable[T]]) -> T:
        """The provider's timeout (on the first piece) on the clock, when there is one."""
        if self.clock is None:
            return await super()._attempt(work)
        try:
            return await wait_for(self.clock, work(), self.timeout_s)
        except TimeoutError:
            raise ProviderTimeout(f"{self.name} timed out after {self.timeout_s:g}s") from None
        except ProviderError:
            raise
        except Exception as exc:
            raise self._wrap(exc) from exc


class ToneTTS(TTS):
    """Speaks 100 ms of tone per word."""

    def __init__(self) -> None:
        super().__init__(timeout_s=2.0, retries=0)
        self.texts: list[str] = []

    def _load(self) -> None:
        pass

    async def warmup(self) -> None:
        pass

    def _synthesize_impl(self, text: str, sample_rate: int) -> Iterator[bytes]:
        self.texts.append(text)
        for _ in text.split():
            yield tone(100, 3000)


async def fake_models(asr: ASR, llm: LLM, tts: TTS, clock: Clock | None = None) -> ModelSet:
    """The models, loaded; a ``ScriptedLLM`` without a clock of its own takes ``clock``."""
    if clock is not None and isinstance(llm, ScriptedLLM) and llm.clock is None:
        llm.clock = clock
    vad = EnergyVAD(name="vad")
    for m in (asr, llm, tts, vad):
        await m.load()
    return ModelSet(asr=asr, llm=llm, tts=tts, vad=vad, embedder=None)


class MemoryCall:
    """An in-memory call: the test feeds caller audio and reads what was sent.

    In real time, or on ``clock`` (a ``FakeClock``): then each frame moves the clock on by
    20 ms, once the call has done all it can before that (``FakeClock.advance``).
    """

    sample_rate = RATE

    def __init__(
        self,
        call_id: str = "call-1",
        transfer_result: TransferResult | None = None,
        bridge_result: TransferResult | None = None,
        *,
        clock: FakeClock | None = None,
    ) -> None:
        self.call_id = call_id
        self._fake_clock = clock
        #: The call's clock: its frames' times, the waits of its REFER and bridge.
        self.clock: Clock = clock if clock is not None else MONOTONIC
        self.answered_at = self.clock.now()
        self.sent = bytearray()
        self._queue: list[bytes] = []
        self.cleared = 0
        self._inbound: asyncio.Queue[InboundEvent] = asyncio.Queue()
        self._drained = asyncio.Event()
        self.hangups = 0
        #: (target, timeout_s, frames still queued when the REFER went out) per transfer.
        self.transfers: list[tuple[str, float, int]] = []
        self.transfer_result = transfer_result or TransferResult(True, 200, "OK")
        #: (target, timeout_s, summary) per bridged transfer.
        self.bridges: list[tuple[str, float, bytes]] = []
        self.bridge_result = bridge_result or TransferResult(True, 200, "bridged")

    @property
    def queued_frames(self) -> int:
        return len(self._queue)

    def send(self, pcm: bytes) -> None:
        for i in range(0, len(pcm), FRAME_BYTES):
            self._queue.append(pcm[i : i + FRAME_BYTES])

    async def wait_playout_drained(self) -> None:
        while self._queue:
            self._drained.clear()
            await self._drained.wait()

    def clear_playout(self) -> int:
        n = len(self._queue)
        self._queue.clear()
        self._drained.set()
        self.cleared += n
        return n

    async def hangup(self) -> None:
        self.hangups += 1
        await self._inbound.put(CallEnded(reason="hangup", by_remote=False, at=self.clock.now()))

    async def transfer(self, target: str, *, timeout_s: float = 30.0) -> TransferResult:
        self.transfers.append((target, timeout_s, len(self._queue)))
        await self.clock.sleep(0.05)  # the REFER and its NOTIFY
        return self.transfer_result

    async def bridge(
        self, target: str, *, timeout_s: float = 30.0, summary: bytes = b""
    ) -> TransferResult:
        self.bridges.append((target, timeout_s, summary))
        await self.clock.sleep(0.05)  # the agent's INVITE and answer
        return self.bridge_result

    async def receive(self) -> AsyncIterator[InboundEvent]:
        while True:
            event = await self._inbound.get()
            yield event
            if isinstance(event, CallEnded):
                return

    async def play(self, pcm: bytes) -> None:
        """Feed caller audio as 20 ms frames at the clock's pace, playing out one bot frame
        per tick."""
        for i in range(0, len(pcm), FRAME_BYTES):
            await self.tick(pcm[i : i + FRAME_BYTES])

    async def tick(self, frame: bytes) -> None:
        if self._queue:
            self.sent += self._queue.pop(0)
            if not self._queue:
                self._drained.set()
        await self._inbound.put(AudioIn(pcm=frame, at=self.clock.now()))
        await self.pass_time(0.02)

    async def pass_time(self, seconds: float) -> None:
        """Let ``seconds`` pass on the call's clock (nothing heard, nothing played)."""
        if self._fake_clock is not None:
            await self._fake_clock.advance(seconds)
        else:
            await asyncio.sleep(seconds)

    async def end(self) -> None:
        await self._inbound.put(CallEnded(reason="bye", by_remote=True, at=self.clock.now()))
