"""Whether a two-choice question played from its halves is heard as well as one synthesized
whole.

    .venv/bin/python -m bench.question_halves [--every 9] [--profile PATH]

The node synthesizes both halves of the question for each topic at start ("Is this about
X," and "or about X?": ``bot.intents.choice.choice_halves``), and plays a question no call
has asked yet from them (``bot.pipeline.prompts.PromptAudio.find``: the first half's own
trailing silence cut, a clause's pause, the second half). This makes every ``--every``-th
ordered pair of the profile's topics both ways through the packaged Piper voice at 8 kHz,
transcribes each with the packaged Whisper, and prints each pair's word error rate and
length both ways, then the means: a joined question must be heard no worse than a whole one.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
from pathlib import Path

from bot.intents.choice import all_choice_halves, choice_question, choice_topics
from bot.pipeline.prompts import PromptAudio
from bot.profile import DEFAULT_PROFILE, load_profile
from serve import TTS, WhisperASR
from serve.tts_piper import PiperTTS
from testkit.wer import wer

RATE = 8000


async def synthesize(tts: TTS, text: str) -> bytes:
    return b"".join([c async for c in tts.synthesize(text, sample_rate=RATE)])


async def measure(profile_path: Path, every: int) -> None:
    profile = load_profile(profile_path)
    tts, asr = PiperTTS(), WhisperASR()
    await tts.load()
    await asr.load()
    halves = PromptAudio(RATE)
    for text in all_choice_halves(profile):
        await halves.add(tts, text)
    pairs = list(itertools.permutations(choice_topics(profile), 2))[::every]
    errors = {"whole": [0, 0], "joined": [0, 0]}
    seconds = {"whole": 0.0, "joined": 0.0}
    print("| question | whole WER | joined WER | whole s | joined s | joined heard as |")
    print("|---|---|---|---|---|---|")
    for first, second in pairs:
        question = choice_question(first, second)
        joined = halves.find(question)
        assert joined is not None, question
        audio = {"whole": await synthesize(tts, question), "joined": joined}
        row: dict[str, tuple[float, float, str]] = {}
        for way, pcm in audio.items():
            heard = (await asr.transcribe(pcm, RATE)).text
            wrong, words = wer(question, heard)
            errors[way][0] += wrong
            errors[way][1] += words
            seconds[way] += len(pcm) / 2 / RATE
            row[way] = (wrong / words, len(pcm) / 2 / RATE, heard)
        w, j = row["whole"], row["joined"]
        print(f"| {question} | {w[0]:.2f} | {j[0]:.2f} | {w[1]:.2f} | {j[1]:.2f} | {j[2]} |")
    n = len(pairs)
    for way in ("whole", "joined"):
        wrong, words = errors[way]
        print(f"{way}: {n} questions, WER {wrong / words:.3f}, mean {seconds[way] / n:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=9, help="every n-th ordered topic pair")
    parser.add_argument("--profile", type=Path, default=DEFAULT_PROFILE, help="bot profile")
    args = parser.parse_args()
    asyncio.run(measure(args.profile, args.every))


if __name__ == "__main__":
    main()
