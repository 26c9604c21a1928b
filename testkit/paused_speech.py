"""Callers who pause mid-sentence: one sentence, one intonation contour, a silence inside.

Two halves synthesized apart each end like a finished sentence (a falling pitch), which is
no test of a pause; espeak-ng's SSML ``<break>`` keeps the sentence's contour across it.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np

from testkit.voices import RATE, read_wav

#: espeak-ng voices, each a different speaker (accent, and a female variant).
ESPEAK_VOICES = ("en-us", "en-gb+f3", "en-gb-scotland")


def say_with_pause(before: str, after: str, pause_ms: int, voice: str = "en-us") -> bytes:
    """``before``, a silence of ``pause_ms``, then ``after``, said as one sentence by an
    espeak-ng voice; 16-bit mono PCM at 8 kHz. ``after`` empty: ``before`` alone."""
    espeak = shutil.which("espeak-ng")
    if espeak is None:
        raise RuntimeError("espeak-ng is not installed (apt-get install espeak-ng)")
    pause = f' <break time="{pause_ms}ms"/> ' if after else ""
    ssml = f"<speak>{escape(before)}{pause}{escape(after)}</speak>"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "say.wav"
        subprocess.run([espeak, "-m", "-v", voice, "-w", str(out), ssml], check=True)
        return read_wav(out, RATE)


def first_half(pcm: bytes, min_pause_ms: int = 800) -> bytes:
    """The audio of a paused request up to its pause: the longest quiet run inside it
    (10 ms frames 40 dB under the loudest), at least ``min_pause_ms`` long."""
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    frame = RATE // 100
    loud = np.array(
        [np.sqrt(np.mean(samples[i : i + frame] ** 2)) for i in range(0, len(samples), frame)]
    )
    quiet = loud < loud.max() / 100
    best_len, best_at, run = 0, 0, 0
    for i, q in enumerate(quiet):
        run = run + 1 if q else 0
        if run > best_len:
            best_len, best_at = run, i - run + 1
    if best_len * 10 < min_pause_ms:
        raise ValueError(f"no pause of {min_pause_ms} ms in the request")
    return pcm[: best_at * frame * 2]
