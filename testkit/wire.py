"""Finding speech in call recordings, and the latencies a caller experiences."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FRAME_MS = 20


def voiced_frames(
    samples: npt.NDArray[np.int16], rate: int = 8000, threshold_dbfs: float = -45.0
) -> npt.NDArray[np.bool_]:
    """One flag per 20 ms frame: is its level above ``threshold_dbfs``?"""
    n = rate * FRAME_MS // 1000
    usable = len(samples) // n * n
    frames = samples[:usable].reshape(-1, n).astype(np.float64) / 32768.0
    rms = np.sqrt((frames**2).mean(axis=1)) + 1e-12
    return np.asarray(20 * np.log10(rms) > threshold_dbfs)


def is_voiced(samples: npt.NDArray[np.int16], threshold_dbfs: float = -45.0) -> bool:
    """Is this stretch of audio (one RTP packet, say) above ``threshold_dbfs`` RMS?

    The same measure as ``voiced_frames``, over the whole stretch at once.
    """
    if len(samples) == 0:
        return False
    x = samples.astype(np.float64) / 32768.0
    return bool(20 * np.log10(np.sqrt((x**2).mean()) + 1e-12) > threshold_dbfs)


def segments(voiced: npt.NDArray[np.bool_], max_gap_ms: int = 400) -> list[tuple[int, int]]:
    """Runs of voiced frames as (first, last) frame indexes, bridging short gaps."""
    out: list[tuple[int, int]] = []
    gap = max_gap_ms // FRAME_MS
    for i in np.flatnonzero(voiced):
        idx = int(i)
        if out and idx - out[-1][1] <= gap:
            out[-1] = (out[-1][0], idx)
        else:
            out.append((idx, idx))
    return out


@dataclass(frozen=True)
class TurnLatency:
    """One caller turn as heard on the caller's side of the call."""

    caller_end_ms: float
    bot_start_ms: float | None
    overlapped: bool

    @property
    def voice_to_voice_ms(self) -> float | None:
        """Caller's last voiced frame to the bot's first voiced frame after it."""
        if self.bot_start_ms is None or self.overlapped:
            return None
        return self.bot_start_ms - self.caller_end_ms


def greeting_delay_ms(received: npt.NDArray[np.int16], rate: int = 8000) -> float | None:
    """Time from the start of the recording (the answer) to the bot's first voiced frame."""
    voiced = np.flatnonzero(voiced_frames(received, rate))
    return float(voiced[0] * FRAME_MS) if len(voiced) else None


def turn_latencies(
    sent: npt.NDArray[np.int16],
    received: npt.NDArray[np.int16],
    rate: int = 8000,
    caller_gap_ms: int = 600,
) -> list[TurnLatency]:
    """For each caller utterance in ``sent``, when the bot started answering in ``received``.

    Both recordings must share one timeline (sample i of each is the same instant). A turn
    where the bot was already talking when the caller stopped is marked ``overlapped``.
    """
    heard = voiced_frames(received, rate)
    out: list[TurnLatency] = []
    for _, end in segments(voiced_frames(sent, rate), caller_gap_ms):
        overlapped = bool(heard[end]) if end < len(heard) else False
        after = np.flatnonzero(heard[end + 1 :])
        start = float((end + 1 + after[0]) * FRAME_MS) if len(after) else None
        out.append(
            TurnLatency(
                caller_end_ms=float((end + 1) * FRAME_MS),
                bot_start_ms=start,
                overlapped=overlapped,
            )
        )
    return out


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) of ``values``."""
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))
