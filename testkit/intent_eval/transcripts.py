"""The evaluation's ASR transcripts: each utterance spoken by a flite voice at 8 kHz and
transcribed by the bot's ASR, as on a call, cached in ``asr_transcripts.json`` (the
benchmark's data) under a key of everything a transcript depends on (``AsrSetup``).

``voices="espeak"``: spoken by espeak-ng's robotic voices instead (``testkit.paused_speech``),
under keys of their own (``espeak:en-us|text``) in the same setups. espeak-ng's version and
``testkit/paused_speech.py`` are not part of the setup (that would renew the flite keys):
after a change there, delete the ``espeak:`` transcripts by hand.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from serve import ASR
from serve.asr import Vocabulary
from testkit.botproc import ROOT
from testkit.intent_eval.eval_sets import DATA, Items

TRANSCRIPTS = DATA / "asr_transcripts.json"


#: Files whose code shapes a transcript besides the ASR class itself: the caller's voice
#: (flite at 8 kHz) and the resampling in front of Whisper.
_VOICE_SOURCES = ("testkit/voices.py", "serve/audio.py")


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
    #: The vocabulary the recognizer heard by (``vocabulary_key``), empty for none.
    prompt: str = ""

    @property
    def key(self) -> str:
        raw = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(raw).hexdigest()[:16]


def vocabulary_key(vocabulary: Vocabulary | None) -> str:
    """What a transcript heard by ``vocabulary`` depends on: its words in order, digested
    ("" for none)."""
    if not vocabulary:
        return ""
    raw = json.dumps([vocabulary.phrases, vocabulary.hotwords]).encode()
    return "vocabulary " + hashlib.sha256(raw).hexdigest()[:16]


def asr_setup(backend: str, asr: ASR, prompt: str = "") -> AsrSetup:
    digest = hashlib.sha256()
    # The recognizer's module, and those of the recognizers it is made of (a two-pass
    # recognizer's first and second), with the interface's.
    parts = [asr, *(getattr(asr, a) for a in ("first", "second") if hasattr(asr, a))]
    modules = dict.fromkeys(inspect.getsourcefile(type(p)) for p in parts)
    modules[inspect.getsourcefile(ASR)] = None
    for path in (*modules, *(str(ROOT / p) for p in _VOICE_SOURCES)):
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


#: Which synthetic callers speak the utterances: flite's voices (the benchmark's own) or
#: espeak-ng's (robotic).
Voices = Literal["flite", "espeak"]
VOICES: tuple[Voices, ...] = ("flite", "espeak")
#: How an espeak-ng voice is named in a key, so that its transcripts never meet flite's.
ESPEAK = "espeak:"


def voice_keys(items: Items, voices: Voices = "flite") -> list[str]:
    """``voice|text`` per utterance: the four flite voices in turn (``espeak``: the espeak-ng
    voices, ``espeak:en-us|text``), counted within a split (so adding to one split does not
    change the other's voices)."""
    if voices == "espeak":
        from testkit.paused_speech import ESPEAK_VOICES  # noqa: PLC0415

        names = [ESPEAK + v for v in ESPEAK_VOICES]
    else:
        from testkit.voices import FLITE_VOICES  # noqa: PLC0415

        names = list(FLITE_VOICES)
    return [f"{names[n % len(names)]}|{text}" for n, (text, _) in enumerate(items)]


def speak_key(key: str) -> bytes:
    """The utterance of a ``voice_keys`` key in its voice: 16-bit mono PCM at 8 kHz."""
    voice, text = key.split("|", 1)
    if voice.startswith(ESPEAK):
        from testkit.paused_speech import say_with_pause  # noqa: PLC0415

        return say_with_pause(text, "", 0, voice=voice.removeprefix(ESPEAK))
    from testkit.voices import speak  # noqa: PLC0415 - only --asr needs flite

    return speak(text, voice=voice)


@dataclass
class AsrRun:
    """Transcripts of one split and what producing them cost."""

    texts: list[str]
    #: The recognizer's other readings of each utterance, best first (a recognizer asked
    #: for them; empty otherwise).
    alternatives: list[tuple[str, ...]] = field(default_factory=list)
    transcribed: int = 0
    asr_ms: list[float] = field(default_factory=list)


async def asr_transcripts(
    items: Items,
    setup: AsrSetup,
    asr: ASR | None,
    cache: Path = TRANSCRIPTS,
    vocabulary: Vocabulary | None = None,
    *,
    voices: Voices = "flite",
) -> AsrRun:
    """Each utterance spoken by a flite voice (``voices``: or espeak-ng's) at 8 kHz and
    transcribed by ``asr`` (loaded; None: cached transcripts only, KeyError on a missing one),
    heard by ``vocabulary`` (``setup.prompt`` must be its ``vocabulary_key``)."""
    if setup.prompt != vocabulary_key(vocabulary):
        raise ValueError("the setup's key does not name the vocabulary heard by")
    known = read_transcripts(cache)
    entry = known.setdefault(setup.key, {"setup": asdict(setup), "transcripts": {}})
    done: dict[str, str] = entry["transcripts"]
    others: dict[str, list[str]] = entry.setdefault("alternatives", {})
    keys = voice_keys(items, voices)
    todo = [k for k in keys if k not in done]
    run = AsrRun(texts=[])
    if todo:
        if asr is None:
            raise KeyError(f"{len(todo)} transcripts are not cached for ASR setup {setup.key}")
        for n, key in enumerate(todo):
            pcm = speak_key(key)
            started = time.perf_counter()
            result = await asr.transcribe(pcm, 8000, vocabulary=vocabulary)
            run.asr_ms.append((time.perf_counter() - started) * 1000.0)
            done[key] = result.text.strip()
            if result.alternatives:
                others[key] = list(result.alternatives)
            if n % 20 == 0:
                print(f"  asr {n}/{len(todo)}", flush=True)
        run.transcribed = len(todo)
        write_transcripts(cache, known, setup)
    run.texts = [done[k] for k in keys]
    run.alternatives = [tuple(others.get(k, ())) for k in keys]
    return run


def cache_file(data: Path, given: Path | None) -> Path:
    """The transcripts' cache a command reads: ``given``, else the one in its data folder."""
    return given if given is not None else data / TRANSCRIPTS.name


def read_transcripts(path: Path) -> dict[str, Any]:
    """``{setup key: {"setup": {...}, "transcripts": {"voice|text": text}, "alternatives":
    {"voice|text": [text, ...]}}}`` (alternatives only from a recognizer asked for them)."""
    if not path.exists():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {k: v for k, v in data.items() if isinstance(v, dict) and "transcripts" in v}


def write_transcripts(path: Path, known: dict[str, Any], current: AsrSetup) -> None:
    """Drop a setup of ``current``'s backend made with other code where ``current`` holds
    every transcript it had (the same setup but for the code: superseded); keep the rest.
    ``bench.intent_eval.decisions`` reads transcripts of older code (the words, not the
    code, are what it decides on), so a setup another run made (another profile's
    vocabulary, another split) is not thrown away by this one."""
    mine = set(known.get(current.key, {}).get("transcripts", {}))
    plain = {**asdict(current), "sources": ""}

    def superseded(entry: dict[str, Any]) -> bool:
        setup = entry["setup"]
        if setup.get("sources") == current.sources or {**setup, "sources": ""} != plain:
            return False
        return set(entry["transcripts"]) <= mine

    kept = {k: v for k, v in known.items() if not superseded(v)}
    path.write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n", encoding="utf-8")
