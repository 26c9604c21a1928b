"""Bridged transfer: a second call from this endpoint to an agent, joined to the caller.

For a far end that does not take REFER, the worker calls the target itself (``AgentLeg``)
and, once the agent has answered, joins the two calls in pjsua's conference bridge:
caller audio -> agent, agent audio -> caller. The caller's ``PcmPort`` is taken out of the
bridge then, so the bot neither hears nor speaks on the call any more.

Warm handoff: with a ``summary`` (PCM at the endpoint's rate), the agent first hears it on
a port of its own, and the caller is joined when it has played out.

Slots: the pjsua2 wheel holds ``WHEEL_MAX_CALLS`` (4) calls a process and a worker answers
at most 3; the agent leg takes the fourth. So a worker holds one bridged transfer at a
time: a second one while the first is up fails at once ("no free call slot") and the bot
says so. While a leg holds the spare slot, an INVITE reaching the worker beyond its 3 calls
is refused by pjsua (486) instead of our 503; the front does not send one there (it counts
the worker full at 3).

The two calls stay up until either side hangs up; the other then gets a BYE. The caller's
``CallEnded`` then says why: ``agent hung up``, or the caller's own hang-up.

Everything here runs on the endpoint thread (pjsua2 rules, see ``telephony.endpoint``).
"""

from __future__ import annotations

import concurrent.futures
import logging
import weakref
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import pjsua2 as pj

from telephony.call import SipCall
from telephony.config import EndpointConfig
from telephony.events import TransferResult
from telephony.framebuf import pcm_port_format, write_frame
from telephony.media_port import PlayoutBuffer, PortShelf

T = TypeVar("T")


class BridgeCore(Protocol):
    """What the agent legs use of the endpoint that owns them (``telephony.endpoint._Core``),
    on the endpoint thread."""

    config: EndpointConfig
    agent_account: Any
    calls: dict[int, SipCall]
    ports: PortShelf

    @property
    def bridges(self) -> Bridges: ...

    def submit(self, fn: Callable[[], T]) -> concurrent.futures.Future[T]: ...

    def call_later(self, delay_s: float, fn: Callable[[], None]) -> None: ...

    def graveyard_add(self, obj: object) -> None: ...

    def hangup_call(self, call: SipCall) -> None: ...

    def release_stream(self, call: Any) -> None: ...


log = logging.getLogger(__name__)

#: The longest summary a warm handoff plays to the agent (seconds); longer is cut.
MAX_SUMMARY_S = 20.0
#: After the summary's own length, how long to wait for its playout before joining anyway.
SUMMARY_SLACK_S = 2.0
#: Why the caller's leg ended, when the agent ended it.
AGENT_HUNG_UP = "agent hung up"

Settle = Callable[[TransferResult], None]


class _SummaryPort(pj.AudioMediaPort):  # type: ignore[misc]
    """Plays a ``PlayoutBuffer`` to the agent; what the agent says here is not kept."""

    def __init__(self, playout: PlayoutBuffer) -> None:
        super().__init__()
        self.reuse(playout)

    def reuse(self, playout: PlayoutBuffer) -> None:
        """Serve another agent leg (one port serves leg after leg: ``PortShelf``)."""
        self._playout = playout
        self._silence = bytes(playout.frame_bytes)
        self.closed = False

    def create(self, name: str, sample_rate: int) -> None:
        self.createPort(name, pcm_port_format(sample_rate))

    def onFrameReceived(self, frame: Any) -> None:
        pass

    def onFrameRequested(self, frame: Any) -> None:
        pcm = None if self.closed else self._playout.pop()
        write_frame(frame, self._silence if pcm is None else pcm)


class AgentLeg(pj.Call):  # type: ignore[misc]
    """The outbound call to the agent (endpoint thread)."""

    def __init__(self, core: BridgeCore, account: Any, caller: SipCall, summary: bytes) -> None:
        super().__init__(account)
        self.core = core  # the Bridges' weak proxy: no cycle through the core
        # Ids, not the SipCall: the two are freed separately, on this thread.
        self.caller_pjsua_id = int(caller.getId())
        self.caller_sip_id = caller.sip_call_id
        self.summary = summary
        self.playout = PlayoutBuffer(core.config.frame_bytes)
        self.port: _SummaryPort | None = None
        self.aud_idx: int | None = None
        self.settle: Settle | None = None
        self.confirmed = False
        self.started = False  # summary playing, or joined
        self.joined = False
        self.timed_out = False
        self.disconnected = False
        self.local_hangup = False
        self.stream_released = False  # see telephony.stream_release
        self.target = ""

    def onCallState(self, prm: Any) -> None:
        info = self.getInfo()
        if info.state == pj.PJSIP_INV_STATE_CONFIRMED and not self.confirmed:
            self.confirmed = True
            self.core.bridges.go(self)
        elif info.state == pj.PJSIP_INV_STATE_DISCONNECTED and not self.disconnected:
            self.disconnected = True
            self.core.bridges.on_leg_disconnected(self, int(info.lastStatusCode), info)

    def onCallMediaState(self, prm: Any) -> None:
        info = self.getInfo()
        for idx, media in enumerate(info.media):
            if media.type == pj.PJMEDIA_TYPE_AUDIO and media.status == pj.PJSUA_CALL_MEDIA_ACTIVE:
                self.aud_idx = idx
                self.core.bridges.on_leg_media(self)
                return

    def onCallRedirected(self, prm: Any) -> int:
        # A 3xx from the agent's side would have the node dial an address no operator listed.
        log.warning("bridge leg to %s: redirect to %s refused", self.target, prm.targetUri)
        return int(pj.PJSIP_REDIRECT_REJECT)

    def onCallTransferRequest(self, prm: Any) -> None:
        # Neither may the agent's side REFER the node's leg elsewhere.
        log.warning("bridge leg to %s: REFER to %s declined", self.target, prm.dstUri)
        prm.statusCode = pj.PJSIP_SC_DECLINE

    def onCallReplaceRequest(self, prm: Any) -> None:
        prm.statusCode = pj.PJSIP_SC_FORBIDDEN


class Bridges:
    """The endpoint's bridged transfers: agent legs by pjsua call id."""

    def __init__(self, core: BridgeCore) -> None:
        self.core: BridgeCore = core if isinstance(core, weakref.ProxyType) else weakref.proxy(core)
        self.legs: dict[int, AgentLeg] = {}

    def start(
        self, caller: SipCall, target: str, summary: bytes, timeout_s: float, settle: Settle
    ) -> str | None:
        """Call ``target`` for ``caller``; None when the INVITE is out, else why not."""
        core = self.core
        if caller.leg is not None and not caller.leg.disconnected:
            return "a bridged transfer is already under way"
        if caller.aud_idx is None:
            return "the call has no audio"
        rate = core.config.sample_rate
        summary = summary[: int(MAX_SUMMARY_S * rate) * 2]
        # Placed from the agent account: its SRTP use is ``agent_srtp`` (plain by default).
        leg = AgentLeg(core, core.agent_account, caller, summary)
        leg.target = target
        leg.settle = settle
        try:
            leg.makeCall(target, pj.CallOpParam(True))
        except pj.Error as exc:
            # PJ_ETOOMANY: the spare slot is held by another bridge (see the module notes)
            detail = "no free call slot" if "TOOMANY" in exc.info().upper() else exc.info()
            leg.settle = None
            self.core.graveyard_add(leg)
            return f"agent call not placed: {detail}"
        self.legs[int(leg.getId())] = leg
        caller.leg = leg
        log.info("call %s: calling the agent for a bridged transfer", caller.sip_call_id)
        core.call_later(timeout_s, self._later(leg, self._no_answer))
        return None

    @staticmethod
    def _later(leg: AgentLeg, fn: Callable[[AgentLeg], None]) -> Callable[[], None]:
        """``fn(leg)`` for a timer, holding the leg weakly: a pjsua2 Call must be freed by
        the graveyard (``telephony.endpoint._Core._id_reused``), never as the last
        reference of a timer."""
        ref = weakref.ref(leg)

        def run() -> None:
            live = ref()
            if live is not None:
                fn(live)

        return run

    def _no_answer(self, leg: AgentLeg) -> None:
        if leg.confirmed or leg.disconnected:
            return
        leg.timed_out = True
        self.hangup(leg)

    def hangup(self, leg: AgentLeg) -> None:
        if leg.disconnected or leg.local_hangup:
            return
        leg.local_hangup = True
        op = pj.CallOpParam()
        op.statusCode = 200 if leg.confirmed else 603
        self.core.release_stream(leg)
        try:
            leg.hangup(op)
        except pj.Error as exc:
            log.warning("agent leg hangup: %s", exc.info())

    def on_leg_media(self, leg: AgentLeg) -> None:
        if leg.joined:  # re-INVITE of the agent's leg: wire it to the caller again
            caller = self._caller(leg)
            if caller is not None and caller.aud_idx is not None and leg.aud_idx is not None:
                self._connect(caller, leg)
            return
        self.go(leg)

    def go(self, leg: AgentLeg) -> None:
        """Once answered with media: the summary first (warm), else join at once."""
        if leg.started or not leg.confirmed or leg.aud_idx is None or leg.disconnected:
            return
        leg.started = True
        if not leg.summary:
            self.join(leg)
            return
        port = self.core.ports.take(_SummaryPort, self.core.config.sample_rate, leg.playout)
        leg.port = port
        port.startTransmit(leg.getAudioMedia(leg.aud_idx))
        core, join = self.core, self._later(leg, self.join)

        def drained() -> None:  # clock thread: the join is made on the endpoint thread
            core.submit(join)

        leg.playout.set_drained_callback(drained)
        leg.playout.push(leg.summary)
        seconds = len(leg.summary) / 2 / core.config.sample_rate
        core.call_later(seconds + SUMMARY_SLACK_S, join)

    def join(self, leg: AgentLeg) -> None:
        """Caller <-> agent; the bot's port out of the caller's call."""
        if leg.joined or leg.disconnected:
            return
        leg.playout.set_drained_callback(None)
        caller = self._caller(leg)
        if caller is None or caller.aud_idx is None:
            self._settle(leg, TransferResult(False, 0, "call ended"))
            self.hangup(leg)
            return
        if leg.port is not None:
            leg.port.closed = True
            leg.port.stopTransmit(leg.getAudioMedia(leg.aud_idx))
        self._connect(caller, leg)
        leg.joined = True
        log.info("call %s: bridged to the agent", caller.sip_call_id)
        self._settle(leg, TransferResult(True, 200, "bridged"))

    def _connect(self, caller: SipCall, leg: AgentLeg) -> None:
        assert caller.aud_idx is not None and leg.aud_idx is not None
        c_aud = caller.getAudioMedia(caller.aud_idx)
        a_aud = leg.getAudioMedia(leg.aud_idx)
        port = caller.port
        if port is not None:
            port.bridged = True  # the bot hears and says nothing more on this call
            c_aud.stopTransmit(port)
            port.stopTransmit(c_aud)
        c_aud.startTransmit(a_aud)
        a_aud.startTransmit(c_aud)

    def on_leg_disconnected(self, leg: AgentLeg, code: int, info: Any) -> None:
        self.legs.pop(int(info.id), None)
        leg.playout.set_drained_callback(None)
        if leg.port is not None:
            leg.port.closed = True
            self.core.graveyard_add(leg.port)
            leg.port = None
        self.core.graveyard_add(leg)
        if not leg.joined:
            caller = self._caller(leg)
            if caller is not None and caller.leg is leg:
                caller.leg = None
            if leg.timed_out:
                result = TransferResult(False, 408, "the agent did not answer in time")
            elif leg.local_hangup:
                result = TransferResult(False, 0, "call ended")
            elif leg.confirmed:  # answered, then gone during the summary
                result = TransferResult(False, 0, "the agent hung up before the caller joined")
            else:
                result = TransferResult(False, code, str(info.lastReason))
            log.info("call %s: agent leg failed: %d %s", leg.caller_sip_id, code, info.lastReason)
            self._settle(leg, result)
            return
        caller = self._caller(leg)
        if caller is not None and caller.leg is leg:
            caller.leg = None
        if caller is not None and not leg.local_hangup:
            log.info("call %s: the agent hung up; ending the caller's leg", leg.caller_sip_id)
            caller.end_note = AGENT_HUNG_UP
            self.core.hangup_call(caller)

    def on_caller_disconnected(self, caller: SipCall) -> None:
        """The caller's call ended: the agent's leg goes too (BYE, or CANCEL if ringing)."""
        leg, caller.leg = caller.leg, None  # self.legs holds it until it has ended
        if leg is None:
            return
        if not leg.joined:
            self._settle(leg, TransferResult(False, 0, "call ended"))
        self.hangup(leg)

    def rewire(self, caller: SipCall) -> bool:
        """A re-INVITE re-made the caller's media: True if it belongs to the agent now."""
        leg = caller.leg
        if leg is None or not leg.joined or leg.disconnected or leg.aud_idx is None:
            return False
        self._connect(caller, leg)
        return True

    def hangup_all(self) -> None:
        for leg in list(self.legs.values()):
            self.hangup(leg)

    def _caller(self, leg: AgentLeg) -> SipCall | None:
        caller = self.core.calls.get(leg.caller_pjsua_id)
        if caller is None or caller.sip_call_id != leg.caller_sip_id or caller.disconnected:
            return None
        return caller

    @staticmethod
    def _settle(leg: AgentLeg, result: TransferResult) -> None:
        settle, leg.settle = leg.settle, None
        if settle is not None:
            settle(result)
