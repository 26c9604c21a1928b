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
