"""Pre-synthesized speech kept on disk, so that a node that starts again with the same voice
and the same phrases reads their audio instead of synthesizing it.

Only a synthesizer whose ``cache_key`` is not None is cached: one whose output is the same
for the same voice, text and sample rate (Piper, flite; the key is read once at load).
Remote or non-deterministic ones (the Ray tier's client, Coqui) say None and are always
asked.

One file per phrase, ``<sha256>.pcm``: a short header (magic, audio length, the audio's
sha256) and the 16-bit PCM. A file that cannot be read, is short or does not match its
digest is ignored (the phrase is synthesized again and rewritten). Files are written
atomically; after a write the folder is pruned to ``max_files``, least recently used first.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import struct
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from serve import TTS

log = logging.getLogger(__name__)

#: Part of every key: bump it when the audio the synthesizers' wrappers produce changes
#: (``serve.audio``'s trimming or resampling) so that older files are no longer used.
FORMAT_VERSION = 1
_MAGIC = b"SBPCM1\0\0"
_HEADER = struct.Struct("<8sQ32s")  # magic, audio length, sha256 of the audio
SUFFIX = ".pcm"


class SpeechCacheSettings(BaseModel):
    """The folder of pre-synthesized speech: ``SWITCHBOARD_SPEECH_CACHE__<FIELD>``."""

    model_config = ConfigDict(extra="forbid")

    #: False: every phrase is synthesized at each start.
    enabled: bool = True
    #: Default: ``<data_dir>/speech-cache``. An empty value turns the cache off.
    dir: Path | None = None
    #: Most files kept; the least recently used beyond it are deleted after a write.
    max_files: int = Field(4096, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _empty_dir_is_off(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("dir") == "":
            return {**data, "dir": None, "enabled": False}
        return data

    def folder(self, data_dir: Path) -> Path | None:
        """Where the files go, or None when the cache is off."""
        if not self.enabled:
            return None
        return self.dir or data_dir / "speech-cache"


def speech_key(voice: str, text: str, sample_rate: int) -> str:
    """The file name (without suffix) of ``text`` spoken by ``voice`` at ``sample_rate``."""
    raw = "\0".join((str(FORMAT_VERSION), voice, str(sample_rate), text)).encode()
    return hashlib.sha256(raw).hexdigest()


class SpeechCache:
    """A folder of synthesized phrases, keyed by voice, text and sample rate."""

    def __init__(self, folder: Path, *, max_files: int = 4096) -> None:
        self.folder = folder
        self.max_files = max_files
        #: Phrases read from disk and written to it by this process (tests and logs).
        self.hits = 0
        self.writes = 0

    @classmethod
    def from_settings(cls, settings: SpeechCacheSettings, data_dir: Path) -> SpeechCache | None:
        folder = settings.folder(data_dir)
        return None if folder is None else cls(folder, max_files=settings.max_files)

    def path(self, key: str) -> Path:
        return self.folder / f"{key}{SUFFIX}"

    def read(self, key: str) -> bytes | None:
        """The audio stored under ``key``, or None if there is none or it is damaged."""
        path = self.path(key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("speech cache: cannot read %s: %s", path.name, exc)
            return None
        if len(raw) < _HEADER.size:
            log.warning("speech cache: %s is short (%d bytes); synthesizing", path.name, len(raw))
            return None
        magic, length, digest = _HEADER.unpack_from(raw)
        audio = raw[_HEADER.size :]
        if magic != _MAGIC or length != len(audio) or hashlib.sha256(audio).digest() != digest:
            log.warning("speech cache: %s is damaged; synthesizing", path.name)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: pruned last
        return audio

    def write(self, key: str, audio: bytes) -> None:
        """Store ``audio`` under ``key`` (atomically), then prune the folder."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=f".{key[:16]}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(_HEADER.pack(_MAGIC, len(audio), hashlib.sha256(audio).digest()))
                    f.write(audio)
                os.replace(tmp, self.path(key))
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            log.warning("speech cache: cannot write to %s: %s", self.folder, exc)
            return
        self.writes += 1
        self.prune()

    def prune(self) -> None:
        """Delete the least recently used files beyond ``max_files``."""
        try:
            entries = [e for e in os.scandir(self.folder) if e.name.endswith(SUFFIX)]
        except OSError as exc:
            log.warning("speech cache: cannot list %s: %s", self.folder, exc)
            return
        if len(entries) <= self.max_files:
            return
        aged: list[tuple[float, str]] = []
        for entry in entries:
            with contextlib.suppress(OSError):
                aged.append((entry.stat().st_mtime, entry.path))
        aged.sort()
        for _, path in aged[: len(aged) - self.max_files]:
            with contextlib.suppress(OSError):
                os.unlink(path)

    async def speech(
        self, tts: TTS, text: str, sample_rate: int, make: Callable[[], Awaitable[bytes]]
    ) -> tuple[bytes, bool]:
        """The audio of ``text``: from disk when ``tts`` is cacheable and it is there (True),
        else from ``make()`` (False), stored for the next start."""
        voice = tts.cache_key
        if voice is None:
            return await make(), False
        key = speech_key(voice, text, sample_rate)
        audio = await asyncio.to_thread(self.read, key)
        if audio is not None:
            self.hits += 1
            return audio, True
        audio = await make()
        await asyncio.to_thread(self.write, key, audio)
        return audio, False


async def pre_synthesized(
    cache: SpeechCache | None,
    tts: TTS,
    text: str,
    sample_rate: int,
    make: Callable[[], Awaitable[bytes]],
) -> tuple[bytes, bool]:
    """``cache.speech(...)``, or ``make()`` when there is no cache; True: read from disk."""
    if cache is None:
        return await make(), False
    return await cache.speech(tts, text, sample_rate, make)
