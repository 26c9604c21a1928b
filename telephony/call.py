"""One call: ``SipCall`` (pjsua2 side, endpoint thread) and ``CallHandle`` (asyncio side)."""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import pjsua2 as pj

from telephony.config import EndpointConfig
from telephony.events import (
    TRANSFER_TIMEOUT_S,
    CallEnded,
    DtmfIn,
    InboundEvent,
    TransferResult,
)
from telephony.media_port import InboundSink, PcmPort, PlayoutBuffer


class CallCore(Protocol):
    """What a call tells the endpoint that owns it (``telephony.endpoint._Core``), on the
    endpoint thread."""

    config: EndpointConfig
    loop: asyncio.AbstractEventLoop

    def on_media_active(self, call: SipCall, idx: int, info: Any) -> None: ...

    def on_disconnected(self, call: SipCall, info: Any) -> None: ...

    def on_caller_refer(self, call: SipCall, target: str) -> None: ...

    def on_transfer_status(self, call: SipCall, code: int, reason: str, final: bool) -> None: ...

    def collect_stream_stats(self, call: SipCall, idx: int) -> None: ...


DTMF_IS_END = 1 << 1  # PJMEDIA_STREAM_DTMF_IS_END (pjmedia/stream.h); not exported by SWIG

Transferrer = Callable[[str, float], Awaitable[TransferResult]]
Bridger = Callable[[str, float, bytes], Awaitable[TransferResult]]


class CallHandle:
    """A live call as seen from asyncio: PCM frames and DTMF in, PCM out."""

    def __init__(
        self,
        *,
        call_id: str,
        remote_uri: str,
        local_uri: str,
        codec: str,
        sample_rate: int,
        sink: InboundSink,
        playout: PlayoutBuffer,
        hangup: Callable[[], Awaitable[None]],
        transfer: Transferrer | None = None,
        bridge: Bridger | None = None,
        local_rtp_addr: str = "",
        remote_rtp_addr: str = "",
    ) -> None:
        self.call_id = call_id
        self.remote_uri = remote_uri
        self.local_uri = local_uri
        self.codec = codec
        self.sample_rate = sample_rate
        self.answered_at = time.monotonic()
        self.local_rtp_addr = local_rtp_addr  # "ip:port" our RTP socket is bound to
        self.remote_rtp_addr = remote_rtp_addr  # "ip:port" from the caller's SDP
        self._sink = sink
        self._playout = playout
        self._hangup = hangup
        self._transfer = transfer
        self._bridge = bridge
        self._drained = asyncio.Event()

    def __repr__(self) -> str:
        return f"CallHandle({self.call_id!r}, {self.remote_uri!r}, codec={self.codec!r})"

    @property
    def ended(self) -> bool:
        """True once the call is over (``CallEnded`` has been produced)."""
        return self._sink.closed

    @property
    def frames_played(self) -> int:
        """Voiced (queued) frames actually handed to pjsip so far: the playout clock."""
        return self._playout.frames_played

    @property
    def playout_underruns(self) -> int:
        """Times the queue ran dry and audio came again within 100 ms (a gap heard)."""
        return self._playout.underruns

    @property
    def queued_frames(self) -> int:
        """Frames waiting to be played (a trailing partial frame counts as one)."""
        return len(self._playout)

    @property
    def frame_bytes(self) -> int:
        """Bytes in one 20 ms frame."""
        return self._playout.frame_bytes

    async def receive(self) -> AsyncIterator[InboundEvent]:
        """Yield ``AudioIn`` / ``DtmfIn`` in arrival order, then ``CallEnded`` and stop."""
        while True:
            event = await self._sink.get()
            yield event
            if isinstance(event, CallEnded):
                return

    def send(self, pcm: bytes) -> None:
        """Queue PCM16 mono audio for the caller; non-blocking, any length."""
        if not self._sink.closed:
            self._playout.push(pcm)

    def clear_playout(self) -> int:
        """Drop all queued audio (barge-in); returns frames dropped. Effective next tick."""
        return self._playout.clear()

    async def wait_playout_drained(self) -> None:
        """Return once everything queued so far has been handed to pjsip (or the call ended)."""
        loop = asyncio.get_running_loop()
        while len(self._playout) and not self._sink.closed:
            self._drained.clear()
            self._playout.set_drained_callback(self._signal_drained(loop))
            if not len(self._playout):
                break
            # Time-boxed: the call may end or the queue be cleared without a drain signal.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._drained.wait(), timeout=0.2)
        self._playout.set_drained_callback(None)

    def _signal_drained(self, loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
        def signal() -> None:  # clock thread
            loop.call_soon_threadsafe(self._drained.set)

        return signal

    async def hangup(self) -> None:
        """Send BYE (or a final response if not yet answered); idempotent."""
        if not self._sink.closed:
            await self._hangup()

    async def transfer(
        self, target: str, *, timeout_s: float = TRANSFER_TIMEOUT_S
    ) -> TransferResult:
        """Blind transfer: send the caller a REFER to ``target`` and wait for the outcome.

        Success once the caller's side reports (by NOTIFY) that the target answered. A
        refused REFER, a failure NOTIFY, the end of the call, or no final report within
        ``timeout_s`` is a failure. The call stays up either way: hanging up after a
        successful transfer is the application's decision.
        """
        if self._sink.closed or self._transfer is None:
            return TransferResult(False, 0, "call ended")
        return await self._transfer(target, timeout_s)

    async def bridge(
        self, target: str, *, timeout_s: float = TRANSFER_TIMEOUT_S, summary: bytes = b""
    ) -> TransferResult:
        """Bridged transfer: call ``target`` from this endpoint and join it to this call.

        Success once the agent has answered (and heard ``summary``, PCM at the call's rate,
        if one is given) and the two calls are joined: from then on the caller and the
        agent hear each other, this handle no longer gets the caller's audio, and what is
        sent to it is not played. A busy, refused or unanswered agent (``timeout_s``) is a
        failure, and the call goes on as before. See ``telephony.bridge``.
        """
        if self._sink.closed or self._bridge is None:
            return TransferResult(False, 0, "call ended")
        return await self._bridge(target, timeout_s, summary)


class SipCall(pj.Call):  # type: ignore[misc]
    """pjsua2 call object. Every method runs on the endpoint thread."""

    def __init__(self, core: CallCore, account: Any, call_id: int) -> None:
        super().__init__(account, call_id)
        # Weak: a SipCall <-> core cycle would leave the Call to the cyclic GC, which may
        # free it on another thread or after libDestroy.
        self.core: CallCore = weakref.proxy(core)
        self.sink = InboundSink(core.loop)
        self.playout = PlayoutBuffer(core.config.frame_bytes)
        self.port: PcmPort | None = None
        self.handle: CallHandle | None = None
        self.sip_call_id = ""
        self.local_hangup = False
        self.answered = False
        self.rejected = False
        self.disconnected = False
        self.stream_released = False  # see telephony.stream_release
        # The pending transfer's outcome goes here (set and called on this thread).
        self.xfer_done: Callable[[TransferResult], None] | None = None
        #: The agent's leg of a bridged transfer (``telephony.bridge``), while it is up.
        #: (a ``telephony.bridge.AgentLeg``: held here, used by the bridge alone)
        self.leg: pj.Call | None = None
        self.aud_idx: int | None = None  # the audio media's index, once active
        #: Why the call ended when this side ended it for a reason of its own.
        self.end_note = ""
        self.rx_discard_seen = 0
        self.rx_pkt_seen = 0
        self.tx_pkt_seen = 0

    # pjsua2 callbacks -------------------------------------------------------------
    def onCallState(self, prm: Any) -> None:
        info = self.getInfo()
        if info.state == pj.PJSIP_INV_STATE_DISCONNECTED and not self.disconnected:
            self.disconnected = True
            self.core.on_disconnected(self, info)

    def onCallMediaState(self, prm: Any) -> None:
        info = self.getInfo()
        for idx, media in enumerate(info.media):
            if media.type == pj.PJMEDIA_TYPE_AUDIO and media.status == pj.PJSUA_CALL_MEDIA_ACTIVE:
                self.core.on_media_active(self, idx, info)
                return

    def onDtmfEvent(self, prm: Any) -> None:
        # Every digit arrives here once, at its end: RFC 4733 events from the stream and SIP
        # INFO digits alike (pjsua reports an INFO digit here and to onDtmfDigit as well:
        # taking both counted each INFO digit twice).
        if prm.flags & DTMF_IS_END:
            self.sink.put(DtmfIn(str(prm.digit), int(prm.duration), time.monotonic()))

    def onCallTransferRequest(self, prm: Any) -> None:
        # A REFER sent by the caller (a blind transfer, or one with Replaces) would have
        # pjsua place a call to whatever the Refer-To names, on a leg nobody here owns: toll
        # fraud, and a crash when pjsua2 later frees that leg. The node places calls only for
        # the bot's own transfers (checked against transfer_targets); a caller's REFER is
        # declined before anything is dialled.
        self.core.on_caller_refer(self, str(prm.dstUri))
        prm.statusCode = pj.PJSIP_SC_DECLINE

    def onCallReplaceRequest(self, prm: Any) -> None:
        # An INVITE with Replaces naming this call would hand the caller's dialog to a third
        # party; no call of this node is replaced.
        self.core.on_caller_refer(self, "(INVITE with Replaces)")
        prm.statusCode = pj.PJSIP_SC_FORBIDDEN
        prm.reason = "Replaces not accepted"

    def onCallRedirected(self, prm: Any) -> int:
        # The caller's leg is answered by this node and is never redirected.
        return int(pj.PJSIP_REDIRECT_REJECT)

    def onCallTransferStatus(self, prm: Any) -> None:
        # 100 "Accepted" when the REFER got its 2xx, then one call per NOTIFY (its sipfrag's
        # status); a refused REFER or a timed-out subscription comes as a final status.
        self.core.on_transfer_status(
            self, int(prm.statusCode), str(prm.reason), bool(prm.finalNotify)
        )

    def onStreamDestroyed(self, prm: Any) -> None:
        self.core.collect_stream_stats(self, int(prm.streamIdx))
