"""WebRTC calls (aiortc): telephony's second transport, beside SIP, as a call of the same
pipeline. The console's test call from the browser uses it.

The console (or any WebRTC client) posts an SDP offer, checked first
(``telephony.webrtc_sdp``); the node answers it and, once the browser is connected (ICE and
DTLS), runs a ``CallSession`` on a ``WebRtcCall``, the same ``CallPort`` a SIP call is: the
same models, the same intent cache and the same call log. From the offer to the call's end
the call holds one of the node's places for calls, which its phone calls take too. Audio
is Opus on the wire; aiortc decodes it, and it is resampled here to the pipeline's rate in
20 ms frames, and the bot's frames are paced out at 20 ms. Needs the ``webrtc`` extra (aiortc).
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
from telephony.webrtc_sdp import SdpError, check_offer

log = logging.getLogger(__name__)

#: A new browser call: the node runs its session (``Node._on_call``).
CallRunner = Callable[[Any], Awaitable[None]]
#: Takes one of the node's places for calls (phone and browser count alike) and returns
#: what gives it back; raises ``CallRefused`` when the node has none free.
TakePlace = Callable[[], Callable[[], None]]


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


class _Place:
    """A browser call's place on the node, from its offer to its end: held once, freed once."""

    def __init__(self, owner: WebRtcCalls, caller: str, give_back: Callable[[], None]) -> None:
        self.owner = owner
        self.caller = caller
        self._give_back = give_back
        self.held = True

    def free(self) -> None:
        if self.held:
            self.held = False
            self._give_back()
            self.owner._freed(self.caller)


class WebRtcCalls:
    """Answers browser offers and runs each as a call of the node.

    A browser call holds a place from its offer: the node's (``take_place``, the one count
    of its calls, SIP and browser), the caller's share (``max_per_caller``) and one of
    ``max_calls``. It becomes a call of the node (``run_call``: the session, the call log's
    live call) once connected, ICE and DTLS done; an offer not connected within
    ``connect_timeout_s`` is dropped and its place freed.
    """

    def __init__(
        self,
        run_call: CallRunner,
        *,
        sample_rate: int,
        take_place: TakePlace | None = None,
    ) -> None:
        self._run_call = run_call
        self.sample_rate = sample_rate
        self._take_place = take_place
        self._tasks: set[asyncio.Task[None]] = set()
        self._pcs: set[Any] = set()
        #: Browser calls holding a place, by caller (from the offer to the call's end).
        self._by_caller: Counter[str] = Counter()
        self._idle = asyncio.Event()
        self._idle.set()
        #: New offers are refused (503): the node drains (``Node.drain``).
        self.draining = False
        #: Offers answered and never connected, dropped (since start).
        self.dropped_unconnected = 0

    @property
    def in_progress(self) -> int:
        """Browser calls holding a place: offers being connected, and calls up."""
        return sum(self._by_caller.values())

    async def wait_idle(self) -> None:
        """Returns once no browser call holds a place."""
        await self._idle.wait()

    def _admit(self, caller: str, max_per_caller: int, max_calls: int) -> _Place:
        if self.draining:
            raise CallRefused(
                "the node is stopping (draining): it takes no new call", node_full=True
            )
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
        give_back = self._take_place() if self._take_place is not None else _nothing
        self._by_caller[caller] += 1  # held from here: offers at once cannot pass together
        self._idle.clear()
        return _Place(self, caller, give_back)

    def _freed(self, caller: str) -> None:
        self._by_caller[caller] -= 1
        if self._by_caller[caller] <= 0:
            del self._by_caller[caller]
        if not self._by_caller:
            self._idle.set()

    async def answer(
        self,
        sdp: str,
        sdp_type: str,
        caller: str,
        *,
        max_per_caller: int = 2,
        max_calls: int = 4,
        connect_timeout_s: float = 10.0,
    ) -> tuple[str, str]:
        """The SDP answer to a browser's offer; the call starts once it is connected.

        ``SdpError`` when the offer is malformed or could never connect
        (``telephony.webrtc_sdp``). ``CallRefused`` when ``caller`` already has
        ``max_per_caller`` browser calls, the node ``max_calls``, or the node has no place
        (``take_place``: its calls, phone and browser, at its call limit) or is draining.
        An offer not connected within ``connect_timeout_s`` is dropped."""
        from aiortc import RTCPeerConnection, RTCSessionDescription  # noqa: PLC0415

        checked = check_offer(sdp)
        place = self._admit(caller, max_per_caller, max_calls)
        pc = RTCPeerConnection()
        self._pcs.add(pc)
        call = WebRtcCall(pc, sample_rate=self.sample_rate, caller=caller)
        settled = asyncio.Event()  # connected, or failed or closed first

        @pc.on("track")
        def _on_track(track: Any) -> None:
            if track.kind == "audio" and call._reader is None:
                call.read_from(track)

        @pc.on("connectionstatechange")
        async def _on_state() -> None:
            if pc.connectionState == "connected":
                settled.set()
            elif pc.connectionState in ("failed", "closed", "disconnected"):
                settled.set()
                call.end("remote_hangup", by_remote=True)
                self._pcs.discard(pc)
                await pc.close()

        try:
            try:
                await pc.setRemoteDescription(RTCSessionDescription(sdp=checked, type=sdp_type))
                pc.addTrack(_outbound_track(call))
                await pc.setLocalDescription(await pc.createAnswer())
            except (asyncio.CancelledError, SdpError):
                raise
            except Exception as exc:  # what the check let through and aiortc did not take
                log.warning("browser offer from %s not answered: %r", caller, exc)
                why = str(exc) or type(exc).__name__
                raise SdpError(f"the offer could not be answered: {why}") from exc
        except BaseException:
            place.free()
            self._pcs.discard(pc)
            await pc.close()
            raise
        task = asyncio.create_task(
            self._run(call, place, settled, connect_timeout_s), name=call.call_id
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        local = pc.localDescription
        return local.sdp, local.type

    async def _run(
        self, call: WebRtcCall, place: _Place, settled: asyncio.Event, timeout_s: float
    ) -> None:
        pc = call.pc
        try:
            try:
                await asyncio.wait_for(settled.wait(), timeout_s)
            except TimeoutError:
                self.dropped_unconnected += 1
                log.info(
                    "browser call %s from %s not connected within %.1f s: dropped",
                    call.call_id,
                    call.remote_uri,
                    timeout_s,
                )
                return
            if pc.connectionState != "connected":
                log.info("browser call %s from %s never connected", call.call_id, call.remote_uri)
                return
            call.answered_at = time.monotonic()
            log.info("browser call %s from %s", call.call_id, call.remote_uri)
            await self._run_call(call)
        finally:
            place.free()
            self._pcs.discard(pc)
            await pc.close()

    async def close(self) -> None:
        for pc in list(self._pcs):
            await pc.close()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, 5)


def _nothing() -> None:
    pass
