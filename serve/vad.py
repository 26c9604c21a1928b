"""Voice activity detection: the VAD interface and its per-call stream state."""

from __future__ import annotations

import abc

import numpy as np

from serve.base import Provider


class VadStream(abc.ABC):
    """The VAD state of one call; called inline on the event loop, so each push is cheap."""

    @abc.abstractmethod
    def push(self, frame: bytes) -> float:
        """Take one 20 ms frame of 16-bit PCM; return the speech probability of the latest audio."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Forget all audio pushed so far."""

    def close(self) -> None:
        """The call is over: give back what the stream holds (a pooled model) now, rather
        than when the stream is garbage-collected. Idempotent; the stream is not pushed to
        again."""
        return  # a stream that holds nothing shared has nothing to give back


class VAD(Provider):
    """Makes a ``VadStream`` per call; the model is shared, the state is not."""

    name = "vad"
    sample_rates: tuple[int, ...] = (8000, 16000)

    def __init__(self, *, timeout_s: float = 1.0, retries: int = 0, name: str | None = None):
        super().__init__(timeout_s=timeout_s, retries=retries, name=name)

    def create_stream(self, sample_rate: int) -> VadStream:
        """A fresh stream for audio at ``sample_rate``."""
        self._check_loaded()
        if sample_rate not in self.sample_rates:
            raise ValueError(
                f"{self.name} supports sample rates {self.sample_rates}, got {sample_rate}"
            )
        return self._create_stream_impl(sample_rate)

    async def warmup(self) -> None:
        """Push half a second of faint noise through a stream at each supported rate."""
        rng = np.random.default_rng(0)
        for rate in self.sample_rates:
            stream = self.create_stream(rate)
            frame_samples = rate // 50
            for _ in range(25):
                stream.push(rng.normal(0.0, 30.0, frame_samples).astype("<i2").tobytes())

    @abc.abstractmethod
    def _create_stream_impl(self, sample_rate: int) -> VadStream:
        """A new stream at a supported ``sample_rate``."""
