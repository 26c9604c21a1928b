"""Boundary fakes for the provider base classes: each fakes only the blocking ``_..._impl``."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

from serve import ASR, LLM, TTS, VAD, ChatMessage, Embedder, Transcription, VadStream


class FakeASR(ASR):
    """Sleeps ``delays_s`` (one per call, then 0) and raises ``failures`` (one per call) first."""

    def __init__(
        self,
        *,
        delays_s: Sequence[float] = (),
        failures: Sequence[Exception] = (),
        timeout_s: float = 1.0,
        retries: int = 1,
        thread_safe: bool = True,
    ) -> None:
        super().__init__(timeout_s=timeout_s, retries=retries, name="fake-asr")
        self.delays_s = list(delays_s)
        self.failures = list(failures)
        self.thread_safe = thread_safe
        self.calls = 0
        #: The niceness of the thread the last call ran on.
        self.niceness = 0
        self.running = 0
        self.max_running = 0
        self.idle = threading.Event()
        self.idle.set()
        self._lock = threading.Lock()

    def _load(self) -> None:
        pass

    def _transcribe_impl(self, pcm: bytes, sample_rate: int) -> Transcription:
        with self._lock:
            self.niceness = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
            self.calls += 1
            self.running += 1
            self.idle.clear()
            self.max_running = max(self.max_running, self.running)
            delay = self.delays_s.pop(0) if self.delays_s else 0.0
            failure = self.failures.pop(0) if self.failures else None
        try:
            time.sleep(delay)
            if failure is not None:
                raise failure
            return Transcription("ok", 1.0, 1000.0 * len(pcm) / 2 / sample_rate, 0.0)
        finally:
            with self._lock:
                self.running -= 1
                if not self.running:
                    self.idle.set()


class FakeLLM(LLM):
    """Yields "t0", "t1", ... every ``token_s``; records how many it made and when it stopped."""

    def __init__(
        self,
        *,
        tokens: int = 5,
        token_s: float = 0.0,
        first_token_s: float = 0.0,
        failures: Sequence[Exception] = (),
        fail_after: int | None = None,
        timeout_s: float = 1.0,
        retries: int = 1,
    ) -> None:
        super().__init__(timeout_s=timeout_s, retries=retries, name="fake-llm")
        self.tokens = tokens
        self.token_s = token_s
        self.first_token_s = first_token_s
        self.failures = list(failures)
        self.fail_after = fail_after
        self.calls = 0
        self.produced = 0
        self.stopped = threading.Event()
        self.prompts: list[Sequence[ChatMessage]] = []

    def _load(self) -> None:
        pass

    def _stream_impl(
        self, messages: Sequence[ChatMessage], max_tokens: int, temperature: float
    ) -> Iterator[str]:
        self.calls += 1
        self.prompts.append(messages)
        self.stopped.clear()
        try:
            time.sleep(self.first_token_s)
            if self.failures:
                raise self.failures.pop(0)
            for i in range(min(self.tokens, max_tokens)):
                if self.fail_after is not None and i == self.fail_after:
                    raise RuntimeError("generation broke")
                if i:
                    time.sleep(self.token_s)
                self.produced += 1
                yield f"t{i}"
        finally:
            self.stopped.set()


#: 10 ms of a loud 8 kHz square wave: sound, not silence, for the leading-silence trim.
LOUD_10MS = np.tile(np.array([4000, -4000], dtype="<i2"), 40).tobytes()


class FakeTTS(TTS):
    """One 10 ms chunk of sound per word (at 8 kHz)."""

    def __init__(self) -> None:
        super().__init__(timeout_s=1.0, name="fake-tts")

    def _load(self) -> None:
        pass

    def _synthesize_impl(self, text: str, sample_rate: int) -> Iterator[bytes]:
        for _ in text.split():
            yield LOUD_10MS


class FakeEmbedder(Embedder):
    """Returns unnormalised vectors: the base class must normalise them."""

    def __init__(self) -> None:
        super().__init__(timeout_s=1.0, name="fake-embedder")

    def _load(self) -> None:
        self.dim = 3

    def _embed_impl(self, texts: list[str]) -> npt.NDArray[np.float32]:
        return np.array([[len(t), 1.0, 0.0] for t in texts], dtype=np.float32) * 5.0


class _CountingStream(VadStream):
    def __init__(self) -> None:
        self.frames = 0

    def push(self, frame: bytes) -> float:
        self.frames += 1
        return 0.0

    def reset(self) -> None:
        self.frames = 0


class FakeVAD(VAD):
    def __init__(self) -> None:
        super().__init__(name="fake-vad")

    def _load(self) -> None:
        pass

    def _create_stream_impl(self, sample_rate: int) -> VadStream:
        return _CountingStream()
