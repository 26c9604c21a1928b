"""What the pause's pass makes of a paused request's first half, and of the request whole.

Each paused request of ``bench.pause_wire``'s sets is said by its set's espeak-ng voices
(``bench.intonation_pauses``: the pause inside one sentence, so the half keeps its
contour), cut at the pause, given 100 ms of silence (where the pause's pass starts:
``EndpointingConfig.speculate_after_ms``) and passed through G.711; the same request is
said whole too. Each goes through the bot's own pause pass in this process
(``bot.pipeline.speculation.Speculator`` with the node's two recognizers, the default
profile's intent cache and knowledge base) and its reading (``bot.pipeline.pause_reading``),
and the command prints, for halves and wholes apart:

- how each turn would end: as a finished sentence (at once, or after 300 ms), or after
  which wait, and how many of the waits a fallen voice or a long sentence shortens;
- how many were heard a second time, and how many knowledge answers ended as finished
  sentences heard once;
- every half that would end sooner than the unsure wait (as a finished sentence, or on a
  shortened wait): a cut waiting to happen on a caller who pauses that long.

    .venv/bin/python -m bench.pause_halves [--sets tuning,held_out,...]

No node, no wire: a change to the end-of-turn rules is read against every set in a few
minutes, before ``bench.pause_wire`` measures it on the wire. The pass runs as if nothing
else ran (no other calls, no pass started twice), so the wire's figures can differ.
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from bench.asr_compare import g711
from bench.intonation_pauses import SETS
from bot.intents.cache import IntentCache
from bot.knowledge.index import KnowledgeIndex
from bot.pipeline.deciding.call_lookups import CallLookups
from bot.pipeline.deciding.decider import Decider
from bot.pipeline.language.end_of_turn import judge
from bot.pipeline.pause_reading import PauseReading, read_pause
from bot.pipeline.rehear import Rehearing
from bot.pipeline.speculation import Speculation, Speculator
from bot.profile import DEFAULT_PROFILE, BotProfile, load_profile
from bot.vocabulary import vocabulary
from serve import ASR
from serve.registry import ModelSpec, asr_backends, embedder_backends
from testkit.paused_speech import first_half, say_with_pause
from testkit.profile_lookups import profile_lookups
from testkit.voices import RATE

_PAUSE_MS = 1000
#: The silence after the words when the pause's pass starts.
_AFTER_MS = 100


@dataclass(frozen=True)
class Passed:
    """One half or whole request through the pause's pass."""

    set: str
    voice: str
    kind: str  # "half" or "whole"
    said: str
    spec: Speculation
    reading: PauseReading

    @property
    def ends(self) -> str:
        """How the turn would end: "finished" (at once, or after the finished sentence's
        300 ms), "unfinished", "hold", or its wait."""
        r = self.reading
        if r.may_end_early:
            return "finished"
        if r.thought in ("unfinished", "hold"):
            return r.thought
        wait = str(r.wait)
        return f"{wait} (fell)" if r.fell else f"{wait} (long)" if r.long else wait


class Pass:
    """The pause's pass of one call at a time, on the node's models."""

    def __init__(
        self, profile: BotProfile, asr: ASR, cache: IntentCache, knowledge: KnowledgeIndex | None
    ) -> None:
        self._profile = profile
        self._asr = asr
        self._cache = cache
        self._knowledge = knowledge
        self._rehearing = Rehearing.of(asr, sample_rate=RATE)
        self._vocabulary = vocabulary(profile)

    async def over(self, audio: bytes) -> tuple[Speculation, PauseReading] | None:
        decider = Decider(CallLookups(self._cache, self._knowledge), self._profile)
        speculator = Speculator(
            self._asr,
            sample_rate=RATE,
            decider=decider,
            rehearing=self._rehearing,
            vocabulary=self._vocabulary,
        )
        speculator.start(1, audio)
        try:
            done = await speculator.result_for(1, len(audio))
        finally:
            await speculator.close()
        if done is None:
            return None
        return done, read_pause(done, judge, self._profile.endpointing)


async def run(sets: Sequence[str]) -> list[Passed]:
    profile = load_profile(DEFAULT_PROFILE)
    spec = ModelSpec()
    asr = asr_backends.create(spec.asr, spec)
    await asr.load()
    await asr.warm()
    embedder = embedder_backends.create("minilm", spec)
    await embedder.load()
    await embedder.warm()
    cache, knowledge = await profile_lookups(profile, embedder)
    passing = Pass(profile, asr, cache, knowledge)
    silence = bytes(RATE * _AFTER_MS // 1000 * 2)
    out: list[Passed] = []
    try:
        for name in sets:
            paused, voices = SETS[name]
            for voice in voices:
                for before, after in paused:
                    half = first_half(say_with_pause(before, after, _PAUSE_MS, voice=voice))
                    whole = say_with_pause(f"{before} {after}", "", 0, voice=voice)
                    for kind, said, pcm in (
                        ("half", before, half),
                        ("whole", f"{before} {after}", whole),
                    ):
                        got = await passing.over(g711(pcm + silence))
                        if got is not None:
                            out.append(Passed(name, voice, kind, said, *got))
    finally:
        await cache.stop()
    return out


def summary(passed: Sequence[Passed]) -> list[str]:
    lines = [
        "| input | n | how the turn would end | heard twice | knowledge, finished, heard once |"
    ]
    lines.append("|---|---|---|---|---|")
    for kind in ("half", "whole"):
        rows = [p for p in passed if p.kind == kind]
        ends = Counter(p.ends for p in rows)
        told = ", ".join(f"{k} {n}" for k, n in sorted(ends.items(), key=lambda e: -e[1]))
        twice = sum(p.spec.second is not None for p in rows)
        once = sum(
            p.spec.second is None
            and p.reading.may_end_early
            and p.spec.decision is not None
            and p.spec.decision.route == "knowledge"
            and p.spec.decision.kind == "answer"
            for p in rows
        )
        lines.append(f"| {kind} | {len(rows)} | {told} | {twice} | {once} |")
    return lines


def sooner(passed: Sequence[Passed]) -> list[str]:
    """The halves that would end before the unsure wait: at once or on a shortened wait."""
    out = []
    for p in passed:
        if p.kind != "half" or not (p.reading.may_end_early or p.reading.fell or p.reading.long):
            continue
        d = p.spec.decision
        why = "" if d is None else f"{d.kind} {d.route}"
        second = "" if p.spec.second is None else f" / {p.spec.second!r}"
        out.append(
            f"- {p.set}, {p.voice}: '{p.said}' heard {p.spec.heard!r}{second}: {p.ends}, {why}"
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sets", default=",".join(SETS))
    args = parser.parse_args(argv)
    sets = args.sets.split(",")
    passed = asyncio.run(run(sets))
    print(f"sets: {', '.join(sets)} (pause pass {_AFTER_MS} ms into the silence, G.711)\n")
    print("\n".join(summary(passed)))
    early = sooner(passed)
    print(f"\nhalves that would end before the unsure wait: {len(early)}")
    if early:
        print("\n".join(early))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
