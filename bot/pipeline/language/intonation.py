"""Where the caller's voice ends: low in their range (a finished statement), or not.

A speaker who has finished a statement lets the pitch fall to the bottom of their range on
its last words; one pausing mid-sentence ("I ordered a sofa | and it came broken", "I'd
like to know | how long a refund takes") holds it level, or lets it rise. That fall is the
most studied of the cues listeners take a turn on (Gravano & Hirschberg 2011, "Turn-taking
cues in task-oriented dialogue"), and the one a transcript cannot carry: Whisper writes a
full stop after a fragment as readily as after a sentence.

``read_intonation`` tracks the pitch of the turn so far (a normalised autocorrelation over
40 ms windows every 10 ms, 60-400 Hz, the same method as Praat's default tracker but in a
few lines of numpy: Praat's Python binding is GPL, and librosa would bring numba for one
function) and says how far below the speaker's own median the last voiced frames are, in
semitones. The pause's reading (``bot.pipeline.pause_reading``) shortens the long waits of
a turn that would only end in a question or "not sure" when that voice fell.

A rising end (a yes/no question) is not read: a continuation rise before a pause is as
common in callers, and the difference needs more than a pitch track.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Pitch range tracked (Hz): low male voices to high female ones, on a phone line.
F0_MIN_HZ = 60.0
F0_MAX_HZ = 400.0
_HOP_S = 0.010
_WINDOW_S = 0.040
#: A frame is voiced where its autocorrelation peak is at least this (0-1) ...
_VOICING = 0.45
#: ... and it is no quieter than this below the loudest frame (dB).
_FLOOR_DB = 35.0
#: The end is the median of this many last voiced frames.
_END_FRAMES = 5
#: Fewer voiced frames than this: too little voice to say anything about its range.
_MIN_VOICED = 20
#: Frames further than this from the speaker's median (semitones) are dropped.
_MAX_OFF_ST = 9.0
#: Only the last seconds of a long turn are tracked: the range is the speaker's range
#: over the words before the pause, and the cost stays flat.
_MAX_S = 4.0


@dataclass(frozen=True, slots=True)
class Intonation:
    """The pitch at the end of the voice against the speaker's median, in semitones."""

    #: Median of the last voiced frames against the median of all voiced frames (< 0: ended
    #: below the middle of the range).
    end_st: float

    def fell(self, semitones: float) -> bool:
        """The voice ended at least ``semitones`` below its median."""
        return self.end_st <= -semitones


def pitch_track(samples: np.ndarray, rate: int) -> np.ndarray:
    """F0 per 10 ms frame in Hz (0: unvoiced) of float ``samples`` at ``rate``."""
    hop, win = int(rate * _HOP_S), int(rate * _WINDOW_S)
    if len(samples) < win:
        return np.zeros(0)
    frames = np.lib.stride_tricks.sliding_window_view(samples, win)[::hop]
    frames = frames - frames.mean(axis=1, keepdims=True)
    energy = np.einsum("ij,ij->i", frames, frames)
    loud_db = 10 * np.log10(energy + 1e-12)
    lo, hi = int(rate / F0_MAX_HZ), min(int(rate / F0_MIN_HZ), win - 1)
    # Autocorrelation of every frame at once (zero-padded FFT), normalised by the energy
    # of the overlapping parts so that a lag's score does not fall with its length.
    n = 1 << (2 * win - 1).bit_length()
    spec = np.fft.rfft(frames, n, axis=1)
    ac = np.fft.irfft(spec * np.conj(spec), n, axis=1)[:, : hi + 1]
    sq = np.cumsum(frames**2, axis=1)
    lags = np.arange(lo, hi + 1)
    head = sq[:, win - 1 - lags]  # energy of frame[:win-lag]
    tail = sq[:, -1:] - sq[:, lags - 1]  # energy of frame[lag:]
    score = ac[:, lo : hi + 1] / np.sqrt(head * tail + 1e-12)
    best = np.argmax(score, axis=1)
    peak = score[np.arange(len(score)), best]
    # A peak at twice the period scores as high as the period itself: take the shortest
    # lag that scores nearly as well (no octave drops).
    peaks = np.zeros_like(score, dtype=bool)
    peaks[:, 1:-1] = (score[:, 1:-1] >= score[:, :-2]) & (score[:, 1:-1] >= score[:, 2:])
    near = peaks & (score >= 0.9 * peak[:, None])
    near[np.arange(len(score)), best] = True
    first = np.argmax(near, axis=1)
    # The peak's lag between samples (a parabola through it and its neighbours): at 8 kHz
    # a whole sample is half a semitone at 200 Hz.
    rows = np.arange(len(score))
    left = score[rows, np.maximum(first - 1, 0)]
    mid = score[rows, first]
    right = score[rows, np.minimum(first + 1, len(lags) - 1)]
    bend = left - 2 * mid + right
    shift = np.where(bend < 0, 0.5 * (left - right) / np.where(bend < 0, bend, -1.0), 0.0)
    f0 = rate / (lags[first] + np.clip(shift, -0.5, 0.5))
    voiced = (peak >= _VOICING) & (loud_db >= loud_db.max() - _FLOOR_DB)
    return np.where(voiced, f0, 0.0)


def read_intonation(pcm: bytes, rate: int) -> Intonation | None:
    """How the voice in 16-bit mono ``pcm`` ends; None: too little voice to tell."""
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    samples = samples[-int(rate * _MAX_S) :]
    f0 = pitch_track(samples, rate)
    voiced = f0[f0 > 0]
    if len(voiced) < _MIN_VOICED:
        return None
    # A 3-frame median first: a lone octave jump is not the end of a contour.
    padded = np.concatenate([voiced[:1], voiced, voiced[-1:]])
    smooth = np.median(np.stack([padded[:-2], padded[1:-1], padded[2:]]), axis=0)
    semis = 12 * np.log2(smooth / np.median(smooth))
    # Frames an octave or so off the speaker's middle are the tracker's errors (a
    # fricative's noise, a creak), not the contour: a voice's range is narrower.
    semis = semis[np.abs(semis) <= _MAX_OFF_ST]
    if len(semis) < _MIN_VOICED:
        return None
    return Intonation(end_st=float(np.median(semis[-_END_FRAMES:])))
