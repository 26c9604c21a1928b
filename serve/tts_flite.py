"""Flite TTS (the Debian ``flite`` binary): light, robotic, 10 ms a clause; a fallback voice."""

from __future__ import annotations

import io
import shutil
import subprocess
import wave
from collections.abc import Iterator

from serve.audio import float_to_pcm16, pcm16_to_float, resample
from serve.errors import ProviderError, ProviderUnavailable
from serve.tts import TTS


class FliteTTS(TTS):
    """Runs ``flite`` once per text; ``voice`` is a built-in name (kal: 8 kHz) or a .flitevox."""

    name = "flite"

    def __init__(
        self,
        *,
        voice: str = "kal",
        binary: str = "flite",
        timeout_s: float = 5.0,
        retries: int = 1,
        name: str | None = None,
    ) -> None:
        super().__init__(timeout_s=timeout_s, retries=retries, name=name)
        self.voice = voice
        self.binary = binary
        self._path: str | None = None

    @property
    def description(self) -> str:
        return f"flite {self.voice}"

    def _load(self) -> None:
        self._path = shutil.which(self.binary)
        if self._path is None:
            raise ProviderUnavailable(f"{self.binary!r} is not on PATH (Debian package flite)")

    def _synthesize_impl(self, text: str, sample_rate: int) -> Iterator[bytes]:
        if not text.strip():
            return
        assert self._path is not None
        run = subprocess.run(
            [self._path, "-voice", self.voice, "-t", text, "-o", "/dev/stdout"],
            capture_output=True,
            timeout=self.timeout_s,
            check=False,
        )
        if run.returncode != 0:
            message = run.stderr.decode(errors="replace").strip()
            raise ProviderError(f"flite exited with {run.returncode}: {message}")
        with wave.open(io.BytesIO(run.stdout)) as wav:
            rate = wav.getframerate()
            pcm = wav.readframes(wav.getnframes())
        if rate == sample_rate:
            yield pcm
        else:
            yield float_to_pcm16(resample(pcm16_to_float(pcm), rate, sample_rate))
