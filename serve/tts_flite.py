"""Flite TTS (the Debian ``flite`` binary): light, robotic, 10 ms a clause; a fallback voice.

Its output is the same, byte for byte, for the same voice, text and binary, so it is kept in
the speech cache (``cache_key``) as Piper's is."""

from __future__ import annotations

import io
import os
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
        self._cache_key: str | None = None

    @property
    def description(self) -> str:
        return f"flite {self.voice}"

    @property
    def cache_key(self) -> str | None:
        """The voice (a built-in name, or a .flitevox file's path, size and modification
        time), the binary's path, size and modification time and its version: flite says the
        same text the same way, byte for byte, with these unchanged. Read once at load; None
        before, or when the version cannot be read."""
        return self._cache_key

    def _load(self) -> None:
        self._path = shutil.which(self.binary)
        if self._path is None:
            raise ProviderUnavailable(f"{self.binary!r} is not on PATH (Debian package flite)")
        self._cache_key = self._voice_key(self._path)

    def _voice_key(self, path: str) -> str | None:
        try:
            # ``flite --version`` exits with 1 after printing it.
            run = subprocess.run(
                [path, "--version"], capture_output=True, text=True, timeout=5, check=False
            )
            binary = os.stat(path)
            voice = os.stat(self.voice) if os.path.isfile(self.voice) else None
        except (OSError, subprocess.SubprocessError):
            return None
        found = next((ln.strip() for ln in run.stdout.splitlines() if "version" in ln), None)
        if found is None or "://" in self.voice:  # a voice read from a URL may change
            return None
        # The built-in voices live in libflite, which Debian ships in step with the binary
        # (flite depends on libflite1 of its own version): a new library is a new binary.
        parts = [self.description, f"{path}:{binary.st_size}:{binary.st_mtime_ns}", found]
        if voice is not None:
            parts.append(f"{os.path.abspath(self.voice)}:{voice.st_size}:{voice.st_mtime_ns}")
        return "|".join(parts)

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
