"""Where the voice ends, before a pause and at the end of a request: the fall threshold.

Each paused request of ``bench.pause_wire``'s sets is said by its set's espeak-ng voices
twice: with the pause inside (SSML ``<break>``: the sentence's contour kept across it), of
which the audio up to the pause is the first half a caller stops on; and whole, ending at
its full stop or question mark. ``bot.pipeline.language.intonation.read_intonation``
reads each (8 kHz, as the line carries it), and the command prints how many halves and how
many whole requests end at least N semitones under the voice's median: a fallen voice
shortens the nowhere and question waits (``EndpointingConfig.fall_semitones``), so a half
counted here is a cut waiting to happen, and a whole statement counted is a caller answered
sooner.

    .venv/bin/python -m bench.intonation_pauses [--sets tuning,held_out,...]

No node runs; a few seconds of CPU a set.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import numpy as np

from bench.pause_wire import PAUSED
from bench.pause_wire_held_out import HELD_OUT_VOICES, PAUSED_HELD_OUT
from bench.pause_wire_held_out_2 import HELD_OUT_2_VOICES, PAUSED_HELD_OUT_2
from bench.pause_wire_held_out_3 import HELD_OUT_3_VOICES, PAUSED_HELD_OUT_3
from bench.pause_wire_held_out_4 import HELD_OUT_4_VOICES, PAUSED_HELD_OUT_4
from bench.pause_wire_held_out_5 import HELD_OUT_5_VOICES, PAUSED_HELD_OUT_5
from bot.pipeline.language.intonation import read_intonation
from testkit.paused_speech import ESPEAK_VOICES, first_half, say_with_pause
from testkit.voices import RATE

SETS: dict[str, tuple[Sequence[tuple[str, str]], Sequence[str]]] = {
    "tuning": (PAUSED, ESPEAK_VOICES),
    "held_out": (PAUSED_HELD_OUT, HELD_OUT_VOICES),
    "held_out_2": (PAUSED_HELD_OUT_2, HELD_OUT_2_VOICES),
    "held_out_3": (PAUSED_HELD_OUT_3, HELD_OUT_3_VOICES),
    "held_out_4": (PAUSED_HELD_OUT_4, HELD_OUT_4_VOICES),
    "held_out_5": (PAUSED_HELD_OUT_5, HELD_OUT_5_VOICES),
}
THRESHOLDS = (2.0, 2.5, 3.0, 3.5, 4.0)
_PAUSE_MS = 1000


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sets", default="tuning,held_out,held_out_2,held_out_3")
    args = parser.parse_args(argv)
    halves: list[tuple[str, str, float | None]] = []
    statements: list[float | None] = []
    questions: list[float | None] = []
    took: list[float] = []
    for name in args.sets.split(","):
        paused, voices = SETS[name]
        for voice in voices:
            for before, after in paused:
                half = first_half(say_with_pause(before, after, _PAUSE_MS, voice=voice))
                whole = say_with_pause(f"{before} {after}", "", 0, voice=voice)
                t0 = time.perf_counter()
                tone = read_intonation(half + bytes(RATE // 10 * 2), RATE)
                took.append((time.perf_counter() - t0) * 1000)
                halves.append((voice, before, None if tone is None else tone.end_st))
                tone = read_intonation(whole, RATE)
                end = None if tone is None else tone.end_st
                (questions if after.rstrip().endswith("?") else statements).append(end)

    def fell(ends: Sequence[float | None], st: float) -> str:
        n = sum(1 for e in ends if e is not None and e <= -st)
        return f"{n} / {len(ends)} ({100 * n / max(1, len(ends)):.0f}%)"

    print(f"sets: {args.sets}")
    print("| fell at least (semitones) | first halves | whole statements | whole questions |")
    print("|---|---|---|---|")
    for st in THRESHOLDS:
        row = [fell([h[2] for h in halves], st), fell(statements, st), fell(questions, st)]
        print(f"| {st} | " + " | ".join(row) + " |")
    read = [(v, b, e) for v, b, e in halves if e is not None]
    lowest = sorted(read, key=lambda h: h[2])[:5]
    print("lowest first halves: " + "; ".join(f"{v} '{b}' {e:.1f}" for v, b, e in lowest))
    unread = sum(h[2] is None for h in halves) + statements.count(None) + questions.count(None)
    print(f"too little voice to read: {unread}")
    print(
        f"read_intonation on a first half: P50 {np.percentile(took, 50):.1f} / "
        f"P95 {np.percentile(took, 95):.1f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
