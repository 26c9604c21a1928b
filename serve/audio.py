"""PCM helpers: 16-bit signed little-endian mono bytes <-> float32 arrays, resampling."""

from __future__ import annotations

from collections.abc import Generator, Iterator

import numpy as np
import numpy.typing as npt
import soxr

Float32Array = npt.NDArray[np.float32]


def check_pcm(pcm: bytes, sample_rate: int) -> None:
    """Raise ValueError unless ``pcm`` is whole 16-bit samples at a positive rate."""
    if sample_rate <= 0:
        raise ValueError(f"sample_rate must be positive, got {sample_rate}")
    if len(pcm) % 2:
        raise ValueError(f"16-bit PCM has an even number of bytes, got {len(pcm)}")


def pcm16_to_float(pcm: bytes) -> Float32Array:
    """16-bit PCM bytes to float32 samples in [-1, 1)."""
    return np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0


def float_to_pcm16(samples: npt.NDArray[np.floating]) -> bytes:
    """Float samples (clipped to [-1, 1]) to 16-bit PCM bytes."""
    scaled = np.clip(samples, -1.0, 1.0) * 32767.0
    pcm: bytes = np.round(scaled).astype("<i2").tobytes()
    return pcm


def resample(samples: Float32Array, in_rate: int, out_rate: int) -> Float32Array:
    """Resample a whole float32 signal with soxr (no-op when the rates match)."""
    if in_rate == out_rate:
        return samples
    out: Float32Array = soxr.resample(samples, in_rate, out_rate).astype(np.float32, copy=False)
    return out


#: A sample louder than this (about -44 dBFS) is sound; synthesizers lead in with 40-60 ms
#: under it.
LEAD_SILENCE_PEAK = 200


def trim_trailing_silence(pcm: bytes, sample_rate: int, *, keep_ms: int = 10) -> bytes:
    """16-bit PCM ``pcm`` without the silence it ends with, but ``keep_ms`` of it after the
    last sound (a synthesizer's audio ends with 120-260 ms under ``LEAD_SILENCE_PEAK``).
    All-silent input gives nothing."""
    samples = np.frombuffer(pcm, dtype="<i2")
    loud = _loud(samples)
    if not loud.size:
        return b""
    end = min(len(samples), int(loud[-1]) + 1 + sample_rate * keep_ms // 1000)
    return samples[:end].tobytes()


def trim_leading_silence(
    chunks: Iterator[bytes], sample_rate: int, *, keep_ms: int = 10
) -> Generator[bytes, None, None]:
    """Pass 16-bit PCM ``chunks`` on without the silence they start with, but ``keep_ms``
    of it before the first sound: on a call, leading silence is time the caller waits for
    the first word. Closes ``chunks`` when closed itself. All-silent input yields nothing."""
    keep = sample_rate * keep_ms // 1000
    held = np.zeros(0, dtype="<i2")
    try:
        for chunk in chunks:
            samples = np.concatenate([held, np.frombuffer(chunk, dtype="<i2")])
            loud = _loud(samples)
            if not loud.size:
                held = samples[-keep:] if keep else samples[:0]
                continue
            yield samples[max(0, int(loud[0]) - keep) :].tobytes()
            yield from chunks
            return
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


def _loud(samples: npt.NDArray[np.int16]) -> npt.NDArray[np.intp]:
    """The indexes of the samples louder than ``LEAD_SILENCE_PEAK``."""
    return np.flatnonzero(np.abs(samples.astype(np.int32)) > LEAD_SILENCE_PEAK)
