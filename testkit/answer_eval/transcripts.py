"""The spoken input: each question said by three flite voices at 8 kHz and transcribed by
the bot's Whisper, as on a call. Transcripts are cached in ``asr_transcripts.json`` under
the ASR setup's key (``testkit.intent_eval.transcripts.AsrSetup``: model, code and versions)
and ``voice|text``, so reruns skip the ASR and a changed setup never reads stale ones.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from serve import ASR
from serve.asr import Vocabulary
from testkit.intent_eval.transcripts import (
    AsrSetup,
    read_transcripts,
    vocabulary_key,
    write_transcripts,
)

TRANSCRIPTS = Path(__file__).parent / "asr_transcripts.json"
#: Three of flite's voices, each a different speaker.
VOICES = ("slt", "rms", "awb")
#: Transcripts are saved every this many, so that an interrupted run keeps its work.
SAVE_EVERY = 50


def key(voice: str, text: str) -> str:
    return f"{voice}|{text}"


@dataclass
class Transcribed:
    """Transcripts by ``key(voice, text)``, and what the new ones cost."""

    texts: dict[str, str]
    asr_ms: list[float] = field(default_factory=list)


def missing(texts: Sequence[str], voices: Sequence[str], setup: AsrSetup, cache: Path) -> int:
    """How many of the transcripts are not cached yet."""
    done = read_transcripts(cache).get(setup.key, {}).get("transcripts", {})
    return sum(key(v, t) not in done for t in texts for v in voices)


async def transcribe(
    texts: Sequence[str],
    voices: Sequence[str],
    setup: AsrSetup,
    asr: ASR | None,
    *,
    cache: Path = TRANSCRIPTS,
    progress: Callable[[str], None] | None = None,
    vocabulary: Vocabulary | None = None,
) -> Transcribed:
    """Each text in each voice, from the cache or spoken and transcribed by ``asr`` (loaded;
    None: cached only, KeyError on a missing one), heard by ``vocabulary`` (``setup.prompt``
    names it: ``vocabulary_key``)."""
    if setup.prompt != vocabulary_key(vocabulary):
        raise ValueError("the setup's key does not name the vocabulary heard by")
    from testkit.voices import RATE, speak  # noqa: PLC0415 - only the spoken input needs flite

    known = read_transcripts(cache)
    entry = known.setdefault(setup.key, {"setup": asdict(setup), "transcripts": {}})
    done: dict[str, str] = entry["transcripts"]
    wanted = [key(v, t) for t in texts for v in voices]
    todo = [k for k in dict.fromkeys(wanted) if k not in done]
    result = Transcribed(texts={})
    if todo and asr is None:
        raise KeyError(f"{len(todo)} transcripts are not cached for ASR setup {setup.key}")
    for n, k in enumerate(todo, 1):
        assert asr is not None
        voice, text = k.split("|", 1)
        pcm = speak(text, voice=voice)
        started = time.perf_counter()
        heard = await asr.transcribe(pcm, RATE, vocabulary=vocabulary)
        result.asr_ms.append((time.perf_counter() - started) * 1000.0)
        done[k] = heard.text.strip()
        if n % SAVE_EVERY == 0 or n == len(todo):
            write_transcripts(cache, known, setup)
            if progress is not None:
                progress(f"asr {n}/{len(todo)}")
    result.texts = {k: done[k] for k in wanted}
    return result
