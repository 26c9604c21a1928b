"""Piper's memory over many sentences, with ONNX Runtime's memory patterns on (as
``PiperVoice.load`` makes its session) and off (as the node does, ``serve.tts_piper``).

    .venv/bin/python -m bench.tts_memory --sentences 200

Each sentence is 3-25 words drawn at random (seeded) from a call-centre vocabulary, so that
nearly every one is a new length of phonemes. Every 50 sentences it prints the process's
RSS, the heap in use and the memory mapped by glibc's allocator (``testkit.memtrace``),
and the CPU time spent synthesizing. Each mode runs in a process of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import subprocess
import sys
import time

from testkit.memtrace import mallinfo, rss_kib

WORDS = (
    "the", "order", "parcel", "delivery", "address", "refund", "account", "store", "hours",
    "weekend", "shipping", "return", "policy", "blue", "jacket", "payment", "card", "gift",
    "winter", "coat", "size", "password", "reset", "email", "phone", "number", "agent",
    "tomorrow", "morning",
)  # fmt: skip


async def run(sentences: int, patterns: bool) -> None:
    from piper import PiperVoice  # noqa: PLC0415 - the model's library, in this process only

    from serve import PiperTTS  # noqa: PLC0415

    tts = PiperTTS()
    await tts.load()
    if patterns:
        tts._voice = PiperVoice.load(tts._model_path())
    rng = random.Random(1)
    busy = 0.0
    for i in range(sentences):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 25))).capitalize()
        started = time.process_time()
        async for _ in tts.synthesize(text + ".", sample_rate=8000):
            pass
        busy += time.process_time() - started
        if i % 50 == 0 or i == sentences - 1:
            heap = mallinfo()
            print(
                f"patterns {'on ' if patterns else 'off'} sentence {i + 1:4d}: "
                f"RSS {rss_kib() / 1024:6.1f} MB, heap in use {heap['uordblks'] / 2**20:6.1f} "
                f"MB, mapped {heap['hblkhd'] / 2**20:6.1f} MB, CPU {busy:6.1f} s",
                flush=True,
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--mode", choices=("on", "off"), help="one mode, in this process")
    args = parser.parse_args()
    if args.mode is not None:
        asyncio.run(run(args.sentences, args.mode == "on"))
        return 0
    for mode in ("on", "off"):
        cmd = [sys.executable, "-m", "bench.tts_memory", "--sentences", str(args.sentences)]
        subprocess.run([*cmd, "--mode", mode], check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
