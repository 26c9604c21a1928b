"""``RemoteCall``: a call held by a worker process, seen from the ``SipServer`` parent.

It offers what ``bot/`` uses of ``telephony.CallHandle``; every action becomes an IPC message
to the worker and every inbound frame arrives as one. Playout is accounted for here from
the counters the worker piggybacks on each inbound frame (see ``telephony.ipc.AudioFrame``):

    queued_frames = frames queued in the worker at its last report
                    + frames sent since then that the worker had not yet applied

and, after ``clear_playout()`` until the worker reports having applied it, only what was
sent after the clear. A trailing partial frame counts as one, as in ``CallHandle``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Protocol

from telephony.events import (
    TRANSFER_TIMEOUT_S,
    AudioIn,
    CallEnded,
    DtmfIn,
    InboundEvent,
    TransferResult,
)
from telephony.ipc import AudioFrame

MAX_QUEUED_EVENTS = 3000  # 60 s of audio not consumed; older frames are dropped beyond that
#: Beyond the transfer's own timeout (applied in the worker), how long to wait for its reply.
TRANSFER_REPLY_GRACE_S = 5.0
#: The same for a bridged transfer, whose summary plays after the agent answered.
BRIDGE_REPLY_S = 35.0


class CallLink(Protocol):
    """Where a ``RemoteCall`` sends its commands (the worker's IPC link)."""

    def send_audio(self, key: int, pcm: bytes) -> None: ...

    def clear_playout(self, key: int) -> None: ...

    def hangup(self, key: int) -> None: ...

    def transfer(self, key: int, target: str, timeout_s: float) -> None: ...

    def bridge(self, key: int, target: str, timeout_s: float, summary: bytes) -> None: ...


class RemoteCall:
    """A live call in a worker process: PCM frames and DTMF in, PCM out, over IPC."""

    def __init__(
        self,
        *,
        key: int,
        link: CallLink,
        call_id: str,
        remote_uri: str,
        local_uri: str,
        codec: str,
        sample_rate: int,
        answered_at: float,
        frame_bytes: int,
        worker_pid: int = 0,
    ) -> None:
        self.key = key
        self.call_id = call_id
        self.remote_uri = remote_uri
        self.local_uri = local_uri
        self.codec = codec
        self.sample_rate = sample_rate
        self.answered_at = answered_at  # time.monotonic() of this process
        self.worker_pid = worker_pid
        self._link = link
        self._frame_bytes = frame_bytes
        self._events: asyncio.Queue[InboundEvent] = asyncio.Queue()
        self._ended = False
        self._hangup_sent = False
        self._transfer: asyncio.Future[TransferResult] | None = None
        self._changed = asyncio.Event()  # set on every playout report, clear and end
        self.dropped = 0  # inbound frames dropped because nobody consumed them
        # parent-side accounting
        self._bytes_sent = 0
        self._clears_sent = 0
        self._clear_mark = 0  # _bytes_sent when the last clear was sent
        # the worker's last report
        self._w_queued = 0
        self._w_played = 0
        self._w_clears = 0
        self._w_applied = 0

    def __repr__(self) -> str:
        return f"RemoteCall({self.call_id!r}, {self.remote_uri!r}, pid={self.worker_pid})"

    @property
    def ended(self) -> bool:
        """True once ``CallEnded`` has been produced."""
        return self._ended

    @property
    def frames_played(self) -> int:
        """Voiced frames the worker has handed to pjsip (as of its last report)."""
        return self._w_played

    @property
    def frame_bytes(self) -> int:
        """Bytes in one 20 ms frame."""
        return self._frame_bytes

    @property
    def queued_frames(self) -> int:
        """Frames still to be played, from this process's accounting; 0 once ended."""
        if self._ended:
            return 0
        fb = self._frame_bytes
        if self._w_clears < self._clears_sent:  # the worker has not applied the clear yet
            return -(-(self._bytes_sent - self._clear_mark) // fb)
        return self._w_queued + -(-(self._bytes_sent - self._w_applied) // fb)

    async def receive(self) -> AsyncIterator[InboundEvent]:
        """Yield ``AudioIn`` / ``DtmfIn`` in arrival order, then ``CallEnded`` and stop."""
        while True:
            event = await self._events.get()
            yield event
            if isinstance(event, CallEnded):
                return

    def send(self, pcm: bytes) -> None:
        """Queue PCM16 mono audio for the caller; non-blocking, any length."""
        if self._ended or not pcm:
            return
        self._bytes_sent += len(pcm)
        self._link.send_audio(self.key, pcm)

    def clear_playout(self) -> int:
        """Drop all queued audio (barge-in); returns the frames this process believes dropped.

        The worker applies it as soon as it reads the message (well within one 20 ms tick).
        """
        if self._ended:
            return 0
        dropped = self.queued_frames
        self._clears_sent += 1
        self._clear_mark = self._bytes_sent
        self._link.clear_playout(self.key)
        self._changed.set()
        return dropped

    async def wait_playout_drained(self) -> None:
        """Return once everything queued so far has been played (or the call ended)."""
        while self.queued_frames and not self._ended:
            self._changed.clear()
            await self._changed.wait()

    async def hangup(self) -> None:
        """Ask the worker to send BYE (or a final response); idempotent."""
        if not self._ended and not self._hangup_sent:
            self._hangup_sent = True
            self._link.hangup(self.key)

    async def transfer(
        self, target: str, *, timeout_s: float = TRANSFER_TIMEOUT_S
    ) -> TransferResult:
        """Blind transfer: the worker sends the caller a REFER to ``target``; returns its
        outcome (``CallHandle.transfer``). The call stays up either way."""
        if self._ended:
            return TransferResult(False, 0, "call ended")
        if self._transfer is not None and not self._transfer.done():
            return TransferResult(False, 0, "a transfer is already under way")
        done: asyncio.Future[TransferResult] = asyncio.get_running_loop().create_future()
        self._transfer = done
        self._link.transfer(self.key, target, timeout_s)
        return await self._outcome(done, timeout_s + TRANSFER_REPLY_GRACE_S)

    async def bridge(
        self, target: str, *, timeout_s: float = TRANSFER_TIMEOUT_S, summary: bytes = b""
    ) -> TransferResult:
        """Bridged transfer: the worker calls ``target`` and joins it to this call
        (``CallHandle.bridge``); returns its outcome. Once joined, no more caller audio
        comes here."""
        if self._ended:
            return TransferResult(False, 0, "call ended")
        if self._transfer is not None and not self._transfer.done():
            return TransferResult(False, 0, "a transfer is already under way")
        done: asyncio.Future[TransferResult] = asyncio.get_running_loop().create_future()
        self._transfer = done
        self._link.bridge(self.key, target, timeout_s, summary)
        # The agent's answer, then up to 20 s of summary: BRIDGE_REPLY_S beyond the timeout.
        return await self._outcome(done, timeout_s + BRIDGE_REPLY_S)

    @staticmethod
    async def _outcome(done: asyncio.Future[TransferResult], wait_s: float) -> TransferResult:
        try:
            return await asyncio.wait_for(done, wait_s)
        except TimeoutError:
            return TransferResult(False, 408, "no transfer status from the worker")

    # fed by the node's IPC reader -------------------------------------------------------
    def on_audio(self, frame: AudioFrame, at: float) -> None:
        """An inbound frame, read at ``at``, with the worker's playout counters."""
        if self._ended:
            return
        self._w_queued, self._w_played = frame.queued, frame.played
        self._w_clears, self._w_applied = frame.clears, frame.applied
        self._changed.set()
        if self._events.qsize() >= MAX_QUEUED_EVENTS:
            self._events.get_nowait()
            self.dropped += 1
        self._events.put_nowait(AudioIn(frame.pcm, at))

    def on_dtmf(self, digit: str, duration_ms: int, at: float) -> None:
        if not self._ended:
            self._events.put_nowait(DtmfIn(digit, duration_ms, at))

    def on_transfer_status(self, ok: bool, status: int, reason: str) -> None:
        """The worker's ``TransferStatus`` for this call's transfer."""
        done = self._transfer
        if done is not None and not done.done():
            done.set_result(TransferResult(ok, status, reason))

    def on_ended(self, reason: str, by_remote: bool, played: int | None = None) -> None:
        if self._ended:
            return
        if played is not None:
            self._w_played = played
        self._ended = True
        self.on_transfer_status(False, 0, "call ended")
        self._changed.set()
        self._events.put_nowait(CallEnded(reason, by_remote, time.monotonic()))
