"""Fixtures for end-to-end calls: a real bot process and a real transcriber to check it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
import pytest

from serve import WhisperASR
from testkit.botproc import BotProcess, run_bot


@pytest.fixture(scope="package")
def bot() -> Iterator[BotProcess]:
    """One bot node on the embedded defaults for the whole package."""
    with run_bot() as proc:
        yield proc


class Listener:
    """Transcribes what a caller heard, with the same packaged Whisper model."""

    def __init__(self) -> None:
        self._asr = WhisperASR()

    async def load(self) -> None:
        await self._asr.load()

    async def hear(self, samples: npt.NDArray[np.int16]) -> str:
        pcm = samples.astype("<i2").tobytes()
        return (await self._asr.transcribe(pcm, 8000)).text


@pytest.fixture(scope="package")
def listener() -> Listener:
    ear = Listener()
    asyncio.run(ear.load())
    return ear
