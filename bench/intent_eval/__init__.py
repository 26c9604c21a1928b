"""How well the intent cache matches: held-out paraphrases and utterances that must not match.

    .venv/bin/python -m bench.intent_eval [--asr] [--profile PATH] [--sweep]

Data (this folder): ``paraphrases.toml`` (per intent, none of them a profile example) and
``negatives.txt`` (other requests, near-misses and chit-chat; none of them a profile example
or negative). With ``--asr`` each utterance is first spoken by a flite voice at 8 kHz and
transcribed by the packaged Whisper (10 s window), as on a call; transcripts are cached in
``asr_transcripts.json`` next to the data.
"""

from __future__ import annotations

import json
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bot.intent_match import IntentIndex, IntentVectors, Match, Thresholds, Vectors, normalize
from bot.profile import BotProfile
from serve import Embedder

DATA = Path(__file__).parent
NONE = "(none)"


@dataclass(frozen=True)
class EvalSet:
    """Utterances with the intent they mean (``None``: must not match)."""

    items: list[tuple[str, str | None]]

    @property
    def positives(self) -> list[tuple[str, str]]:
        return [(t, i) for t, i in self.items if i is not None]

    @property
    def negatives(self) -> list[str]:
        return [t for t, i in self.items if i is None]


def load_eval_set(profile: BotProfile, data: Path = DATA) -> EvalSet:
    """Read the data files and check they are held out from the profile."""
    paraphrases = tomllib.loads((data / "paraphrases.toml").read_text(encoding="utf-8"))
    negatives = [
        line.strip()
        for line in (data / "negatives.txt").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    known = {i.name for i in profile.intents}
    seen = {normalize(t) for i in profile.intents for t in (*i.examples, *i.negatives)}
    items: list[tuple[str, str | None]] = []
    for name, texts in paraphrases.items():
        if name not in known:
            raise ValueError(f"paraphrases for unknown intent {name!r}")
        items += [(str(t), name) for t in texts]
    items += [(t, None) for t in negatives]
    leaked = [t for t, _ in items if normalize(t) in seen]
    if leaked:
        raise ValueError(f"evaluation utterances that are in the profile: {leaked}")
    return EvalSet(items)


async def build_index(profile: BotProfile, embedder: Embedder) -> IntentIndex:
    """The profile's intents as the cache would hold them (no audio)."""
    intents = []
    for intent in profile.intents:
        vectors = await embedder.embed([*intent.examples, *intent.negatives])
        n = len(intent.examples)
        intents.append(
            IntentVectors(
                name=intent.name,
                examples=tuple(intent.examples),
                negatives=tuple(intent.negatives),
                example_vectors=vectors[:n],
                negative_vectors=vectors[n:],
            )
        )
    return IntentIndex(intents)


def decide(index: IntentIndex, text: str, vector: Vectors, rule: Thresholds) -> Match:
    """The router's decision: exact match, else semantic."""
    return index.exact(text) or index.semantic(vector, rule)


@dataclass
class Outcome:
    """Counts for one threshold setting."""

    correct: int = 0
    wrong: int = 0  # a paraphrase answered with another intent
    missed: int = 0  # a paraphrase sent to the LLM
    false_accepts: int = 0  # a negative answered from the cache
    positives: int = 0
    negatives: int = 0
    confusion: dict[tuple[str, str], int] = field(default_factory=dict)
    false_accept_texts: list[tuple[str, str, float]] = field(default_factory=list)
    wrong_texts: list[tuple[str, str, str, float]] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return self.correct / self.positives if self.positives else 0.0

    @property
    def false_accept_rate(self) -> float:
        return self.false_accepts / self.negatives if self.negatives else 0.0


def evaluate(
    index: IntentIndex, items: list[tuple[str, str | None]], vectors: Vectors, rule: Thresholds
) -> Outcome:
    out = Outcome()
    for (text, truth), vector in zip(items, vectors, strict=True):
        match = decide(index, text, vector, rule)
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
            else:
                out.wrong += 1
                out.wrong_texts.append((text, truth, got, match.score))
    return out


async def lookup_cost_ms(
    index: IntentIndex, embedder: Embedder, texts: list[str], rule: Thresholds
) -> list[float]:
    """Embed + match, one utterance at a time, as the router does it."""
    costs = []
    for text in texts:
        started = time.perf_counter()
        vector = await embedder.embed([text])
        decide(index, text, vector[0], rule)
        costs.append((time.perf_counter() - started) * 1000.0)
    return costs


async def asr_transcripts(items: list[tuple[str, str | None]], cache: Path) -> list[str]:
    """Each utterance spoken by a flite voice at 8 kHz and transcribed by Whisper (10 s)."""
    from bot.caller_voice import FLITE_VOICES, speak  # noqa: PLC0415 - only --asr needs these
    from serve import WhisperASR  # noqa: PLC0415

    known = _read_transcripts(cache)
    keys = [f"{FLITE_VOICES[n % len(FLITE_VOICES)]}|{text}" for n, (text, _) in enumerate(items)]
    todo = [k for k in keys if k not in known]
    if todo:
        asr = WhisperASR(window_s=10.0)
        await asr.load()
        for n, key in enumerate(todo):
            voice, text = key.split("|", 1)
            result = await asr.transcribe(speak(text, voice=voice), 8000)
            known[key] = result.text.strip()
            if n % 20 == 0:
                print(f"  asr {n}/{len(todo)}", flush=True)
        _write_transcripts(cache, known)
    return [known[k] for k in keys]


def _read_transcripts(path: Path) -> dict[str, str]:
    return dict(json.loads(path.read_text())) if path.exists() else {}


def _write_transcripts(path: Path, known: dict[str, str]) -> None:
    path.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n")


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))
