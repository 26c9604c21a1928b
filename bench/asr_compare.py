"""The packaged Whisper models side by side on ``bench.models``' utterances:

    .venv/bin/python -m bench.asr_compare [--g711] [--vocabulary] [whisper-window ...]

Word error rate and median time per utterance of each ASR backend (registry names, built as
the node builds them) over ``bench.models.UTTERANCES`` said by Piper and, where Debian's
flite is installed, three flite voices, at 8 kHz; ``--g711`` passes the audio through G.711
mu-law as a telephone line does. The first backend is the reference of a head-to-head count
(utterances each later one heard with fewer / more errors). Default: tiny.en and base on the
bot's fitted window, and tiny.en on the 30 s path greedy and with 5 beams. ``--vocabulary``:
each backend also hears by the default profile's vocabulary (``bot.vocabulary``), as the
bot's recognizer does; these utterances were not written from the profile, so the rows say
what the vocabulary costs on words it does not hold as much as what it gains.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import time

import numpy as np

from bench.models import RATE, UTTERANCES, _load, _speak
from bot.profile import DEFAULT_PROFILE, load_profile
from bot.vocabulary import vocabulary
from serve.asr import ASR, Vocabulary
from serve.registry import ModelSpec, asr_backends
from serve.tts import TTS
from serve.tts_flite import FliteTTS
from serve.tts_piper import PiperTTS
from testkit.wer import wer

DEFAULT = ("whisper-window", "whisper-base-window", "whisper", "whisper-beam")
_BIAS, _CLIP = 0x84, 32635


def g711(pcm: bytes) -> bytes:
    """``pcm`` (16-bit) encoded to G.711 mu-law and decoded again."""
    x = np.frombuffer(pcm, dtype="<i2").astype(np.int32)
    sign = x < 0
    mag = np.minimum(np.abs(x), _CLIP) + _BIAS
    exponent = np.clip(np.floor(np.log2(mag)).astype(np.int32) - 7, 0, 7)
    mantissa = (mag >> (exponent + 3)) & 0x0F
    decoded = (((mantissa << 3) + _BIAS) << exponent) - _BIAS
    out: bytes = np.where(sign, -decoded, decoded).astype("<i2").tobytes()
    return out


async def main(backends: list[str], telephone: bool, by_vocabulary: bool) -> None:
    print(f"load average at start: {os.getloadavg()}")
    voices: list[TTS] = [PiperTTS()]
    if shutil.which("flite"):
        voices += [FliteTTS(voice=v) for v in ("rms", "slt", "awb")]
    models: list[ASR] = [asr_backends.create(name, ModelSpec(asr=name)) for name in backends]
    for provider in [*voices, *models]:
        await _load(provider)
    # Each backend as it is, and (``--vocabulary``) heard by the profile's words.
    words_of: list[Vocabulary | None] = [None]
    if by_vocabulary:
        words_of.append(vocabulary(load_profile(DEFAULT_PROFILE)))
    variants = [(asr, w) for asr in models for w in words_of]
    labels = [asr.description + (" + vocabulary" if w else "") for asr, w in variants]
    for asr in models:
        asr.timeout_s = 300.0  # figures, not the node's limit
    audio = [(text, await _speak(tts, text)) for tts in voices for text in UTTERANCES]
    if telephone:
        audio = [(text, g711(pcm)) for text, pcm in audio]
    errors: dict[str, list[int]] = {label: [] for label in labels}
    latencies: dict[str, list[float]] = {label: [] for label in labels}
    words = 0
    for text, pcm in audio:  # interleaved: the machine's load falls on every model alike
        for (asr, heard_by), label in zip(variants, labels, strict=True):
            started = time.perf_counter()
            result = await asr.transcribe(pcm, RATE, vocabulary=heard_by)
            latencies[label].append(1000.0 * (time.perf_counter() - started))
            errors[label].append(wer(text, result.text)[0])
        words += wer(text, text)[1]
    reference = errors[labels[0]]
    line = "G.711 mu-law" if telephone else "linear PCM"
    print(f"\n{len(audio)} utterances ({words} words), 8 kHz {line}, {len(voices)} voices")
    for label in labels:
        mine = errors[label]
        better = sum(m < r for m, r in zip(mine, reference, strict=True))
        worse = sum(m > r for m, r in zip(mine, reference, strict=True))
        print(
            f"{label}: WER {100.0 * sum(mine) / words:.1f}%, median "
            f"{statistics.median(latencies[label]):.0f} ms per utterance"
            + ("" if label == labels[0] else f"; better on {better}, worse on {worse}")
        )
    print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="The packaged Whisper models compared.")
    parser.add_argument("backends", nargs="*", default=list(DEFAULT), help="ASR backend names")
    parser.add_argument("--g711", action="store_true", help="through G.711 mu-law")
    parser.add_argument(
        "--vocabulary", action="store_true", help="also heard by the default profile's words"
    )
    args = parser.parse_args()
    started = time.monotonic()
    asyncio.run(main(args.backends, args.g711, args.vocabulary))
    print(f"done in {time.monotonic() - started:.0f} s")
