"""Measure the packaged CPU models: ``python -m bench.models [tts vad embed llm asr]``.

All stages take about three minutes on 2 cores, most of it the ASR word error rate table.

Prints load times, ASR latency and word error rate (30 s window vs shorter windows) on
synthesized telephone-band utterances, LLM time to first token (cold and with the system
prompt's KV cache reused), TTS time to first chunk, VAD cost per frame and embedding time.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import time
from collections.abc import Sequence
from contextlib import aclosing

from serve.asr import ASR
from serve.asr_whisper import WhisperASR
from serve.base import Provider
from serve.embed_minilm import MiniLMEmbedder
from serve.llm import LLM, ChatMessage
from serve.llm_llamacpp import LlamaCppLLM
from serve.timing import StageTimings
from serve.tts import TTS
from serve.tts_flite import FliteTTS
from serve.tts_piper import PiperTTS
from serve.vad import VAD
from serve.vad_silero import SileroVAD
from serve.vad_webrtc import WebRtcVAD
from telephony.config import SAMPLE_RATE
from testkit.wer import wer

RATE = SAMPLE_RATE
UTTERANCES = (
    "Where is my order?",
    "I would like to speak to an agent please.",
    "My package arrived damaged and I want a refund.",
    "What time do you open on Saturday?",
    "Can I change the delivery address for my order?",
    "I forgot my password and cannot log in to my account.",
    "How much does shipping to Canada cost?",
    "Please cancel my subscription.",
    "The tracking number you sent me does not work.",
    "Do you have the blue jacket in a medium size?",
    "I was charged twice for the same order.",
    "Yes, that's right.",
    "No.",
    "I need to return a chair that I bought last week, it is the wrong colour.",
    "Can you tell me if the store on Main Street has printer paper in stock?",
    "I ordered three boxes of pens on Monday and only two of them arrived today.",
    "Hello, I am calling about an invoice that I received yesterday, the total looks wrong.",
    "Could you send the receipt to my email address instead of by post?",
    "I would like to upgrade my plan to the business option.",
    "Is there someone I can talk to about a delivery that never arrived?",
    "My account number is on the letter but I cannot find it right now.",
    "Thank you, that was very helpful, goodbye.",
    "When will my new desk be delivered?",
    "I want to file a complaint about the driver who delivered my parcel this morning.",
)
SYSTEM = (
    "You are the phone assistant of Northwind Supplies, a company that sells office furniture "
    "and supplies. Answer the caller in one or two short sentences, in plain spoken English "
    "without lists or symbols. Opening hours are nine to five, Monday to Friday. Orders ship "
    "within two working days and delivery takes three to five days. Returns are free within "
    "thirty days. Never invent order numbers, prices or policies: if you do not know, offer to "
    "transfer the caller to a human agent. Be polite and brief."
)


def _ms(seconds: float) -> str:
    return f"{1000.0 * seconds:.0f} ms"


async def _load(provider: Provider) -> Provider:
    started = time.monotonic()
    await provider.load()
    loaded = time.monotonic()
    await provider.warm()
    print(
        f"load {provider.description}: {loaded - started:.2f} s "
        f"(+ warm-up {time.monotonic() - loaded:.2f} s)"
    )
    return provider


async def _speak(tts: TTS, text: str) -> bytes:
    async with aclosing(tts.synthesize(text, sample_rate=RATE)) as chunks:
        return b"".join([c async for c in chunks])


async def bench_tts(tts: TTS, repeats: int) -> None:
    firsts: list[float] = []
    for text in UTTERANCES[:repeats]:
        timings = StageTimings()
        async with aclosing(tts.synthesize(text, sample_rate=RATE, timings=timings)) as chunks:
            async for _ in chunks:
                pass
        firsts.append(timings.durations_ms["tts_first_chunk"])
    print(f"tts {tts.description}: first chunk median {statistics.median(firsts):.0f} ms")


async def bench_asr(
    variants: Sequence[ASR], voices: Sequence[TTS], repeats: int
) -> dict[str, float]:
    """WER and median latency of each ASR variant over the utterances in each voice."""
    audio = [(text, await _speak(tts, text)) for tts in voices for text in UTTERANCES]
    two_s = next(pcm for _, pcm in audio if 1.6 < len(pcm) / 2 / RATE < 2.6)
    results: dict[str, float] = {}
    for asr in variants:
        errors = words = 0
        latencies: list[float] = []
        for text, pcm in audio:
            started = time.perf_counter()
            result = await asr.transcribe(pcm, RATE)
            latencies.append(time.perf_counter() - started)
            e, n = wer(text, result.text)
            errors, words = errors + e, words + n
        short = []
        for _ in range(repeats):
            started = time.perf_counter()
            await asr.transcribe(two_s, RATE)
            short.append(time.perf_counter() - started)
        print(
            f"asr {asr.description}: WER {100.0 * errors / words:.1f}% over {len(audio)} "
            f"utterances ({words} words), median {_ms(statistics.median(latencies))}; "
            f"{len(two_s) / 2 / RATE:.1f} s utterance median {_ms(statistics.median(short))}"
        )
        results[asr.description] = errors / words
    return results


async def bench_llm(llm: LLM, repeats: int) -> None:
    async def ttft(system: str, user: str) -> tuple[float, int, float]:
        timings = StageTimings()
        prompt = [ChatMessage("system", system), ChatMessage("user", user)]
        count = 0
        async with aclosing(llm.stream(prompt, max_tokens=48, timings=timings)) as pieces:
            async for _ in pieces:
                count += 1
        first, total = timings.durations_ms["llm_first_token"], timings.durations_ms["llm_total"]
        rate = (count - 1) / ((total - first) / 1000.0) if count > 1 and total > first else 0.0
        return first, count, rate

    cold = [(await ttft(f"Session {i}. {SYSTEM}", "Where is my order?"))[0] for i in range(repeats)]
    await ttft(SYSTEM, "Hello")
    warm_runs = [await ttft(SYSTEM, q) for q in UTTERANCES[:repeats]]
    warm = [w[0] for w in warm_runs]
    rates = [w[2] for w in warm_runs if w[2] > 0]
    print(
        f"llm {llm.description}: TTFT cold median {statistics.median(cold):.0f} ms, "
        f"system prompt reused median {statistics.median(warm):.0f} ms; "
        f"decode {statistics.median(rates) if rates else 0.0:.0f} pieces/s"
    )


def bench_vad(vad: VAD, speech: bytes) -> None:
    frame = RATE // 50 * 2
    audio = (bytes(RATE) + speech) * 10
    frames = [audio[i : i + frame] for i in range(0, len(audio) - frame + 1, frame)]
    stream = vad.create_stream(RATE)
    started = time.perf_counter()
    for f in frames:
        stream.push(f)
    per_frame = (time.perf_counter() - started) / len(frames)
    print(f"vad {vad.description}: {1e6 * per_frame:.0f} us per 20 ms frame ({len(frames)} frames)")


async def bench_embed(embedder: MiniLMEmbedder, repeats: int) -> None:
    single: list[float] = []
    for text in UTTERANCES[:repeats]:
        timings = StageTimings()
        await embedder.embed([text], timings=timings)
        single.append(timings.durations_ms["embed"])
    timings = StageTimings()
    await embedder.embed(list(UTTERANCES), timings=timings)
    print(
        f"embed {embedder.description}: one sentence median {statistics.median(single):.1f} ms, "
        f"{len(UTTERANCES)} sentences {timings.durations_ms['embed']:.1f} ms"
    )


STAGES = ("tts", "vad", "embed", "llm", "asr")


async def main(stages: Sequence[str], repeats: int, windows: Sequence[float]) -> None:
    piper = PiperTTS()  # every stage but embed and llm needs speech
    await _load(piper)
    if "tts" in stages:
        await bench_tts(piper, repeats)
    if "vad" in stages:
        speech = await _speak(piper, UTTERANCES[2])
        for vad in (SileroVAD(), WebRtcVAD()):
            await _load(vad)
            bench_vad(vad, speech)
    if "embed" in stages:
        embedder = MiniLMEmbedder()
        await _load(embedder)
        await bench_embed(embedder, repeats)
    if "llm" in stages:
        llm = LlamaCppLLM()
        await _load(llm)
        await bench_llm(llm, repeats)
    if "asr" in stages:
        voices: list[TTS] = [piper]
        if shutil.which("flite"):
            voices += [FliteTTS(voice=v) for v in ("rms", "slt", "awb")]
        variants: list[ASR] = [
            WhisperASR(),
            *(WhisperASR(window_s=w) for w in windows),
            WhisperASR(window_s=max(windows), min_window_s=4.0),
        ]
        for provider in [*voices[1:], *variants]:
            await _load(provider)
        await bench_asr(variants, voices, repeats)


def run(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("stages", nargs="*", help=f"any of {', '.join(STAGES)} (default: all)")
    parser.add_argument("--repeats", type=int, default=5, help="runs per latency figure")
    parser.add_argument(
        "--windows", type=float, nargs="*", default=[8.0, 10.0, 15.0], help="ASR windows (s)"
    )
    args = parser.parse_args(argv)
    unknown = set(args.stages) - set(STAGES)
    if unknown:
        parser.error(f"unknown stage(s) {', '.join(sorted(unknown))}; choose from {STAGES}")
    started = time.monotonic()
    asyncio.run(main(args.stages or STAGES, args.repeats, args.windows))
    print(f"done in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    run()
