"""Synthetic caller voices for the test caller, tests and benchmarks (8 kHz PCM)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import wave
from pathlib import Path

import numpy as np
import soxr

from telephony.config import SAMPLE_RATE

RATE = SAMPLE_RATE
#: flite's built-in voices, each a different speaker.
FLITE_VOICES = ("slt", "rms", "awb", "kal16")


def read_wav(path: Path, rate: int = RATE) -> bytes:
    """A WAV file as 16-bit mono PCM at ``rate`` (mixed down and resampled as needed)."""
    with wave.open(str(path), "rb") as wav:
        if wav.getsampwidth() != 2:
            raise ValueError(f"{path}: only 16-bit PCM WAV is supported")
        channels, src_rate = wav.getnchannels(), wav.getframerate()
        samples = np.frombuffer(wav.readframes(wav.getnframes()), "<i2")
    mono = samples.reshape(-1, channels).mean(axis=1).astype(np.float32) / 32768.0
    if src_rate != rate:
        mono = soxr.resample(mono, src_rate, rate)
    pcm: bytes = (np.clip(mono, -1.0, 1.0) * 32767).astype("<i2").tobytes()
    return pcm


def write_wav(path: Path, pcm: bytes, rate: int = RATE, channels: int = 1) -> None:
    """Write 16-bit PCM (interleaved when ``channels`` > 1) to a WAV file."""
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(channels)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(pcm)


def speak(text: str, voice: str = "slt", rate: int = RATE) -> bytes:
    """Say ``text`` in a flite voice; 16-bit mono PCM at ``rate``."""
    flite = shutil.which("flite")
    if flite is None:
        raise RuntimeError("flite is not installed (apt-get install flite)")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "say.wav"
        subprocess.run([flite, "-voice", voice, "-t", text, "-o", str(out)], check=True)
        return read_wav(out, rate)
