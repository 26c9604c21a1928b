"""Records a call as one stereo WAV file: the caller on the left, the bot on the right.

``RecordedCall`` wraps the call the session talks to: every 20 ms frame the caller sends
is written with the 20 ms of the bot's audio that played out at that moment (what the bot
queued, frame by frame, as the call's playout does; a barge-in's flush drops it here too),
so the two sides stay in step for the whole call.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
import wave
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from bot.pipeline.call_port import CallPort
from bot.recording.files import partial_path
from telephony.events import AudioIn, InboundEvent, TransferResult

log = logging.getLogger(__name__)


def recording_path(folder: Path, call_id: str, now: datetime | None = None) -> Path:
    """``<folder>/<YYYY-MM-DD>/<call id, safe characters>-<random>.wav``."""
    now = now or datetime.now(UTC)
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", call_id)[:64].strip(".") or "call"
    return folder / f"{now:%Y-%m-%d}" / f"{safe}-{uuid.uuid4().hex[:8]}.wav"


class CallRecorder:
    """A WAV file being written: 16-bit stereo at the call's rate.

    It is written as ``<path>.part`` and renamed to ``path`` by ``close``: a file at
    ``path`` is complete.
    """

    def __init__(self, path: Path, sample_rate: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._part = partial_path(path)
        self._wav = wave.open(str(self._part), "wb")  # noqa: SIM115 - closed by close()
        self._wav.setnchannels(2)
        self._wav.setsampwidth(2)
        self._wav.setframerate(sample_rate)
        self._bot = bytearray()
        self.frames = 0

    def bot(self, pcm: bytes) -> None:
        """The bot queued ``pcm`` for the caller."""
        self._bot += pcm

    def flush_bot(self) -> None:
        """The bot's queued audio was dropped (barge-in): it is never heard."""
        self._bot.clear()

    def caller(self, pcm: bytes) -> None:
        """One frame from the caller, written beside the bot's frame of the same moment."""
        n = len(pcm) - len(pcm) % 2
        heard = bytes(self._bot[:n]).ljust(n, b"\0")
        del self._bot[:n]
        stereo = np.empty(n, dtype="<i2")
        stereo[0::2] = np.frombuffer(pcm[:n], dtype="<i2")
        stereo[1::2] = np.frombuffer(heard, dtype="<i2")
        self._wav.writeframesraw(stereo.tobytes())
        self.frames += n // 2

    def close(self) -> None:
        self._wav.close()
        try:
            os.replace(self._part, self.path)
        except OSError as exc:  # the file stays, under its .part name
            log.error("recording %s: cannot finish: %s", self.path, exc)
        log.info("recording closed: %d s", self.frames // max(1, self._wav.getframerate()))


class RecordedCall:
    """A ``CallPort`` that records what passes through it; the rest goes to ``call``."""

    def __init__(self, call: CallPort, recorder: CallRecorder) -> None:
        self._call = call
        self.recorder = recorder
        self.call_id = call.call_id
        self.sample_rate = call.sample_rate
        self.remote_uri = call.remote_uri
        self.local_uri = call.local_uri
        self.answered_at = call.answered_at

    @property
    def queued_frames(self) -> int:
        return self._call.queued_frames

    async def receive(self) -> AsyncIterator[InboundEvent]:
        async for event in self._call.receive():
            if isinstance(event, AudioIn):
                self.recorder.caller(event.pcm)
            yield event

    def send(self, pcm: bytes) -> None:
        self.recorder.bot(pcm)
        self._call.send(pcm)

    def clear_playout(self) -> int:
        self.recorder.flush_bot()
        return self._call.clear_playout()

    async def wait_playout_drained(self) -> None:
        await self._call.wait_playout_drained()

    async def hangup(self) -> None:
        await self._call.hangup()

    async def transfer(self, target: str, *, timeout_s: float = 30.0) -> TransferResult:
        return await self._call.transfer(target, timeout_s=timeout_s)

    async def bridge(
        self, target: str, *, timeout_s: float = 30.0, summary: bytes = b""
    ) -> TransferResult:
        # What the caller and the agent say to each other once joined is not recorded: the
        # recording holds the bot's part of the call.
        return await self._call.bridge(target, timeout_s=timeout_s, summary=summary)
