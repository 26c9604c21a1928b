"""What a call hears, against one pass over the same audio:

    .venv/bin/python -m bench.asr_call [--splits tuning test] [--paused] [--no-vocabulary]
        [--profile PROFILE --data FOLDER]

Each utterance of the intent evaluation's splits (``bench/intent_eval``, or ``--data``), said
by the flite voices in turn at 8 kHz as ``bench.intent_eval --asr`` says them, with a second
of silence before and three after, goes through the call's hearing path in-process
(``testkit.call_hearing``: the VAD, the turn detector, the pause's pass, the transcriber,
the bot answering each turn), and the same utterance alone is transcribed once by the same
recognizer (the bot's first, heard by the profile's vocabulary unless ``--no-vocabulary``).
``--paused`` adds the paused requests of ``bench.pause_wire`` (its tuning set, in its three
espeak-ng voices, pauses of 0.5-1.5 s). Per set and voice: the word error rate of what the
call heard (all its turns' words) and of the one pass, the utterances heard with words said
twice (``said_twice``), and those the call heard in more than one turn (the words heard:
each turn's, but a turn's that the next one went on with: its words are in that one's).

The same command, run from a checkout of an earlier commit (with this file and
``testkit/call_hearing.py`` copied in), gives the figures before a change.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bench.pause_wire import PAUSED, PAUSES_MS
from bot.profile import DEFAULT_PROFILE, load_profile
from serve.registry import ModelSpec, asr_backends, vad_backends
from testkit.call_hearing import hear_call, said_twice, what_was_heard
from testkit.intent_eval.eval_sets import DATA, read_split
from testkit.intent_eval.transcripts import voice_keys
from testkit.paused_speech import ESPEAK_VOICES, say_with_pause
from testkit.voices import RATE, speak
from testkit.wer import wer

if TYPE_CHECKING:
    from serve.asr import Vocabulary

try:  # the vocabulary, where this checkout has one
    from bot.vocabulary import vocabulary
except ImportError:  # pragma: no cover - an earlier commit
    vocabulary = None  # type: ignore[assignment]


@dataclass
class Tally:
    utterances: int = 0
    words: int = 0
    call_errors: int = 0
    pass_errors: int = 0
    call_twice: int = 0
    pass_twice: int = 0
    split_turns: int = 0
    examples: list[str] = field(default_factory=list)


async def main(args: argparse.Namespace) -> int:
    profile = load_profile(args.profile)
    spec = ModelSpec()
    asr = asr_backends.create(spec.asr, spec)
    vad = vad_backends.create(spec.vad, spec)
    for model in (asr, vad):
        await model.load()
    asr.timeout_s = 300.0  # figures, not the node's limit
    words: Vocabulary | None = None
    if args.vocabulary and vocabulary is not None:
        words = vocabulary(profile)
    print(f"# The call's hearing against one pass ({dt.date.today()})\n")
    print(f"recognizer: {asr.description}; vocabulary: {'profile' if words else 'none'}")
    print(f"load average at start: {os.getloadavg()}\n")
    cases: list[tuple[str, str, str, bytes]] = []  # set, voice, text, utterance
    for split in args.splits:
        for key in voice_keys(read_split(split, args.data).items):
            voice, text = key.split("|", 1)
            cases.append((split, voice, text, speak(text, voice=voice)))
    if args.paused:
        for v, voice in enumerate(ESPEAK_VOICES):
            for j, (before, after) in enumerate(PAUSED):
                pause = PAUSES_MS[(v * len(PAUSED) + j) % len(PAUSES_MS)]
                said = say_with_pause(before, after, pause, voice=voice)
                cases.append(("paused", voice, f"{before} {after}", said))
    tallies: dict[tuple[str, str], Tally] = defaultdict(Tally)
    started = time.monotonic()
    for n, (group, voice, text, utterance) in enumerate(cases):
        pcm = bytes(2 * RATE) + utterance + bytes(2 * RATE * 3)
        turns = await hear_call(asr, vad, profile.endpointing, pcm, vocabulary=words)
        heard = what_was_heard(turns)
        if words is None:
            once = (await asr.transcribe(utterance, RATE)).text
        else:
            once = (await asr.transcribe(utterance, RATE, vocabulary=words)).text
        for tally in ((group, voice), (group, "all")):
            t = tallies[tally]
            t.utterances += 1
            t.words += wer(text, text)[1]
            t.call_errors += wer(text, heard)[0]
            t.pass_errors += wer(text, once)[0]
            t.call_twice += said_twice(text, heard)
            t.pass_twice += said_twice(text, once)
            t.split_turns += len(turns) > 1
            if tally[1] == "all" and said_twice(text, heard):
                t.examples.append(f"{voice}: {text!r} heard as {heard!r}")
        if n % 50 == 0:
            print(f"  {n}/{len(cases)}", file=sys.stderr, flush=True)
    print(
        "| set | voice | utterances | WER, call | WER, one pass | said twice, call "
        "| said twice, one pass | heard in 2+ turns |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for (group, voice), t in sorted(tallies.items(), key=lambda kv: (kv[0][0], kv[0][1] == "all")):
        print(
            f"| {group} | {voice} | {t.utterances} | {100.0 * t.call_errors / t.words:.1f}% "
            f"| {100.0 * t.pass_errors / t.words:.1f}% | {t.call_twice} | {t.pass_twice} "
            f"| {t.split_turns} |"
        )
    for (group, _), t in tallies.items():
        for example in t.examples:
            print(f"- {group}, said twice: {example}")
    print(f"\nload average at the end: {os.getloadavg()}; {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="What a call hears, against one pass.")
    parser.add_argument("--splits", nargs="*", default=["tuning"])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--profile", type=Path, default=DEFAULT_PROFILE)
    parser.add_argument("--paused", action="store_true", help="also pause_wire's requests")
    parser.add_argument("--no-vocabulary", dest="vocabulary", action="store_false")
    sys.exit(asyncio.run(main(parser.parse_args())))
