"""Speech recognition: the ASR interface and its result type."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from serve.audio import check_pcm
from serve.base import Provider
from serve.timing import StageTimings


@dataclass(frozen=True)
class Transcription:
    """The text of one utterance with the recogniser's confidence and no-speech probability."""

    text: str
    confidence: float
    audio_ms: float
    no_speech_prob: float
    #: Other readings of the same audio the recognizer found likely, best first, each
    #: different from ``text`` (only from a recognizer asked for them: ``WhisperASR``'s
    #: ``alternatives``).
    alternatives: tuple[str, ...] = ()


class ASR(Provider):
    """Speech to text for one whole utterance of 16-bit mono PCM."""

    name = "asr"

    def __init__(self, *, timeout_s: float = 5.0, retries: int = 1, name: str | None = None):
        super().__init__(timeout_s=timeout_s, retries=retries, name=name)

    async def transcribe(
        self, pcm: bytes, sample_rate: int, *, timings: StageTimings | None = None
    ) -> Transcription:
        """Transcribe ``pcm`` (16-bit signed little-endian mono at ``sample_rate``)."""
        check_pcm(pcm, sample_rate)
        return await self._call("asr", lambda: self._transcribe_impl(pcm, sample_rate), timings)

    async def transcribe_batch(
        self, items: Sequence[tuple[bytes, int]], *, timings: StageTimings | None = None
    ) -> list[Transcription]:
        """Transcribe several utterances (``(pcm, sample_rate)`` each, of different calls)
        at once, results in order: in one model pass where the model can
        (``_transcribe_batch_impl``), one after the other otherwise."""
        batch = list(items)
        for pcm, sample_rate in batch:
            check_pcm(pcm, sample_rate)
        return await self._call("asr", lambda: self._transcribe_batch_impl(batch), timings)

    async def warmup(self) -> None:
        """Transcribe one second of faint noise."""
        noise = np.random.default_rng(0).normal(0.0, 30.0, 16000).astype("<i2").tobytes()
        await self.transcribe(noise, 16000)
        self._reset_metrics()

    @abc.abstractmethod
    def _transcribe_impl(self, pcm: bytes, sample_rate: int) -> Transcription:
        """Blocking transcription; runs on a worker thread."""

    def _transcribe_batch_impl(self, items: list[tuple[bytes, int]]) -> list[Transcription]:
        """Blocking transcription of several utterances; one by one unless overridden."""
        return [self._transcribe_impl(pcm, rate) for pcm, rate in items]
