"""How well the intent cache matches: paraphrases of the intents and utterances that must not
match, in a tuning split and a held-out test split.

    .venv/bin/python -m bench.intent_eval [--asr] [--sweep] [--profile PATH]

Data (this folder), one folder per split, each with ``paraphrases.toml`` (per intent) and
``negatives.txt`` (other requests, near-misses and chit-chat):

- ``tuning/``: the thresholds are chosen on it (``--sweep``), and it may be read to see
  which wordings the profile's examples lack.
- ``test/``: held out. Nothing is chosen on it; it is only reported.

No utterance of either split is a profile example or negative, and the splits share none
(``load_eval_sets`` checks, after normalization). With ``--asr`` each utterance is first
spoken by a flite voice at 8 kHz and transcribed by the bot's own ASR configuration, as on a
call; the transcripts are cached in ``asr_transcripts.json`` under a key of everything they
depend on (``AsrSetup``).
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import subprocess
import time
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from bot.intent_match import (
    IntentIndex,
    IntentVectors,
    Match,
    Scores,
    Thresholds,
    Vectors,
    normalize,
    query_text,
)
from bot.profile import BotProfile, IntentMatchingConfig
from serve import ASR, Embedder

DATA = Path(__file__).parent
TRANSCRIPTS = DATA / "asr_transcripts.json"
NONE = "(none)"
SPLITS = ("tuning", "test")
#: What the held-out test split must keep (tests/bench/test_intent_eval.py checks).
MIN_TEST_INTENTS = 8
MIN_TEST_PER_INTENT = 10
MIN_TEST_NEGATIVES = 80

Items = list[tuple[str, str | None]]


@dataclass(frozen=True)
class EvalSet:
    """One split: utterances with the intent they mean (``None``: must not match)."""

    name: str
    items: Items

    @property
    def positives(self) -> list[tuple[str, str]]:
        return [(t, i) for t, i in self.items if i is not None]

    @property
    def negatives(self) -> list[str]:
        return [t for t, i in self.items if i is None]

    def per_intent(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for _, name in self.positives:
            counts[name] = counts.get(name, 0) + 1
        return counts


def read_split(name: str, data: Path = DATA) -> EvalSet:
    """One split's files as they are (``load_eval_sets`` adds the checks)."""
    folder = data / name
    paraphrases = tomllib.loads((folder / "paraphrases.toml").read_text(encoding="utf-8"))
    negatives = [
        line.strip()
        for line in (folder / "negatives.txt").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    items: Items = []
    for intent, texts in paraphrases.items():
        items += [(str(t), str(intent)) for t in texts]
    items += [(t, None) for t in negatives]
    return EvalSet(name, items)


def load_eval_sets(
    profile: BotProfile, data: Path = DATA, absent: list[str] | None = None
) -> dict[str, EvalSet]:
    """Both splits, checked: none of their utterances in the profile, no utterance twice
    (within a split or across the two). Paraphrases of an intent the profile does not have
    must not match any intent: they count as negatives (their names are added to
    ``absent``)."""
    known = {i.name for i in profile.intents}
    in_profile = {normalize(t) for i in profile.intents for t in (*i.examples, *i.negatives)}
    sets = {name: read_split(name, data) for name in SPLITS}
    for name, split in sets.items():
        missing = sorted({i for _, i in split.positives} - known)
        if missing:
            if absent is not None:
                absent += [m for m in missing if m not in absent]
            items = [(t, i if i in known else None) for t, i in split.items]
            sets[name] = EvalSet(name, items)
    seen: dict[str, str] = {}
    for split in sets.values():
        leaked = [t for t, _ in split.items if normalize(t) in in_profile]
        if leaked:
            raise ValueError(f"{split.name}: utterances that are in the profile: {leaked}")
        for text, _ in split.items:
            other = seen.setdefault(normalize(text), split.name)
            if other != split.name:
                raise ValueError(f"{text!r} is in both {other} and {split.name}")
        repeated = len(split.items) - len({normalize(t) for t, _ in split.items})
        if repeated:
            raise ValueError(f"{split.name}: {repeated} utterances appear twice")
    return sets


def rule_of(m: IntentMatchingConfig) -> Thresholds:
    return Thresholds(
        threshold=m.threshold,
        margin=m.margin,
        negative_margin=m.negative_margin,
        top_k=m.top_k,
        calibration=m.calibration,
        action_threshold=m.action_threshold,
    )


async def build_index(profile: BotProfile, embedder: Embedder) -> IntentIndex:
    """The profile's intents as the cache would hold them (no audio)."""
    intents = []
    for intent in profile.intents:
        # As the cache builds its entries: the examples as written.
        vectors = await embedder.embed([*intent.examples, *intent.negatives])
        n = len(intent.examples)
        intents.append(
            IntentVectors(
                name=intent.name,
                examples=tuple(intent.examples),
                negatives=tuple(intent.negatives),
                example_vectors=vectors[:n],
                negative_vectors=vectors[n:],
                action=intent.action,
            )
        )
    return IntentIndex(intents)


async def embed_queries(embedder: Embedder, texts: Sequence[str]) -> Vectors:
    """The caller's words as the cache embeds them (``query_text``)."""
    return await embedder.embed([query_text(t) for t in texts])


def decide(index: IntentIndex, text: str, vector: Vectors, rule: Thresholds) -> Match:
    """The cache's decision: exact match, else semantic."""
    return index.exact(text) or index.semantic(vector, rule)


@dataclass
class Outcome:
    """Counts for one split, one input and one threshold setting."""

    correct: int = 0
    wrong: int = 0  # a paraphrase answered with another intent
    missed: int = 0  # a paraphrase sent to the LLM
    false_accepts: int = 0  # a negative answered from the cache
    positives: int = 0
    negatives: int = 0
    confusion: dict[tuple[str, str], int] = field(default_factory=dict)
    false_accept_texts: list[tuple[str, str, float]] = field(default_factory=list)
    wrong_texts: list[tuple[str, str, str, float]] = field(default_factory=list)
    missed_texts: list[tuple[str, str, str, float]] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return self.correct / self.positives if self.positives else 0.0

    @property
    def false_accept_rate(self) -> float:
        return self.false_accepts / self.negatives if self.negatives else 0.0


def prepare(index: IntentIndex, items: Items, vectors: Vectors, top_k: int) -> list[Match | Scores]:
    """Per utterance: the exact-match decision, or its scores for the semantic rule."""
    return [
        index.exact(text) or index.scores(vector, top_k)
        for (text, _), vector in zip(items, vectors, strict=True)
    ]


@dataclass(frozen=True)
class Ranking:
    """How far the embedder alone gets, before any rule: which part of the task is hard."""

    nearest_right: float
    """Share of the paraphrases whose best-scoring intent (mean of its ``top_k`` nearest
    examples, no threshold) is the intent they mean."""
    one_threshold: float
    """Share of the paraphrases a single score threshold, set just above the best-scoring
    negative, would answer right: the most any threshold-only rule gets at 0 false accepts."""


def ranking(index: IntentIndex, items: Items, vectors: Vectors, top_k: int) -> Ranking:
    names = [i.name for i in index.intents]
    right: list[tuple[bool, float]] = []
    negative_best = -1.0
    for (_, truth), vector in zip(items, vectors, strict=True):
        scores = index.scores(vector, top_k).intent
        best = int(np.argmax(scores))
        if truth is None:
            negative_best = max(negative_best, float(scores[best]))
        else:
            right.append((names[best] == truth, float(scores[best])))
    if not right:
        return Ranking(0.0, 0.0)
    return Ranking(
        nearest_right=sum(ok for ok, _ in right) / len(right),
        one_threshold=sum(ok and s > negative_best for ok, s in right) / len(right),
    )


def evaluate(index: IntentIndex, items: Items, vectors: Vectors, rule: Thresholds) -> Outcome:
    return tally(index, items, prepare(index, items, vectors, rule.top_k), rule)


def tally(
    index: IntentIndex, items: Items, prepared: Sequence[Match | Scores], rule: Thresholds
) -> Outcome:
    """Apply ``rule`` to prepared utterances and count the outcomes."""
    out = Outcome()
    for (text, truth), found in zip(items, prepared, strict=True):
        match = found if isinstance(found, Match) else index.judge(found, rule)
        got = match.intent or NONE
        want = truth or NONE
        out.confusion[(want, got)] = out.confusion.get((want, got), 0) + 1
        if truth is None:
            out.negatives += 1
            if match.intent is not None:
                out.false_accepts += 1
                out.false_accept_texts.append((text, got, match.score))
        else:
            out.positives += 1
            if match.intent == truth:
                out.correct += 1
            elif match.intent is None:
                out.missed += 1
                out.missed_texts.append((text, truth, match.reason, match.score))
            else:
                out.wrong += 1
                out.wrong_texts.append((text, truth, got, match.score))
    return out


# -- the threshold sweep ------------------------------------------------------------------

TOP_KS = (2, 3, 4, 5, 6)
CALIBRATIONS = (0.0, 0.25, 0.5, 0.75, 1.0)
THRESHOLDS = tuple(round(0.30 + 0.0125 * n, 4) for n in range(33))  # 0.30 .. 0.70
MARGINS = (0.0, 0.025, 0.05, 0.075, 0.10, 0.125, 0.15)
NEGATIVE_MARGINS = (0.0, 0.025, 0.05, 0.075, 0.10, 0.125)
#: 0: an intent that hangs up needs no more than the others.
ACTION_THRESHOLDS = (0.0, 0.5, 0.55, 0.6, 0.65, 0.7)


@dataclass(frozen=True)
class SweepCell:
    """One setting and its counts on each input."""

    rule: Thresholds
    correct: tuple[int, ...]
    false_accepts: tuple[int, ...]
    positives: tuple[int, ...]

    @property
    def total_correct(self) -> int:
        return sum(self.correct)

    @property
    def total_false_accepts(self) -> int:
        return sum(self.false_accepts)

    def accuracy(self, n: int) -> float:
        return self.correct[n] / self.positives[n] if self.positives[n] else 0.0


#: No limits at all: every utterance gets its best intent (``sweep`` then applies the limits).
_OPEN = Thresholds(
    threshold=-np.inf, margin=-np.inf, negative_margin=-np.inf, action_threshold=-np.inf
)


def sweep(
    index: IntentIndex,
    inputs: Sequence[tuple[Items, Vectors]],
    *,
    top_ks: Iterable[int] = TOP_KS,
    calibrations: Iterable[float] = CALIBRATIONS,
) -> list[SweepCell]:
    """Every cell of the grid on each (items, vectors) input (the tuning split: clean text
    and, with ``--asr``, the transcripts). Per top_k and calibration each utterance is judged
    once with no limits; the limits are then the same comparisons as ``IntentIndex.judge``,
    over the whole grid at once."""
    names = {intent.name: n for n, intent in enumerate(index.intents)}
    acting = {intent.name for intent in index.intents if intent.action is not None}
    cells: list[SweepCell] = []
    thresholds = np.asarray(THRESHOLDS)[:, None, None, None, None]
    margins = np.asarray(MARGINS)[None, :, None, None, None]
    negative_margins = np.asarray(NEGATIVE_MARGINS)[None, None, :, None, None]
    action_thresholds = np.asarray(ACTION_THRESHOLDS)[None, None, None, :, None]
    for k in top_ks:
        prepared = [(items, prepare(index, items, vectors, k)) for items, vectors in inputs]
        for w in calibrations:
            rule = replace(_OPEN, top_k=k, calibration=w)
            correct, false_accepts, positives = [], [], []
            for items, found in prepared:
                matches = [f if isinstance(f, Match) else index.judge(f, rule) for f in found]
                # An exact decision (or "no words") holds whatever the thresholds.
                exact = np.array([m.route != "semantic" for m in matches])
                exact_hit = np.array([m.route == "exact" for m in matches])
                score = np.array([m.score for m in matches])
                lead = score - np.array([m.runner_up_score for m in matches])
                gap = np.array([m.similarity - m.negative_score for m in matches])
                acts = np.array([m.best in acting for m in matches])
                needed = np.where(acts, np.maximum(thresholds, action_thresholds), thresholds)
                accepted = (score >= needed) & (lead >= margins) & (gap > negative_margins)
                accepted = np.where(exact, exact_hit, accepted)
                got = np.array([names.get(m.best or "", -1) for m in matches])
                truth = np.array([names.get(t, -2) if t else -1 for _, t in items])
                is_pos = truth >= 0
                correct.append((accepted & (got == truth) & is_pos).sum(axis=-1))
                false_accepts.append((accepted & ~is_pos).sum(axis=-1))
                positives.append(int(is_pos.sum()))
            grid = itertools.product(
                enumerate(THRESHOLDS),
                enumerate(MARGINS),
                enumerate(NEGATIVE_MARGINS),
                enumerate(ACTION_THRESHOLDS),
            )
            for (i, t), (j, mg), (n, nm), (a, at) in grid:
                if at and at <= t:
                    continue  # the same cell as action_threshold 0
                cells.append(
                    SweepCell(
                        rule=Thresholds(
                            threshold=t,
                            margin=mg,
                            negative_margin=nm,
                            top_k=k,
                            calibration=w,
                            action_threshold=at,
                        ),
                        correct=tuple(int(c[i, j, n, a]) for c in correct),
                        false_accepts=tuple(int(f[i, j, n, a]) for f in false_accepts),
                        positives=tuple(positives),
                    )
                )
    return cells


def strictness(cell: SweepCell) -> tuple[float, float, float, float, float, int]:
    r = cell.rule
    return (r.threshold, r.action_threshold, r.margin, r.negative_margin, -r.calibration, -r.top_k)


def choose(cells: Sequence[SweepCell]) -> SweepCell | None:
    """The objective: no false accept on any input, then the most correct answers over all
    inputs; among equals the strictest cell (highest threshold, then action threshold,
    margin, negative margin; then the least calibration and the smallest top_k), the one
    least likely to accept an unseen near-miss."""
    safe = [c for c in cells if c.total_false_accepts == 0]
    if not safe:
        return None
    return max(safe, key=lambda c: (c.total_correct, *strictness(c)))


# -- transcripts ----------------------------------------------------------------------------

#: Files whose code shapes a transcript besides the ASR class itself: the caller's voice
#: (flite at 8 kHz) and the resampling in front of Whisper.
_VOICE_SOURCES = ("bot/caller_voice.py", "serve/audio.py")
_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class AsrSetup:
    """Everything a cached transcript depends on besides the sentence and the voice: a change
    to any of these gives new keys, so stale transcripts are never used."""

    #: The ASR backend name in the bot's settings and its description (model, window).
    backend: str
    description: str
    #: sha256 of the ASR class's module and of ``_VOICE_SOURCES``: any code change there.
    sources: str
    #: faster-whisper, CTranslate2 and flite versions.
    versions: str
    sample_rate: int = 8000
    #: An initial prompt (bench experiment, ``--asr-prompt``), empty for the bot's own setup.
    prompt: str = ""

    @property
    def key(self) -> str:
        raw = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(raw).hexdigest()[:16]


def asr_setup(backend: str, asr: ASR, prompt: str = "") -> AsrSetup:
    digest = hashlib.sha256()
    module = inspect.getsourcefile(type(asr))
    for path in (module, *(str(_ROOT / p) for p in _VOICE_SOURCES)):
        if path is not None:
            digest.update(Path(path).read_bytes())
    return AsrSetup(
        backend=backend,
        description=asr.description,
        sources=digest.hexdigest()[:16],
        versions=_versions(),
        prompt=prompt,
    )


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    parts = []
    for package in ("faster-whisper", "ctranslate2"):
        try:
            parts.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            parts.append(f"{package} -")
    try:
        flite = subprocess.run(
            ["flite", "--version"], capture_output=True, text=True, check=False
        ).stdout
        parts.append(next((ln.strip() for ln in flite.splitlines() if "version" in ln), "flite"))
    except OSError:
        parts.append("flite -")
    return "; ".join(parts)


def voice_keys(items: Items) -> list[str]:
    """``voice|text`` per utterance: the four flite voices in turn, counted within a split
    (so adding to one split does not change the other's voices)."""
    from bot.caller_voice import FLITE_VOICES  # noqa: PLC0415

    return [f"{FLITE_VOICES[n % len(FLITE_VOICES)]}|{text}" for n, (text, _) in enumerate(items)]


@dataclass
class AsrRun:
    """Transcripts of one split and what producing them cost."""

    texts: list[str]
    transcribed: int = 0
    asr_ms: list[float] = field(default_factory=list)


async def asr_transcripts(
    items: Items,
    setup: AsrSetup,
    asr: ASR | None,
    cache: Path = TRANSCRIPTS,
) -> AsrRun:
    """Each utterance spoken by a flite voice at 8 kHz and transcribed by ``asr`` (loaded;
    None: cached transcripts only, KeyError on a missing one)."""
    from bot.caller_voice import speak  # noqa: PLC0415 - only --asr needs flite

    known = read_transcripts(cache)
    entry = known.setdefault(setup.key, {"setup": asdict(setup), "transcripts": {}})
    done: dict[str, str] = entry["transcripts"]
    keys = voice_keys(items)
    todo = [k for k in keys if k not in done]
    run = AsrRun(texts=[])
    if todo:
        if asr is None:
            raise KeyError(f"{len(todo)} transcripts are not cached for ASR setup {setup.key}")
        for n, key in enumerate(todo):
            voice, text = key.split("|", 1)
            pcm = speak(text, voice=voice)
            started = time.perf_counter()
            result = await asr.transcribe(pcm, 8000)
            run.asr_ms.append((time.perf_counter() - started) * 1000.0)
            done[key] = result.text.strip()
            if n % 20 == 0:
                print(f"  asr {n}/{len(todo)}", flush=True)
        run.transcribed = len(todo)
        write_transcripts(cache, known, setup)
    run.texts = [done[k] for k in keys]
    return run


def read_transcripts(path: Path) -> dict[str, Any]:
    """``{setup key: {"setup": {...}, "transcripts": {"voice|text": text}}}``."""
    if not path.exists():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {k: v for k, v in data.items() if isinstance(v, dict) and "transcripts" in v}


def write_transcripts(path: Path, known: dict[str, Any], current: AsrSetup) -> None:
    """Keep the setups whose code is the current one; the others can never match again."""
    kept = {k: v for k, v in known.items() if v["setup"].get("sources") == current.sources}
    path.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def with_prompt(asr: ASR, prompt: str) -> None:
    """Bench experiment: make a loaded ``WhisperASR`` decode after ``prompt`` as previous
    text (Whisper's ``initial_prompt``). The bot's ASR has no such option."""
    model: Any = getattr(asr, "_model", None)
    tokenizer: Any = getattr(asr, "_tokenizer", None)
    if model is None or tokenizer is None:
        raise TypeError(f"{asr.description}: not a loaded Whisper model")
    tokens = tokenizer.encode(" " + prompt.strip())
    get_prompt = model.get_prompt

    def prompted(tok: Any, _previous: list[int], **kw: Any) -> list[int]:
        result: list[int] = get_prompt(tok, tokens, **kw)
        return result

    model.get_prompt = prompted


async def lookup_cost_ms(
    index: IntentIndex, embedder: Embedder, texts: list[str], rule: Thresholds
) -> tuple[list[float], list[float]]:
    """Per utterance, one at a time as the cache does it: normalize + embed + match, and
    the match alone (exact, then the semantic rule on the vector already embedded)."""
    costs, matching = [], []
    for text in texts:
        started = time.perf_counter()
        vector = None
        if index.exact(text) is None:
            vector = (await embedder.embed([query_text(text)]))[0]
            index.semantic(vector, rule)
        costs.append((time.perf_counter() - started) * 1000.0)
        if vector is not None:
            started = time.perf_counter()
            index.exact(text)
            index.semantic(vector, rule)
            matching.append((time.perf_counter() - started) * 1000.0)
    return costs, matching


# -- partial utterances -----------------------------------------------------------------


@dataclass
class PrefixOutcome:
    """The rule on the first words of each utterance, as a speculative lookup sees them when
    the caller pauses mid-sentence (clean text; every word boundary, a superset of pauses)."""

    paraphrase_prefixes: int = 0
    own_intent: int = 0  # a paraphrase's first words already matched its own intent
    negative_prefixes: int = 0
    #: (first words, whole utterance, intent answered): a negative's start got an answer.
    false_accepts: list[tuple[str, str, str]] = field(default_factory=list)
    #: (first words, whole utterance, its intent, intent answered).
    wrong: list[tuple[str, str, str, str]] = field(default_factory=list)


def word_prefixes(items: Items, min_words: int = 2) -> list[tuple[str, str, str | None]]:
    """(first n words, utterance, truth) for every n from ``min_words`` to all words but one."""
    out = []
    for text, truth in items:
        words = text.split()
        out += [(" ".join(words[:n]), text, truth) for n in range(min_words, len(words))]
    return out


async def evaluate_prefixes(
    index: IntentIndex, embedder: Embedder, items: Items, rule: Thresholds
) -> PrefixOutcome:
    prefixes = word_prefixes(items)
    vectors = await embed_queries(embedder, [p for p, _, _ in prefixes])
    out = PrefixOutcome()
    for (prefix, text, truth), vector in zip(prefixes, vectors, strict=True):
        got = decide(index, prefix, vector, rule).intent
        if truth is None:
            out.negative_prefixes += 1
            if got is not None:
                out.false_accepts.append((prefix, text, got))
        else:
            out.paraphrase_prefixes += 1
            if got == truth:
                out.own_intent += 1
            elif got is not None:
                out.wrong.append((prefix, text, truth, got))
    return out


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))
