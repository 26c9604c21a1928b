"""Hold audio made in code: a soft three-note chime every few seconds over a faint hiss.

Nothing is downloaded or shipped: the pattern is synthesized once, at the node's start, as
telephone PCM (16-bit mono) and played in a loop to callers waiting in line. The faint
comfort noise between the chimes tells the caller the line is still open.
"""

from __future__ import annotations

import numpy as np

#: Notes of the chime (Hz): C5, E5, G5, inside a telephone channel's 300-3400 Hz.
CHIME_HZ = (523.25, 659.25, 783.99)
NOTE_S = 0.45
NOTE_GAP_S = 0.3
#: One pattern: the chime, then quiet (comfort noise) until it repeats.
PATTERN_S = 4.0
NOISE_DB = -58.0


def hold_pattern(sample_rate: int, level_db: float = -22.0, *, seed: int = 7) -> bytes:
    """One ``PATTERN_S`` loop of hold audio: PCM16 LE mono at ``sample_rate``."""
    n = int(PATTERN_S * sample_rate)
    rng = np.random.default_rng(seed)
    out = rng.standard_normal(n) * (10 ** (NOISE_DB / 20.0))
    peak = 10 ** (level_db / 20.0)
    note_n = int(NOTE_S * sample_rate)
    t = np.arange(note_n) / sample_rate
    # A soft attack (10 ms) and an exponential decay: a bell, not a beep.
    envelope = np.minimum(t / 0.01, 1.0) * np.exp(-t / (NOTE_S / 4.0))
    for k, hz in enumerate(CHIME_HZ):
        start = int(k * NOTE_GAP_S * sample_rate)
        end = min(start + note_n, n)
        tone = np.sin(2 * np.pi * hz * t) + 0.2 * np.sin(2 * np.pi * 2 * hz * t)
        out[start:end] += (peak / 1.2) * (tone * envelope)[: end - start]
    pcm = np.clip(out * 32767.0, -32768, 32767).astype("<i2")
    return pcm.tobytes()
