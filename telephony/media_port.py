"""The per-call pjsua2 media port and the thread-safe buffers on either side of it.

``PcmPort`` callbacks run on the conference bridge's clock thread (one tick per 20 ms).
They never block: inbound frames are handed to asyncio with ``call_soon_threadsafe``;
outbound frames are popped from a ``PlayoutBuffer`` filled by asyncio.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar, cast

import pjsua2 as pj

from telephony.events import AudioIn, CallEnded, InboundEvent
from telephony.framebuf import pcm_port_format, read_frame, write_frame

P = TypeVar("P")

UNDERRUN_WINDOW_TICKS = 5  # audio arriving within 100 ms of the queue running dry = a gap heard


class PlayoutBuffer:
    """Frames queued for the caller. ``push``/``clear`` from asyncio, ``pop`` from the clock."""

    def __init__(self, frame_bytes: int) -> None:
        self.frame_bytes = frame_bytes
        self._frames: deque[bytes] = deque()
        self._partial = b""
        self._lock = threading.Lock()
        self.frames_played = 0
        self.underruns = 0
        self._dry_tick = -1  # tick at which the queue ran dry after playing
        self._tick = 0
        self._drained_cb: Callable[[], None] | None = None

    def push(self, pcm: bytes) -> None:
        """Queue PCM of any length; whole frames are split off, a remainder waits."""
        if not pcm:
            return
        n = self.frame_bytes
        with self._lock:
            data = self._partial + pcm if self._partial else pcm
            whole = len(data) - len(data) % n
            self._frames.extend(data[i : i + n] for i in range(0, whole, n))
            self._partial = data[whole:]
            if self._dry_tick >= 0 and self._tick - self._dry_tick <= UNDERRUN_WINDOW_TICKS:
                self.underruns += 1
            self._dry_tick = -1

    def clear(self) -> int:
        """Drop everything queued; return the number of frames dropped."""
        with self._lock:
            dropped = len(self._frames) + (1 if self._partial else 0)
            self._frames.clear()
            self._partial = b""
            self._dry_tick = -1
        return dropped

    def __len__(self) -> int:
        return len(self._frames) + (1 if self._partial else 0)

    def set_drained_callback(self, cb: Callable[[], None] | None) -> None:
        """Called (on the clock thread) when the last queued frame has been handed out."""
        self._drained_cb = cb

    def pop(self) -> bytes | None:
        """Next frame for this tick, or ``None`` (the port then sends silence)."""
        with self._lock:
            self._tick += 1
            if self._frames:
                frame = self._frames.popleft()
            elif self._partial:
                frame = self._partial + bytes(self.frame_bytes - len(self._partial))
                self._partial = b""
            else:
                return None
            self.frames_played += 1
            empty = not self._frames and not self._partial
            if empty:
                self._dry_tick = self._tick
        cb = self._drained_cb
        if empty and cb is not None:
            cb()
        return frame


class InboundSink:
    """Hands events from pjsip threads to one asyncio consumer, in order."""

    def __init__(self, loop: asyncio.AbstractEventLoop, max_frames: int = 3000) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._closed = False
        self.events: deque[InboundEvent] = deque()
        self.max_frames = max_frames  # 60 s of audio; older frames are dropped beyond that
        self.dropped = 0
        self._waiter: asyncio.Future[None] | None = None

    @property
    def closed(self) -> bool:
        return self._closed

    def put(self, event: InboundEvent) -> None:
        """Thread-safe; ignored once the call has ended."""
        with self._lock:
            if self._closed:
                return
            if isinstance(event, CallEnded):
                self._closed = True
            try:
                self._loop.call_soon_threadsafe(self._deliver, event)
            except RuntimeError:  # loop closed: nobody is listening any more
                self._closed = True

    def _deliver(self, event: InboundEvent) -> None:
        if len(self.events) >= self.max_frames and isinstance(event, AudioIn):
            self.events.popleft()
            self.dropped += 1
        self.events.append(event)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> InboundEvent:
        """Next event (asyncio side)."""
        while not self.events:
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self.events.popleft()


class PortShelf:
    """Media ports kept for the library's whole life, handed to call after call.

    A pjsua2 media port must not be freed while the conference bridge's clock runs. The
    bridge takes a port out at its next tick, not when the port's destructor asks; a tick
    in between calls the port back through its freed C++ side or into its Python object
    while that is being deallocated (seen: a callback finding the object's attributes
    gone, and heap corruption that surfaced later as ``SystemError`` in unrelated code).
    So a port is made once, given back when its call has ended (and the bridge has let go
    of the call's own stream), taken again by a later call, and freed only when the
    endpoint stops, after the clock has been stopped (``Endpoint._destroy_lib``).
    """

    def __init__(self) -> None:
        self._free: dict[type[Any], list[Any]] = {}
        self.made = 0  # ports made; each one is in a call, on the shelf or in the graveyard

    def take(self, kind: type[P], sample_rate: int, *args: Any) -> P:
        """A port of ``kind`` serving ``args`` (endpoint thread): a free one given them by
        its ``reuse``, or a new one, ``kind(*args)``, registered with the bridge."""
        free = self._free.get(kind)
        port: Any
        if free:
            port = free.pop()
            port.reuse(*args)
        else:
            port = kind(*args)
            port.create(f"{kind.__name__}{self.made}", sample_rate)
            self.made += 1
        return cast(P, port)

    def give_back(self, port: Any) -> None:
        self._free.setdefault(type(port), []).append(port)

    def free_count(self) -> int:
        return sum(len(v) for v in self._free.values())

    def clear(self) -> None:
        """Drop every shelved port (endpoint thread, the bridge's clock stopped)."""
        self._free.clear()


class PcmPort(pj.AudioMediaPort):  # type: ignore[misc]
    """Python media port: bridge audio -> ``InboundSink``, ``PlayoutBuffer`` -> bridge.

    One port serves call after call (``PortShelf``): ``reuse`` gives it the next call's
    buffers and clears its counters and flags.
    """

    def __init__(self, sink: InboundSink, playout: PlayoutBuffer) -> None:
        super().__init__()
        self.reuse(sink, playout)

    def reuse(self, sink: InboundSink, playout: PlayoutBuffer) -> None:
        """Serve a new call (endpoint thread; the port is connected to nothing)."""
        self._sink = sink
        self._playout = playout
        self._silence = bytes(playout.frame_bytes)
        self.frames_in = 0
        self.frames_out = 0
        self.silent_out = 0
        self.muted = False  # inbound audio replaced by silence (RTP from a foreign source)
        #: The call is bridged to an agent (``telephony.bridge``): nothing in, nothing out.
        self.bridged = False
        self.frames_muted = 0
        self.closed = False  # set when the call ends; callbacks become no-ops

    def create(self, name: str, sample_rate: int) -> None:
        """Register with the conference bridge (endpoint thread only)."""
        self.createPort(name, pcm_port_format(sample_rate))

    def onFrameReceived(self, frame: Any) -> None:
        if self.closed or self.bridged:
            return
        if self.muted:
            pcm = self._silence
            self.frames_muted += 1
        elif frame.type == pj.PJMEDIA_FRAME_TYPE_AUDIO and frame.size:
            pcm = read_frame(frame)
        else:
            pcm = self._silence
        self.frames_in += 1
        self._sink.put(AudioIn(pcm, time.monotonic()))

    def onFrameRequested(self, frame: Any) -> None:
        pcm = None if self.closed or self.bridged else self._playout.pop()
        if pcm is None:
            pcm = self._silence
            self.silent_out += 1
        write_frame(frame, pcm)
        self.frames_out += 1
