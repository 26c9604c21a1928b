"""Speech synthesis: the TTS interface (streaming 16-bit PCM)."""

from __future__ import annotations

import abc
from collections.abc import AsyncGenerator, Iterator
from contextlib import aclosing

from serve.audio import trim_leading_silence
from serve.base import Provider
from serve.timing import StageTimings


class TTS(Provider):
    """Text to 16-bit mono PCM chunks; ``timeout_s`` bounds the wait for the first chunk."""

    name = "tts"

    def __init__(self, *, timeout_s: float = 5.0, retries: int = 1, name: str | None = None):
        super().__init__(timeout_s=timeout_s, retries=retries, name=name)

    def synthesize(
        self, text: str, *, sample_rate: int = 8000, timings: StageTimings | None = None
    ) -> AsyncGenerator[bytes, None]:
        """Yield 16-bit mono PCM chunks at ``sample_rate``, the first one as early as possible
        and without the silence synthesizers lead in with (10 ms of it kept)."""
        if sample_rate <= 0:
            raise ValueError(f"sample_rate must be positive, got {sample_rate}")
        return self._stream(
            "tts_first_chunk",
            "tts_total",
            lambda: trim_leading_silence(self._synthesize_impl(text, sample_rate), sample_rate),
            timings,
        )

    @property
    def cache_key(self) -> str | None:
        """Who speaks, for caching synthesized audio on disk: a string that changes whenever
        the same text at the same sample rate would sound different. None (the default):
        the output is not known to repeat (a remote or sampling synthesizer), never cached."""
        return None

    async def warmup(self) -> None:
        """Synthesize one short word."""
        async with aclosing(self.synthesize("Hello.")) as chunks:
            async for _ in chunks:
                pass
        self._reset_metrics()

    @abc.abstractmethod
    def _synthesize_impl(self, text: str, sample_rate: int) -> Iterator[bytes]:
        """Blocking generator of PCM chunks; runs on a worker thread and is closed on stop."""
