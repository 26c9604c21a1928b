"""Speech recognition: the ASR interface, its result type and the words it may hear by."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from serve.audio import check_pcm
from serve.base import Provider
from serve.priority_pool import Priority, Urgency
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
    #: ``alternatives``, or ``transcribe(..., alternatives=n)``).
    alternatives: tuple[str, ...] = ()
    #: The log-probability per token of each of ``alternatives`` (same order): how much
    #: less likely the recognizer found each reading than another (empty when it did not
    #: score them).
    alternative_scores: tuple[float, ...] = ()


@dataclass(frozen=True)
class Vocabulary:
    """The words a caller of this operator is likely to say, for a recognizer that can be
    biased towards them: plain data, the same for every turn of one configuration, passed
    with each request (so a remote recognizer needs no state of its own).

    ``phrases`` are whole sentences in the operator's words (its intents' examples, its
    knowledge questions), most useful first; ``hotwords`` single words and names (places,
    brands, products), most distinctive first. A recognizer with a bounded context takes
    as many of each as it holds, in order; one that cannot be biased ignores both.
    """

    phrases: tuple[str, ...] = ()
    hotwords: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.phrases or self.hotwords)


#: No words to hear by: the recognizer as it is.
NO_VOCABULARY = Vocabulary()


class ASR(Provider):
    """Speech to text for one whole utterance of 16-bit mono PCM."""

    name = "asr"

    def __init__(self, *, timeout_s: float = 5.0, retries: int = 1, name: str | None = None):
        super().__init__(timeout_s=timeout_s, retries=retries, name=name)

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
        """Transcribe ``pcm`` (16-bit signed little-endian mono at ``sample_rate``),
        hearing by ``vocabulary`` where the recognizer can, and with up to
        ``alternatives`` other readings (its n-best) where it can give them.

        ``priority``: ``Urgency.NOW`` for a turn that has ended (a caller is waiting),
        ``Urgency.AHEAD`` for a pass over a pause, which waits behind ended turns and is
        dropped (``serve.errors.WorkDropped``) when it has not started within its level's
        budget (``serve.priority_pool.DEFAULT_BUDGET_S``); a ``Priority`` to raise or
        withdraw later, or with a budget of its own. None (the default): the calling
        context's priority, as before the keyword existed."""
        check_pcm(pcm, sample_rate)
        words = vocabulary or NO_VOCABULARY
        if not words and not alternatives:
            return await self._call(
                "asr", lambda: self._transcribe_impl(pcm, sample_rate), timings, priority
            )
        return await self._call(
            "asr",
            lambda: self._transcribe_with_impl(pcm, sample_rate, words, alternatives),
            timings,
            priority,
        )

    async def transcribe_batch(
        self,
        items: Sequence[tuple[bytes, int]],
        *,
        vocabulary: Vocabulary | None = None,
        timings: StageTimings | None = None,
        priority: Priority | Urgency | None = None,
    ) -> list[Transcription]:
        """Transcribe several utterances (``(pcm, sample_rate)`` each, of different calls)
        at once, all heard by ``vocabulary``, results in order: in one model pass where the
        model can (``_transcribe_batch_impl``), one after the other otherwise.
        ``priority`` as in ``transcribe``."""
        batch = list(items)
        for pcm, sample_rate in batch:
            check_pcm(pcm, sample_rate)
        words = vocabulary or NO_VOCABULARY
        if not words:
            return await self._call(
                "asr", lambda: self._transcribe_batch_impl(batch), timings, priority
            )
        return await self._call(
            "asr", lambda: self._transcribe_batch_with_impl(batch, words), timings, priority
        )

    async def warmup(self) -> None:
        """Transcribe one second of faint noise."""
        noise = np.random.default_rng(0).normal(0.0, 30.0, 16000).astype("<i2").tobytes()
        await self.transcribe(noise, 16000)
        self._reset_metrics()

    @abc.abstractmethod
    def _transcribe_impl(self, pcm: bytes, sample_rate: int) -> Transcription:
        """Blocking transcription; runs on a worker thread."""

    def _transcribe_with_impl(
        self, pcm: bytes, sample_rate: int, vocabulary: Vocabulary, alternatives: int
    ) -> Transcription:
        """Blocking transcription heard by ``vocabulary``, with up to ``alternatives`` other
        readings; a recognizer that can do neither transcribes as it is."""
        return self._transcribe_impl(pcm, sample_rate)

    def _transcribe_batch_impl(self, items: list[tuple[bytes, int]]) -> list[Transcription]:
        """Blocking transcription of several utterances; one by one unless overridden."""
        return [self._transcribe_impl(pcm, rate) for pcm, rate in items]

    def _transcribe_batch_with_impl(
        self, items: list[tuple[bytes, int]], vocabulary: Vocabulary
    ) -> list[Transcription]:
        """``_transcribe_batch_impl`` heard by ``vocabulary``; one by one unless overridden."""
        return [self._transcribe_with_impl(pcm, rate, vocabulary, 0) for pcm, rate in items]
