"""WebRTC VAD (webrtcvad-wheels): a 2 us/frame speech gate that answers 0.0 or 1.0."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from serve.errors import ProviderUnavailable
from serve.vad import VAD, VadStream


class WebRtcVAD(VAD):
    """The WebRTC GMM VAD; ``aggressiveness`` 0 (lenient) to 3 (strict)."""

    name = "webrtc"
    sample_rates = (8000, 16000, 32000, 48000)

    def __init__(self, *, aggressiveness: int = 2, name: str | None = None) -> None:
        if aggressiveness not in (0, 1, 2, 3):
            raise ValueError(f"aggressiveness is 0..3, got {aggressiveness}")
        super().__init__(name=name)
        self.aggressiveness = aggressiveness
        self._module: Any = None

    def _load(self) -> None:
        try:
            import webrtcvad  # noqa: PLC0415 - optional library
        except ImportError as exc:
            raise ProviderUnavailable("webrtcvad-wheels is not installed") from exc
        self._module = webrtcvad

    def _create_stream_impl(self, sample_rate: int) -> VadStream:
        module, mode = self._module, self.aggressiveness
        return _WebRtcStream(lambda: module.Vad(mode), sample_rate)


class _WebRtcStream(VadStream):
    """Cuts pushed audio into the 20 ms frames the library accepts."""

    def __init__(self, make_vad: Callable[[], Any], sample_rate: int) -> None:
        self._make_vad = make_vad
        self._vad = make_vad()
        self._rate = sample_rate
        self._frame_bytes = sample_rate // 50 * 2
        self._pending = b""
        self._prob = 0.0

    def push(self, frame: bytes) -> float:
        if not self._pending and len(frame) == self._frame_bytes:
            self._prob = 1.0 if self._vad.is_speech(frame, self._rate) else 0.0
            return self._prob
        data = self._pending + frame
        end = len(data) - len(data) % self._frame_bytes
        for start in range(0, end, self._frame_bytes):
            chunk = data[start : start + self._frame_bytes]
            self._prob = 1.0 if self._vad.is_speech(chunk, self._rate) else 0.0
        self._pending = data[end:]
        return self._prob

    def reset(self) -> None:
        self._vad = self._make_vad()  # the library has no reset; a new instance costs ~1 us
        self._pending = b""
        self._prob = 0.0
