"""Two recognizers: a fast one for every turn, a second one the bot asks for on doubt.

Whisper base heard telephone speech with fewer errors than tiny.en at about twice the time,
and was better on as many utterances as it was worse (docs/benchmarks.md): not a clean win as
the only recognizer, but a second opinion worth its cost on the turns that need one (a first
transcript that matched nothing). ``transcribe`` is the first recognizer's; ``second_pass``
decodes the same audio again with the second (base, or tiny.en with a beam search).
"""

from __future__ import annotations

from collections.abc import Sequence

from serve.asr import ASR, Transcription, Vocabulary
from serve.priority_pool import Priority, Urgency
from serve.timing import StageTimings


class TwoPassASR(ASR):
    """``first`` answers every turn; ``second_pass`` asks ``second`` for one again."""

    name = "whisper-two-pass"

    def __init__(
        self, first: ASR, second: ASR, *, name: str | None = None, early: bool = False
    ) -> None:
        super().__init__(timeout_s=first.timeout_s, retries=first.retries, name=name)
        self.first = first
        self.second = second
        #: Whether a caller's pause begins the second hearing with the first, as spare work
        #: (``ModelSpec.asr_second_early``; bot/pipeline/speculation.py).
        self.early = early

    @property
    def description(self) -> str:
        return f"{self.first.description}; second pass {self.second.description}"

    def _load(self) -> None:  # pragma: no cover - ``load`` loads the two recognizers
        raise NotImplementedError

    async def load(self) -> None:
        await self.first.load()
        await self.second.load()
        self.loaded = True

    async def warmup(self) -> None:
        await self.first.warmup()
        await self.second.warmup()

    def metrics(self) -> dict[str, float]:
        """The first recognizer's (every turn), and the second's under ``second_``."""
        second = {f"second_{k}": v for k, v in self.second.metrics().items()}
        return {**self.first.metrics(), **second}

    async def transcribe(
        self,
        pcm: bytes,
        sample_rate: int,
        *,
        vocabulary: Vocabulary | None = None,
        alternatives: int = 0,
        timings: StageTimings | None = None,
        priority: Priority | Urgency | None = None,
    ) -> Transcription:
        return await self.first.transcribe(
            pcm,
            sample_rate,
            vocabulary=vocabulary,
            alternatives=alternatives,
            timings=timings,
            priority=priority,
        )

    async def transcribe_batch(
        self,
        items: Sequence[tuple[bytes, int]],
        *,
        vocabulary: Vocabulary | None = None,
        timings: StageTimings | None = None,
        priority: Priority | Urgency | None = None,
    ) -> list[Transcription]:
        return await self.first.transcribe_batch(
            items, vocabulary=vocabulary, timings=timings, priority=priority
        )

    async def second_pass(
        self,
        pcm: bytes,
        sample_rate: int,
        *,
        vocabulary: Vocabulary | None = None,
        timings: StageTimings | None = None,
        priority: Priority | Urgency | None = None,
    ) -> Transcription:
        """The same audio decoded by the second recognizer; its time is ``asr_second``.
        ``priority`` as in ``ASR.transcribe`` (the second hearing in a pause: ``AHEAD``)."""
        own = StageTimings()
        result = await self.second.transcribe(
            pcm, sample_rate, vocabulary=vocabulary, timings=own, priority=priority
        )
        if timings is not None:
            for stage, ms in own.durations_ms.items():
                timings.record(stage.replace("asr", "asr_second", 1), ms)
        return result

    def _transcribe_impl(self, pcm: bytes, sample_rate: int) -> Transcription:
        return self.first._transcribe_impl(pcm, sample_rate)
