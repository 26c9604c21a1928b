"""SIP endpoint: one thread owns the pjsua2 ``Endpoint``; asyncio talks to it by commands.

Threading model (pjsua2 rules):
- The endpoint thread calls ``libCreate``/``libInit`` (``threadCnt=0``, ``mainThreadOnly``),
  then loops: run queued commands, run due timers, ``libHandleEvents(10)``. SIP and call
  callbacks therefore all arrive on this thread, and every pjsua2 API call is made here.
- The conference bridge's clock thread (null sound device) calls the per-call media port
  every 20 ms; that code only touches thread-safe Python buffers.
- asyncio never calls pjsua2: it submits closures with ``_Core.submit`` and awaits a future.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import heapq
import itertools
import logging
import queue
import re
import sys
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pjsua2 as pj

from telephony import front_token, pjsip_c, srtp, stream_release
from telephony.bridge import AgentLeg, Bridges
from telephony.call import Bridger, CallHandle, SipCall, Transferrer
from telephony.config import EndpointConfig
from telephony.events import BYE_WITHOUT_END, NO_ACK, CallEnded, TransferResult
from telephony.media_port import PcmPort, PortShelf
from telephony.sdp import has_common_codec, sip_body
from telephony.sipcheck import request_defect
from telephony.stats import STAT_KEYS, WHEEL_MAX_CALLS, EndpointError, call_limit

log = logging.getLogger(__name__)

T = TypeVar("T")
OnCall = Callable[[CallHandle], Awaitable[None]]

POLL_MS = 10  # libHandleEvents timeout: upper bound on command latency
PORT_GRACE_S = 1.0  # an ended call (and its media port) waits this long to be freed (shelved)
STATS_REFRESH_S = 1.0
ACK_CHECK_MARGIN_S = 0.25  # after pjsip's own 64*T1 on an unACKed 200 OK
BYE_END_GRACE_S = 2.0  # a BYE that named a call and did not end it by then: ended here
_PROCESS_SLOT = threading.Lock()  # one pjsua2 library per process


def _settle(fut: asyncio.Future[TransferResult], result: TransferResult) -> None:
    if not fut.done():  # not given up on (timed out, or the caller cancelled)
        fut.set_result(result)


class _Endpoint(pj.Endpoint):  # type: ignore[misc]
    """Counts INVITEs that pjsua rejected itself (all call slots taken: 486)."""

    def __init__(self, core: _Core) -> None:
        super().__init__()
        self.core = weakref.proxy(core)

    def onRejectedIncomingCall(self, prm: Any) -> None:
        code = int(prm.statusCode)
        key = {486: "rejected_busy", 488: "rejected_codec"}.get(code, "calls_failed")
        self.core.counters[key] += 1


PEER_SWITCH_LOG = "Remote RTP address switched"  # pjmedia transport_udp, level 4
PEER_SWITCH_RE = re.compile(r"Remote RTP address switched to (\S+)")


class _LogHook(pj.LogWriter):  # type: ignore[misc]
    """pjsip log lines -> stderr (up to ``level``); also watches for RTP peer switches.

    pjmedia drops RTP from a non-peer address silently and counts it nowhere, but when it
    *accepts* a new source (10 consecutive packets, or any packet before the caller's first)
    it logs the switch at level 4: that is the one signal pjsua2 offers, so it is counted.
    """

    def __init__(self, core: _Core, level: int) -> None:
        super().__init__()
        self.core = weakref.proxy(core)
        self.level = level

    def write(self, entry: Any) -> None:
        msg: str = entry.msg
        if PEER_SWITCH_LOG in msg:
            match = PEER_SWITCH_RE.search(msg)
            if match:
                core, addr = self.core, match.group(1)
                core.mute_suspects(addr)  # at once, from Python state only
                core.submit(lambda: core.on_peer_switch(addr))  # then check each call
        if entry.level <= self.level:
            sys.stderr.write(msg if msg.endswith("\n") else msg + "\n")


class _Account(pj.Account):  # type: ignore[misc]
    def __init__(self, core: _Core) -> None:
        super().__init__()
        self.core = core

    def onIncomingCall(self, prm: Any) -> None:
        self.core.on_incoming(prm)


class _Core:
    """State owned by the endpoint thread (plus counters read from anywhere)."""

    def __init__(self, config: EndpointConfig, on_call: OnCall, loop: asyncio.AbstractEventLoop):
        self.config = config
        self.on_call = on_call
        self.loop = loop
        self.commands: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]]
        self.commands = queue.SimpleQueue()
        self.timers: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.stop_requested = threading.Event()
        self.ep: Any = None
        self.account: _Account | None = None
        #: The account the agent legs of bridged transfers are placed from, when their SRTP
        #: use (``agent_srtp``) differs from the callers' (``srtp``); else ``account``.
        self.agent_account: _Account | None = None
        self.logger: _LogHook | None = None
        self.calls: dict[int, SipCall] = {}  # pjsua call id -> live call
        self.bridges = Bridges(self)  # the agent legs of bridged transfers
        self.graveyard: list[tuple[float, object]] = []
        self.ports = PortShelf()  # media ports are used again, never freed while running
        self.tasks: set[asyncio.Task[None]] = set()
        self.counters = dict.fromkeys(STAT_KEYS, 0)
        self.next_stats_refresh = 0.0
        self.thread_id: int | None = None
        #: Called (on the asyncio thread) with the number of call slots pjsua still holds
        #: for calls already ended for their bot (``_report_ending``), when it changes.
        self.on_ending: Callable[[int], None] | None = None
        self.ending = 0
        self.stamp_key: bytes | None = None  # see SipEndpoint
        #: Counts the bridge's ticks, for taking a call's stream out before its teardown
        #: (``telephony.stream_release``).
        self.metronome: stream_release.Metronome | None = None

    # plumbing -------------------------------------------------------------------
    def submit(self, fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Run ``fn`` on the endpoint thread; the future carries its result."""
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()
        self.commands.put((fn, fut))
        return fut

    def graveyard_add(self, obj: object) -> None:
        """Endpoint thread: free ``obj`` (an ended call or port) later, on this thread."""
        self.graveyard.append((time.monotonic() + PORT_GRACE_S, obj))

    def call_later(self, delay_s: float, fn: Callable[[], None]) -> None:
        """Endpoint thread only: run ``fn`` on this thread after ``delay_s``."""
        heapq.heappush(self.timers, (time.monotonic() + delay_s, next(self._seq), fn))

    def _drain(self) -> None:
        while True:
            try:
                fn, fut = self.commands.get_nowait()
            except queue.Empty:
                break
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn())
            except Exception as exc:  # handed to the awaiting coroutine
                fut.set_exception(exc)
        now = time.monotonic()
        while self.timers and self.timers[0][0] <= now:
            _, _, fn = heapq.heappop(self.timers)
            self._guard(fn)
        if self.graveyard and self.graveyard[0][0] <= now:
            kept = []
            for t, obj in self.graveyard:
                if t > now or self._id_reused(obj):
                    kept.append((t, obj))
                elif isinstance(obj, pj.AudioMediaPort):
                    self.ports.give_back(obj)  # its call is gone: the next call may take it
            self.graveyard = kept
        self._report_ending()
        if now >= self.next_stats_refresh:
            self.next_stats_refresh = now + STATS_REFRESH_S
            for call in list(self.calls.values()):
                self._refresh_stream_stats(call)

    def _id_reused(self, obj: object) -> bool:
        """Whether ``obj`` is an ended call whose pjsua call id a live call now holds.

        pjsua2's Call destructor hangs up whatever call holds its id and clears that call's
        callbacks: freed then, an ended call cut off the caller who got its id next (seen
        with calls arriving right after others ended). It waits until the id is free.
        """
        if not isinstance(obj, SipCall | AgentLeg):
            return False
        pjsua_id = int(obj.getId())
        live = self.calls.get(pjsua_id) or self.bridges.legs.get(pjsua_id)
        return live is not None and live is not obj

    def _report_ending(self) -> None:
        """Tell ``on_ending`` how many call slots pjsua holds for calls that are over for
        their bot, if that changed.

        A call ended here (its BYE sent, its bot told) keeps its pjsua slot until the BYE is
        answered or given up on: 64*T1 when the caller has gone. A front that took the slot
        for free would send a call that pjsua answers 486. Called on every loop (the count
        falls when a BYE ends) and when a call ends, before its end is passed on.
        """
        if self.on_ending is None or self.ep is None:
            return
        live = sum(1 for c in self.calls.values() if not c.sink.closed)
        ending = max(0, pjsip_c.calls_held() - live - len(self.bridges.legs))
        if ending != self.ending:
            self.ending = ending
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody to tell
                self.loop.call_soon_threadsafe(self.on_ending, ending)

    @staticmethod
    def _guard(fn: Callable[[], None]) -> None:
        try:
            fn()
        except pj.Error as exc:
            log.warning("pjsua2 error in deferred work: %s", exc.info())

    # lifecycle ------------------------------------------------------------------
    def run(self, ready: concurrent.futures.Future[None]) -> None:
        """Thread body."""
        self.thread_id = threading.get_ident()
        error: EndpointError | None = None
        try:
            self._start_lib()
        except Exception as exc:
            # A fresh exception: the original's traceback holds the SWIG wrapper frames, and
            # through them the pjsua2 Endpoint, which must die in _destroy_lib, here.
            detail = exc.info() if isinstance(exc, pj.Error) else repr(exc)
            error = EndpointError(f"SIP endpoint failed to start: {detail}")
        if error is not None:
            self._destroy_lib()
            ready.set_exception(error)
            return
        ready.set_result(None)
        try:
            while not self.stop_requested.is_set():
                self._drain()
                self.ep.libHandleEvents(POLL_MS)
            self._shutdown()
        finally:
            self._destroy_lib()

    def _start_lib(self) -> None:
        cfg = self.config
        self.ep = _Endpoint(self)
        self.ep.libCreate()
        if cfg.max_calls > call_limit(cfg):
            log.warning(
                "max_calls=%d but this pjsua2 build holds %d calls per process: "
                "answering at most %d at once (503 beyond)",
                cfg.max_calls,
                WHEEL_MAX_CALLS,
                call_limit(cfg),
            )
        ep_cfg = pj.EpConfig()
        ep_cfg.uaConfig.threadCnt = 0
        ep_cfg.uaConfig.mainThreadOnly = True
        ep_cfg.uaConfig.userAgent = cfg.user_agent
        ep_cfg.uaConfig.maxCalls = WHEEL_MAX_CALLS
        self.logger = _LogHook(self, cfg.log_level)
        ep_cfg.logConfig.writer = self.logger
        # Level 4 reaches the hook (peer-switch lines); SIP message dumps only if asked for.
        ep_cfg.logConfig.level = max(cfg.log_level, 4)
        ep_cfg.logConfig.consoleLevel = max(cfg.log_level, 4)
        ep_cfg.logConfig.msgLogging = cfg.log_level >= 4
        ep_cfg.logConfig.decor = pj.PJ_LOG_HAS_TIME | pj.PJ_LOG_HAS_SENDER
        med = ep_cfg.medConfig
        med.clockRate = cfg.sample_rate
        med.sndClockRate = cfg.sample_rate
        med.channelCount = 1
        med.audioFramePtime = 20
        med.ptime = 20
        med.noVad = True  # continuous RTP: the peer and our timeline both see every tick
        med.ecTailLen = 0
        med.jbInit = cfg.jb_init_ms
        med.jbMinPre = cfg.jb_min_pre_ms
        med.jbMaxPre = cfg.jb_max_pre_ms
        med.jbMax = cfg.jb_max_ms
        med.maxMediaPorts = max(64, 2 * ep_cfg.uaConfig.maxCalls + 16)
        self.ep.libInit(ep_cfg)
        pjsip_c.set_timers(cfg.t1_ms)
        if self.stamp_key is not None:
            pjsip_c.refuse_strangers(self._stranger_dropped)
        pjsip_c.watch_byes(self._on_bye)
        self.ep.audDevManager().setNullDev()
        self.metronome = stream_release.Metronome(cfg.sample_rate)
        self._set_codec_priorities()

        tcfg = pj.TransportConfig()
        tcfg.port = cfg.port
        tcfg.boundAddress = cfg.host
        if cfg.public_host:
            tcfg.publicAddress = cfg.public_host
        self.ep.transportCreate(pj.PJSIP_TRANSPORT_UDP, tcfg)
        self.ep.libStart()

        acfg = pj.AccountConfig()
        host = cfg.public_host or cfg.host
        # No user part: the Contact a caller sees names no product.
        acfg.idUri = f"sip:{host}:{cfg.port}"
        mtc = acfg.mediaConfig.transportConfig
        mtc.port = cfg.rtp_port_start
        mtc.portRange = cfg.rtp_port_range
        mtc.boundAddress = cfg.host
        if cfg.public_host:
            mtc.publicAddress = cfg.public_host
        # SRTP as callers offer it (SDES keys; the agent legs of bridges have a setting of
        # their own, see the agent account below).
        srtp.configure(acfg.mediaConfig, cfg.srtp)
        acfg.natConfig.iceEnabled = False
        acfg.natConfig.sdpNatRewriteUse = False
        acfg.natConfig.viaRewriteUse = False
        acfg.natConfig.contactRewriteUse = False
        self.account = _Account(self)
        self.account.create(acfg, True)
        self.agent_account = self.account
        if cfg.agent_srtp != cfg.srtp:
            # pjsua2 2.15.1 never called an AgentLeg's onCreateMediaTransportSrtp (tried),
            # so the agent legs' SRTP use needs an account of its own: same identity, lower
            # priority, so that incoming calls keep finding the first one.
            srtp.configure(acfg.mediaConfig, cfg.agent_srtp)
            acfg.priority = -1
            self.agent_account = _Account(self)
            self.agent_account.create(acfg, False)

    def _set_codec_priorities(self) -> None:
        wanted = [c.upper() for c in self.config.codecs]
        for codec in self.ep.codecEnum2():
            name = codec.codecId.split("/")[0].upper()
            prio = 255 - wanted.index(name) if name in wanted else 0
            self.ep.codecSetPriority(codec.codecId, prio)

    def _shutdown(self) -> None:
        """Hang up live calls and give the BYEs a moment to be answered."""
        for call in list(self.calls.values()):
            self._hangup(call)
        self.bridges.hangup_all()
        deadline = time.monotonic() + 2.0
        while (self.calls or self.bridges.legs) and time.monotonic() < deadline:
            self.ep.libHandleEvents(POLL_MS)
        self._drain()
        for call in list(self.calls.values()):
            self._close_media(call)

    def _destroy_lib(self) -> None:
        if self.ep is None:
            return
        # Every pjsua2 object must be freed here, on this thread, before libDestroy: a Call
        # or port finalised later (by the GC, on another thread) aborts the process. The
        # bridge's clock stops first: a media port freed while it ticks may be called back
        # through freed memory (``PortShelf``).
        try:
            self.ep.audDevManager().setNoDev()
        except pj.Error as exc:
            log.warning("stopping the media clock: %s", exc.info())
        self.calls.clear()
        self.bridges.legs.clear()
        self.graveyard.clear()
        self.ports.clear()
        self.metronome = None
        self.timers.clear()
        self.account = self.agent_account = None
        gc.collect()
        try:
            self.ep.libDestroy(pj.PJSUA_DESTROY_NO_NETWORK)
        except pj.Error as exc:
            log.warning("libDestroy: %s", exc.info())
        self.ep = None
        self.logger = None

    # call handling (endpoint thread) ------------------------------------------------
    def _live_calls(self) -> int:
        return sum(1 for c in self.calls.values() if not c.rejected and not c.disconnected)

    def on_incoming(self, prm: Any) -> None:
        call = SipCall(self, self.account, prm.callId)
        self.calls[prm.callId] = call
        call.sip_call_id = call.getInfo().callIdString
        try:
            message: str = prm.rdata.wholeMsg
        except UnicodeDecodeError:  # SWIG cannot hand over a non-UTF-8 message
            message = ""
        if self.stamp_key is not None and not front_token.stamped(
            self.stamp_key, message, call.sip_call_id
        ):
            self.counters["rejected_unstamped"] += 1
            self._reject(call, 403, "Forbidden", {})
            return
        defect = request_defect(message) if message else None
        if defect is not None:
            self.counters["rejected_malformed"] += 1
            self._reject(call, 400, defect, {})
            return
        if self._live_calls() > call_limit(self.config):
            self.counters["rejected_busy"] += 1
            self._reject(
                call, 503, "Service Unavailable", {"Retry-After": str(self.config.retry_after_s)}
            )
            return
        try:
            offer_ok = has_common_codec(sip_body(message), self.config.codecs)
        except ValueError:
            offer_ok = False
        if not offer_ok:
            self.counters["rejected_codec"] += 1
            self._reject(call, 488, "Not Acceptable Here", {})
            return
        if self.config.answer_delay_ms > 0:
            self._answer(call, 180)
            self.call_later(self.config.answer_delay_ms / 1000, lambda: self._answer(call, 200))
        else:
            self._answer(call, 200)

    def _stranger_dropped(self) -> None:
        self.counters["strangers_dropped"] += 1

    def _reject(self, call: SipCall, code: int, reason: str, headers: dict[str, str]) -> None:
        call.rejected = True
        op = pj.CallOpParam()
        op.statusCode = code
        op.reason = reason
        for name, value in headers.items():
            hdr = pj.SipHeader()
            hdr.hName = name
            hdr.hValue = value
            op.txOption.headers.append(hdr)
        # answer(), not hangup(): while pjsua still sets up the media transport it defers
        # the response, and a deferred hangup drops our extra headers (Retry-After).
        call.answer(op)

    def _answer(self, call: SipCall, code: int) -> None:
        if call.disconnected or call.local_hangup:
            return
        op = pj.CallOpParam()
        op.statusCode = code
        call.answer(op)
        if code == 200:
            call.answered = True
            self._await_ack(call)

    def _await_ack(self, call: SipCall) -> None:
        """Endpoint thread: end the call for its bot if its 200 OK is never ACKed.

        pjsip itself sends the BYE after 64*T1 (RFC 3261 13.3.1.4), but reports the call
        ended only once that BYE is over, another 64*T1 later when the caller has gone: so
        the call is ended here, just after pjsip gives up, and counted. The timer holds the
        call's ids, never the SipCall (see ``_make_hangup``).
        """
        pjsua_id, sip_call_id = int(call.getId()), call.sip_call_id

        def check() -> None:
            live = self.calls.get(pjsua_id)
            if live is None or live.sip_call_id != sip_call_id or live.disconnected:
                return
            if live.getInfo().state != pj.PJSIP_INV_STATE_CONNECTING:
                return  # ACKed (confirmed), or already ending
            self.counters["calls_unacked"] += 1
            log.warning("call %s: the 200 OK was never ACKed: call ended", sip_call_id)
            live.end_note = NO_ACK
            # pjsip tears the media down when its BYE is over: the stream goes first.
            self.release_stream(live)
            live.local_hangup = True  # pjsip's own BYE is under way: no second one
            live.sink.put(CallEnded(NO_ACK, True, time.monotonic()))
            self._report_ending()

        self.call_later(pjsip_c.transaction_s(self.config.t1_ms) + ACK_CHECK_MARGIN_S, check)

    def hangup_call(self, call: SipCall) -> None:
        """Endpoint thread: BYE (or a final response) on ``call``."""
        self._hangup(call)

    def _hangup(self, call: SipCall) -> None:
        if call.disconnected or call.local_hangup:
            return
        call.local_hangup = True
        op = pj.CallOpParam()
        op.statusCode = 200 if call.answered else 603
        self.release_stream(call)
        try:
            call.hangup(op)
        except pj.Error as exc:
            log.warning("hangup %s: %s", call.sip_call_id, exc.info())

    def release_stream(self, call: Any) -> None:
        """Endpoint thread: ``call``'s (a caller's or an agent leg's) audio stream out of
        the bridge, before anything ends its media (``telephony.stream_release``)."""
        if call.stream_released or call.disconnected:
            return
        call.stream_released = True
        try:
            index = int(call.getId())
        except pj.Error:
            return
        if stream_release.release(index, self.metronome):
            self.counters["streams_released"] += 1

    def _on_bye(self, call_id: str | None) -> None:
        """Endpoint thread, before pjsip acts on a BYE for ``call_id`` (None: its Call-ID
        could not be read, ``pjsip_c.watch_byes``: counted, and said once in the log, as
        every call then ends exposed to the race the release avoids)."""
        if call_id is None:
            if not self.counters["byes_unread"]:
                log.error(
                    "a BYE's Call-ID could not be read from pjsip's message: this pjproject's "
                    "rx_data layout is not the one telephony/pjsip_c.py reads; calls ended by "
                    "a BYE are torn down with their stream still in the bridge"
                )
            self.counters["byes_unread"] += 1
            return
        for call in list(self.calls.values()):
            if call.sip_call_id == call_id and not call.disconnected:
                self.release_stream(call)
                self._end_if_bye_failed(call)
        for leg in list(self.bridges.legs.values()):
            if leg.disconnected:
                continue
            try:
                leg_call_id = str(leg.getInfo().callIdString)
            except pj.Error:
                continue
            if leg_call_id == call_id:
                self.release_stream(leg)

    def _end_if_bye_failed(self, call: SipCall) -> None:
        """A BYE that named the call but did not end it (a wrong tag: pjsip answers 481)
        has taken its stream out of the bridge: the call cannot go on, so it is ended."""
        pjsua_id, sip_call_id = int(call.getId()), call.sip_call_id

        def check() -> None:
            live = self.calls.get(pjsua_id)
            if live is None or live.sip_call_id != sip_call_id or live.disconnected:
                return
            log.warning("call %s: a BYE that did not end it took its media: ended", sip_call_id)
            live.end_note = BYE_WITHOUT_END
            self._hangup(live)

        self.call_later(BYE_END_GRACE_S, check)

    def on_media_active(self, call: SipCall, idx: int, info: Any) -> None:
        call.aud_idx = idx
        if self.bridges.rewire(call):
            return  # re-INVITE of a bridged call: its media goes to the agent
        aud = call.getAudioMedia(idx)
        if call.port is None:
            call.port = self.ports.take(PcmPort, self.config.sample_rate, call.sink, call.playout)
        aud.startTransmit(call.port)
        call.port.startTransmit(aud)
        if call.handle is not None:
            return  # re-INVITE: media re-wired, same handle
        si = call.getStreamInfo(idx)
        tp = call.getMedTransportInfo(idx)
        call.handle = CallHandle(
            call_id=call.sip_call_id,
            remote_uri=info.remoteUri,
            local_uri=info.localUri,
            codec=f"{si.codecName}/{si.codecClockRate}",
            sample_rate=self.config.sample_rate,
            sink=call.sink,
            playout=call.playout,
            hangup=self._make_hangup(call),
            transfer=self._make_transfer(call),
            bridge=self._make_bridge(call),
            local_rtp_addr=str(tp.localRtpName),
            remote_rtp_addr=str(si.remoteRtpAddress),
        )
        self.counters["calls_total"] += 1
        self.loop.call_soon_threadsafe(self._spawn, call.handle)

    def _make_hangup(self, call: SipCall) -> Callable[[], Awaitable[None]]:
        # The closure must not hold the SipCall: a pjsua2 object freed later by asyncio's
        # garbage (on the wrong thread, or after libDestroy) aborts the process.
        pjsua_id, sip_call_id = int(call.getId()), call.sip_call_id

        def on_thread() -> None:
            live = self.calls.get(pjsua_id)
            if live is not None and live.sip_call_id == sip_call_id:
                self._hangup(live)

        async def hangup() -> None:
            await asyncio.wrap_future(self.submit(on_thread))

        return hangup

    def _make_transfer(self, call: SipCall) -> Transferrer:
        # As for hangup: the closures hold the call's ids, never the SipCall.
        pjsua_id, sip_call_id, loop = int(call.getId()), call.sip_call_id, self.loop
        allowed = self.config.transfer_targets

        async def transfer(target: str, timeout_s: float) -> TransferResult:
            if allowed and target not in allowed:  # the last check before the REFER
                log.warning(
                    "call %s: REFER to a target not in transfer_targets refused", sip_call_id
                )
                return TransferResult(False, 403, "transfer target not allowed")
            done: asyncio.Future[TransferResult] = loop.create_future()

            def settle(result: TransferResult) -> None:  # endpoint thread
                loop.call_soon_threadsafe(_settle, done, result)

            def on_thread() -> str | None:
                live = self.calls.get(pjsua_id)
                if live is None or live.sip_call_id != sip_call_id:
                    return "call ended"
                if live.disconnected or live.local_hangup:
                    return "call ended"
                if live.xfer_done is not None:
                    return "a transfer is already under way"
                live.xfer_done = settle
                try:
                    live.xfer(target, pj.CallOpParam(True))
                except pj.Error as exc:  # e.g. a target pjsip cannot parse
                    live.xfer_done = None
                    return f"REFER not sent: {exc.info()}"
                log.info("call %s: REFER sent", sip_call_id)
                return None

            def forget() -> None:
                live = self.calls.get(pjsua_id)
                if live is not None and live.xfer_done is settle:
                    live.xfer_done = None

            error = await asyncio.wrap_future(self.submit(on_thread))
            if error is not None:
                return TransferResult(False, 0, error)
            try:
                return await asyncio.wait_for(done, timeout_s)
            except TimeoutError:
                self.submit(forget)
                return TransferResult(False, 408, "no final transfer status in time")

        return transfer

    def _make_bridge(self, call: SipCall) -> Bridger:
        # As for hangup: the closures hold the call's ids, never the SipCall.
        pjsua_id, sip_call_id, loop = int(call.getId()), call.sip_call_id, self.loop
        allowed = self.config.transfer_targets

        async def bridge(target: str, timeout_s: float, summary: bytes) -> TransferResult:
            if allowed and target not in allowed:  # the last check before the INVITE
                log.warning(
                    "call %s: bridge to a target not in transfer_targets refused", sip_call_id
                )
                return TransferResult(False, 403, "transfer target not allowed")
            done: asyncio.Future[TransferResult] = loop.create_future()

            def settle(result: TransferResult) -> None:  # endpoint thread
                loop.call_soon_threadsafe(_settle, done, result)

            def on_thread() -> str | None:
                live = self.calls.get(pjsua_id)
                if live is None or live.sip_call_id != sip_call_id:
                    return "call ended"
                if live.disconnected or live.local_hangup:
                    return "call ended"
                return self.bridges.start(live, target, summary, timeout_s, settle)

            error = await asyncio.wrap_future(self.submit(on_thread))
            if error is not None:
                return TransferResult(False, 0, error)
            # The endpoint thread ends the attempt itself (no answer in timeout_s, then
            # CANCEL); the summary may play for up to MAX_SUMMARY_S after the answer.
            try:
                return await asyncio.wait_for(done, timeout_s + 30.0)
            except TimeoutError:
                return TransferResult(False, 408, "no outcome from the agent's leg in time")

        return bridge

    def on_transfer_status(self, call: SipCall, code: int, reason: str, final: bool) -> None:
        """pjsua reports the progress of the call's REFER (endpoint thread)."""
        log.info(
            "call %s: transfer status %d %s%s",
            call.sip_call_id,
            code,
            reason,
            " (final)" if final else "",
        )
        done = call.xfer_done
        if done is None or not (final or 200 <= code < 300):
            return  # nobody waiting, or progress (100 Accepted, 1xx NOTIFYs)
        call.xfer_done = None
        done(TransferResult(200 <= code < 300, code, reason))

    def _spawn(self, handle: CallHandle) -> None:
        """asyncio thread: run the application's call coroutine."""
        task = self.loop.create_task(self._run_on_call(handle), name=f"call-{handle.call_id}")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _run_on_call(self, handle: CallHandle) -> None:
        try:
            await self.on_call(handle)
        except Exception:
            log.exception("on_call failed for %s; hanging up", handle.call_id)
            await handle.hangup()

    def on_disconnected(self, call: SipCall, info: Any) -> None:
        code = int(info.lastStatusCode)
        if call.handle is not None:
            reason = call.end_note or f"{code} {info.lastReason}".strip()
            call.sink.put(CallEnded(reason, not call.local_hangup, time.monotonic()))
        elif not call.rejected:
            key = "calls_cancelled" if code == 487 else "calls_failed"
            self.counters[key] += 1
            call.sink.put(CallEnded(f"{code} {info.lastReason}", True, time.monotonic()))
        self._report_ending()  # before the CallEnded reaches the front as a freed slot
        if call.xfer_done is not None:
            done, call.xfer_done = call.xfer_done, None
            done(TransferResult(False, 0, "call ended"))
        self.bridges.on_caller_disconnected(call)
        self._close_media(call)
        self.calls.pop(int(info.id), None)
        # pjsua2 must not see its Call object freed inside its own callback.
        self.graveyard.append((time.monotonic() + PORT_GRACE_S, call))

    def on_caller_refer(self, call: SipCall, target: str) -> None:
        """Endpoint thread: the caller asked this node to call ``target`` (declined)."""
        self.counters["refer_refused"] += 1
        # The target is the caller's text: logged as a repr, cut short.
        log.warning(
            "call %s: the caller's REFER/Replaces to %r declined (the node places calls only "
            "for the bot's own transfers)",
            call.sip_call_id,
            target[:200],
        )

    def mute_suspects(self, addr: str) -> None:
        """Any thread: mute every call whose SDP peer is not ``addr`` until re-checked.

        The log line does not say which call switched; ``on_peer_switch`` (endpoint thread,
        some ms later) unmutes the calls that are not affected. Muting first means no frame
        from the stranger gets through in between.
        """
        if not self.config.strict_rtp_source:
            return
        for call in list(self.calls.values()):
            handle, port = call.handle, call.port
            if handle is not None and port is not None and handle.remote_rtp_addr != addr:
                port.muted = True

    def on_peer_switch(self, addr: str) -> None:
        """pjmedia latched some call's RTP onto ``addr``: re-check every call's source.

        The log line names the transport, not the call, so each call's last RTP source is
        compared with the address its SDP gave; a call hearing a foreign source is muted
        (``strict_rtp_source``) until pjmedia switches back to the SDP peer.
        """
        calls = [c for c in self.calls.values() if c.handle is not None and c.port is not None]
        if all(addr != c.handle.remote_rtp_addr for c in calls if c.handle is not None):
            self.counters["rtp_foreign_switches"] += 1
        for call in calls:
            assert call.handle is not None and call.port is not None
            src = self._rtp_source(call)
            foreign = src is not None and src != call.handle.remote_rtp_addr
            if foreign and not call.port.muted:
                log.warning(
                    "call %s: RTP accepted from %s, not the SDP peer %s%s",
                    call.sip_call_id,
                    src,
                    call.handle.remote_rtp_addr,
                    " (muted)" if self.config.strict_rtp_source else "",
                )
            if self.config.strict_rtp_source:
                call.port.muted = foreign

    @staticmethod
    def _rtp_source(call: SipCall) -> str | None:
        info = call.getInfo()  # keep it alive: info.media points into it
        for idx, media in enumerate(info.media):
            if media.type == pj.PJMEDIA_TYPE_AUDIO and media.status != pj.PJSUA_CALL_MEDIA_NONE:
                src = str(call.getMedTransportInfo(idx).srcRtpName)
                return src if src and not src.startswith("0.0.0.0") else None
        return None

    def _close_media(self, call: SipCall) -> None:
        port = call.port
        if port is None or port.closed:
            return
        port.closed = True
        self._refresh_stream_stats(call)
        for key, value in (
            ("rtp_frames_in", port.frames_in),
            ("rtp_frames_out", port.frames_out),
            ("playout_underruns", call.playout.underruns),
            ("rtp_frames_muted", port.frames_muted),
            ("inbound_frames_dropped", call.sink.dropped),
        ):
            self.counters[key] += value
        self.graveyard.append((time.monotonic() + PORT_GRACE_S, port))
        call.port = None  # shelved after the grace, and then another call's

    def _refresh_stream_stats(self, call: SipCall) -> None:
        if call.port is None or call.port.closed or call.disconnected:
            return
        try:
            info = call.getInfo()  # keep it alive: info.media points into it
        except pj.Error:
            # Its INVITE session ended before pjsua told us (the DISCONNECTED callback is
            # still to come, and folds the counters in): an error here must not end the
            # endpoint thread, and every other call with it.
            return
        for idx, media in enumerate(info.media):
            if media.type == pj.PJMEDIA_TYPE_AUDIO and media.status != pj.PJSUA_CALL_MEDIA_NONE:
                self.collect_stream_stats(call, idx)
                return

    def collect_stream_stats(self, call: SipCall, idx: int) -> None:
        """Fold the stream's RTCP counters into the totals (delta since last look)."""
        try:
            st = call.getStreamStat(idx)
        except pj.Error:
            return
        rx, tx = st.rtcp.rxStat, st.rtcp.txStat
        for attr, key, value in (
            ("rx_pkt_seen", "rtp_packets_in", int(rx.pkt)),
            ("tx_pkt_seen", "rtp_packets_out", int(tx.pkt)),
            ("rx_discard_seen", "rtp_discarded", int(rx.discard)),
        ):
            prev = getattr(call, attr, 0)
            if value > prev:
                self.counters[key] += value - prev
                setattr(call, attr, value)

    def live_counters(self) -> dict[str, int]:
        out = dict(self.counters)
        live = [c for c in list(self.calls.values()) if c.port is not None and not c.port.closed]
        out["calls_active"] = len(live)
        for call in live:
            assert call.port is not None
            out["rtp_frames_in"] += call.port.frames_in
            out["rtp_frames_out"] += call.port.frames_out
            out["playout_underruns"] += call.playout.underruns
            out["rtp_frames_muted"] += call.port.frames_muted
            out["inbound_frames_dropped"] += call.sink.dropped
        return out


class SipEndpoint:
    """A SIP/RTP endpoint that answers calls and hands each one to ``on_call``."""

    def __init__(
        self,
        config: EndpointConfig,
        on_call: OnCall,
        *,
        on_ending: Callable[[int], None] | None = None,
        stamp_key: bytes | None = None,
    ) -> None:
        self.config = config
        #: Behind a front (a worker): new calls only with its stamp (``front_token``), and
        #: nothing else from outside a dialog.
        self.stamp_key = stamp_key
        self._on_call = on_call
        self._on_ending = on_ending  # see _Core.on_ending
        self._core: _Core | None = None
        self._thread: threading.Thread | None = None
        self._final = dict.fromkeys(STAT_KEYS, 0)

    async def start(self) -> None:
        """Start the endpoint thread; returns once the UDP transport is listening.

        pjsua2 holds one library instance per process: a second running ``SipEndpoint``
        in the same process is refused.
        """
        if self._thread is not None:
            raise EndpointError("endpoint already started")
        if not _PROCESS_SLOT.acquire(blocking=False):
            raise EndpointError(
                "another SipEndpoint is running in this process (pjsua2 allows one)"
            )
        try:
            await self._start()
        except BaseException:
            _PROCESS_SLOT.release()
            raise

    async def _start(self) -> None:
        loop = asyncio.get_running_loop()
        core = _Core(self.config, self._on_call, loop)
        core.on_ending = self._on_ending
        core.stamp_key = self.stamp_key
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        thread = threading.Thread(target=core.run, args=(ready,), name="sip-endpoint", daemon=True)
        self._core, self._thread = core, thread
        thread.start()
        try:
            await asyncio.wrap_future(ready)
        except BaseException:  # failed, or cancelled while starting: do not leave it running
            core.stop_requested.set()
            await asyncio.to_thread(thread.join, 5.0)
            self._core = self._thread = None
            raise

    async def stop(self, timeout_s: float = 10.0) -> None:
        """Hang up live calls, destroy the pjsua2 library, join the thread."""
        core, thread = self._core, self._thread
        if core is None or thread is None:
            return
        core.stop_requested.set()
        await asyncio.to_thread(thread.join, timeout_s)
        if thread.is_alive():
            log.error("SIP endpoint thread did not stop within %.1f s", timeout_s)
        for task in list(core.tasks):
            task.cancel()
        self._final = core.live_counters()
        self._core = self._thread = None
        if not thread.is_alive():
            _PROCESS_SLOT.release()

    async def run(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the endpoint thread (where pjsua2 may be called) and await it."""
        if self._core is None:
            raise EndpointError("endpoint not started")
        return await asyncio.wrap_future(self._core.submit(fn))

    async def media_ports(self) -> tuple[int, int]:
        """(ports made, ports free on the shelf): media ports serve call after call."""
        if self._core is None:
            raise EndpointError("endpoint not started")
        core = self._core
        return await self.run(lambda: (core.ports.made, core.ports.free_count()))

    @property
    def call_limit(self) -> int:
        """Calls this endpoint answers at once (``max_calls`` capped by the pjsua2 build)."""
        return call_limit(self.config)

    @property
    def active_calls(self) -> int:
        """Calls with media up and not yet ended."""
        return self.stats()["calls_active"]

    def stats(self) -> dict[str, int]:
        """Counters since start (see ``STAT_KEYS``)."""
        if self._core is None:
            return dict(self._final)
        return self._core.live_counters()
