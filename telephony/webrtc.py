"""WebRTC calls (aiortc): telephony's second transport, beside SIP, as a call of the same
pipeline. The console's test call from the browser uses it.

The console (or any WebRTC client) posts an SDP offer; the node answers it and runs a
``CallSession`` on a ``WebRtcCall``, the same ``CallPort`` a SIP call is: the same models,
the same intent cache and the same call log. Audio is Opus on the wire; aiortc decodes it,
and it is resampled here to the pipeline's rate in 20 ms frames, and the bot's frames are
paced out at 20 ms. Needs the ``webrtc`` extra (aiortc).
"""

from __future__ import annotations

import asyncio
import contextlib
import fractions
import logging
import time
import uuid
from collections import Counter, deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from telephony.config import FRAME_MS
from telephony.events import AudioIn, CallEnded, InboundEvent, TransferResult

log = logging.getLogger(__name__)

#: A new browser call: the node runs its session (``Node._on_call``).
CallRunner = Callable[[Any], Awaitable[None]]
#: The node's calls in progress (phone and browser) and its call limit.
CallLimit = Callable[[], tuple[int, int]]


class CallRefused(Exception):
    """No browser call now: the caller holds their share, or the node is full."""

    def __init__(self, reason: str, *, node_full: bool) -> None:
        super().__init__(reason)
        self.node_full = node_full


class WebRtcCall:
    """One browser call as a ``CallPort``."""

    def __init__(self, pc: Any, *, sample_rate: int, caller: str) -> None:
        self.pc = pc
        self.call_id = f"webrtc-{uuid.uuid4()}"
        self.sample_rate = sample_rate
        self.remote_uri = caller
        self.local_uri = "webrtc:bot"
        self.answered_at = time.monotonic()
        self._frame_bytes = sample_rate * FRAME_MS // 1000 * 2
        self._events: asyncio.Queue[InboundEvent] = asyncio.Queue()
        self._out: deque[bytes] = deque()
        self._drained = asyncio.Event()
        self._drained.set()
        self._ended = False
        self._reader: asyncio.Task[None] | None = None

    # -- CallPort ---------------------------------------------------------------------

    @property
    def queued_frames(self) -> int:
        return len(self._out)

    async def receive(self) -> AsyncIterator[InboundEvent]:
        while True:
            event = await self._events.get()
            yield event
            if isinstance(event, CallEnded):
                return

    def send(self, pcm: bytes) -> None:
        n = self._frame_bytes
        for start in range(0, len(pcm), n):
            chunk = pcm[start : start + n]
            self._out.append(chunk.ljust(n, b"\0"))
        if self._out:
            self._drained.clear()

    def clear_playout(self) -> int:
        dropped = len(self._out)
        self._out.clear()
        self._drained.set()
        return dropped

    async def wait_playout_drained(self) -> None:
        await self._drained.wait()

    async def hangup(self) -> None:
        self.end("bot_hangup", by_remote=False)
        await self.pc.close()

    async def transfer(self, target: str, *, timeout_s: float = 30.0) -> TransferResult:
        return TransferResult(ok=False, status=501, reason="a browser call cannot be transferred")

    async def bridge(
        self, target: str, *, timeout_s: float = 30.0, summary: bytes = b""
    ) -> TransferResult:
        return TransferResult(ok=False, status=501, reason="a browser call cannot be transferred")

    # -- media ------------------------------------------------------------------------

    def next_frame(self) -> bytes:
        """The next 20 ms to send: the bot's audio, or silence."""
        if self._out:
            frame = self._out.popleft()
            if not self._out:
                self._drained.set()
            return frame
        return b"\0" * self._frame_bytes

    def end(self, reason: str, *, by_remote: bool) -> None:
        if not self._ended:
            self._ended = True
            self._drained.set()
            self._events.put_nowait(
                CallEnded(reason=reason, by_remote=by_remote, at=time.monotonic())
            )

    def read_from(self, track: Any) -> None:
        """Turn the browser's audio track into 20 ms ``AudioIn`` frames."""
        self._reader = asyncio.create_task(self._read(track), name=f"{self.call_id}-in")

    async def _read(self, track: Any) -> None:
        from aiortc.mediastreams import MediaStreamError  # noqa: PLC0415
        from av.audio.resampler import AudioResampler  # noqa: PLC0415

        resampler = AudioResampler(format="s16", layout="mono", rate=self.sample_rate)
        pending = b""
        n = self._frame_bytes
        try:
            while True:
                frame = await track.recv()
                for out in resampler.resample(frame):
                    pending += bytes(out.planes[0])[: out.samples * 2]
                while len(pending) >= n:
                    chunk, pending = pending[:n], pending[n:]
                    self._events.put_nowait(AudioIn(pcm=chunk, at=time.monotonic()))
        except MediaStreamError:
            self.end("remote_hangup", by_remote=True)


def _outbound_track(call: WebRtcCall) -> Any:
    from aiortc import MediaStreamTrack  # noqa: PLC0415
    from av import AudioFrame  # noqa: PLC0415

    class BotAudio(MediaStreamTrack):
        """The bot's side, paced at one 20 ms frame per 20 ms."""

        kind = "audio"

        def __init__(self) -> None:
            super().__init__()
            self._samples = call.sample_rate * FRAME_MS // 1000
            self._pts = 0
            self._start: float | None = None

        async def recv(self) -> Any:
            if self._start is None:
                self._start = time.monotonic()
            due = self._start + self._pts / call.sample_rate
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            frame = AudioFrame(format="s16", layout="mono", samples=self._samples)
            frame.planes[0].update(call.next_frame())
            frame.sample_rate = call.sample_rate
            frame.pts = self._pts
            frame.time_base = fractions.Fraction(1, call.sample_rate)
            self._pts += self._samples
            return frame

    return BotAudio()


class WebRtcCalls:
    """Answers browser offers and runs each as a call of the node."""

    def __init__(
        self, run_call: CallRunner, *, sample_rate: int, call_limit: CallLimit | None = None
    ) -> None:
        self._run_call = run_call
        self.sample_rate = sample_rate
        self._call_limit = call_limit
        self._tasks: set[asyncio.Task[None]] = set()
        self._pcs: set[Any] = set()
        #: Browser calls in progress, by caller (from the answer to the call's end).
        self._by_caller: Counter[str] = Counter()

    @property
    def in_progress(self) -> int:
        """Browser calls answered and not yet ended."""
        return sum(self._by_caller.values())

    def _admit(self, caller: str, max_per_caller: int, max_calls: int) -> None:
        held = self._by_caller[caller]
        if held >= max_per_caller:
            raise CallRefused(
                f"{caller} has {held} browser calls in progress, the most one user may have: "
                "end one first",
                node_full=False,
            )
        if self.in_progress >= max_calls:
            raise CallRefused(
                f"{self.in_progress} browser calls in progress, the most this node takes",
                node_full=True,
            )
        if self._call_limit is not None:
            busy, limit = self._call_limit()
            if busy >= limit:
                raise CallRefused(
                    f"the node is at its call limit ({busy} of {limit} calls in progress)",
                    node_full=True,
                )

    def _release(self, caller: str) -> None:
        self._by_caller[caller] -= 1
        if self._by_caller[caller] <= 0:
            del self._by_caller[caller]

    async def answer(
        self,
        sdp: str,
        sdp_type: str,
        caller: str,
        *,
        max_per_caller: int = 2,
        max_calls: int = 4,
    ) -> tuple[str, str]:
        """The SDP answer to a browser's offer; the call starts when its audio arrives.

        ``CallRefused`` when ``caller`` already has ``max_per_caller`` browser calls, the
        node ``max_calls``, or the node is at its own call limit (phone calls count): a
        browser call is a call of the node, with its models, log and recording."""
        from aiortc import RTCPeerConnection, RTCSessionDescription  # noqa: PLC0415

        self._admit(caller, max_per_caller, max_calls)
        self._by_caller[caller] += 1  # held from here: offers at once cannot pass together
        pc = RTCPeerConnection()
        self._pcs.add(pc)
        call = WebRtcCall(pc, sample_rate=self.sample_rate, caller=caller)

        @pc.on("track")
        def _on_track(track: Any) -> None:
            if track.kind == "audio":
                call.read_from(track)

        @pc.on("connectionstatechange")
        async def _on_state() -> None:
            if pc.connectionState in ("failed", "closed", "disconnected"):
                call.end("remote_hangup", by_remote=True)
                self._pcs.discard(pc)
                await pc.close()

        try:
            await pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type=sdp_type))
            pc.addTrack(_outbound_track(call))
            await pc.setLocalDescription(await pc.createAnswer())
        except BaseException:
            self._release(caller)
            self._pcs.discard(pc)
            await pc.close()
            raise
        task = asyncio.create_task(self._run(call), name=call.call_id)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        local = pc.localDescription
        return local.sdp, local.type

    async def _run(self, call: WebRtcCall) -> None:
        log.info("browser call %s from %s", call.call_id, call.remote_uri)
        try:
            await self._run_call(call)
        finally:
            self._release(call.remote_uri)
            self._pcs.discard(call.pc)
            await call.pc.close()

    async def close(self) -> None:
        for pc in list(self._pcs):
            await pc.close()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, 5)
