"""Calls and turns found on the wire: a capture's SIP and RTP grouped per call, and each
scripted question with the bot's answer to it.

Every time is the capture's clock (``time.monotonic()`` seconds of the packet's arrival on
the loopback interface). A packet counts as voiced by the same measure as a recording's
20 ms frame (``testkit.wire``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from testkit.question_script import ScriptTurn
from testkit.rtp_capture import Addr, Packet, decode, parse_rtp, parse_sip
from testkit.wire import FRAME_MS, is_voiced

#: G.711's RTP clock: one timestamp tick per sample.
RATE = 8000
FRAME_SAMPLES = RATE * FRAME_MS // 1000
#: A bot packet arriving this long after the previous one on its 20 ms stream is late.
LATE_GAP_S = 0.040
#: Bot audio this close before the end of the caller's question: the bot was talking over it.
OVERLAP_S = 0.2
#: How far outside its scripted place a question's voiced packets may be found.
SLACK_S = 0.5


@dataclass
class Media:
    """One direction of a call's RTP, packet by packet (seq and timestamp unwrapped)."""

    t: npt.NDArray[np.float64]
    seq: npt.NDArray[np.int64]
    ts: npt.NDArray[np.int64]
    voiced: npt.NDArray[np.bool_]
    payload_types: frozenset[int]

    @classmethod
    def empty(cls) -> Media:
        return cls.build([])

    @classmethod
    def build(cls, packets: Sequence[tuple[float, int, int, bool, int]]) -> Media:
        """From (arrival, seq, timestamp, voiced, payload type) in arrival order."""
        rows = list(packets)
        return cls(
            t=np.asarray([r[0] for r in rows], dtype=np.float64),
            seq=_unwrap(np.asarray([r[1] for r in rows], dtype=np.int64), 1 << 16),
            ts=_unwrap(np.asarray([r[2] for r in rows], dtype=np.int64), 1 << 32),
            voiced=np.asarray([r[3] for r in rows], dtype=np.bool_),
            payload_types=frozenset(r[4] for r in rows),
        )

    def __len__(self) -> int:
        return len(self.t)

    def first_voiced(self, after: float, before: float = np.inf) -> float | None:
        """Arrival of the first voiced packet in (after, before)."""
        hit = np.flatnonzero(self.voiced & (self.t > after) & (self.t < before))
        return float(self.t[hit[0]]) if len(hit) else None

    def voiced_between(self, start: float, end: float) -> bool:
        return bool((self.voiced & (self.t >= start) & (self.t <= end)).any())

    def longest_silence(self, after: float, before: float = np.inf) -> float | None:
        """The longest stretch in (after, last voiced packet before ``before``) with no
        voiced packet: how long a listener waited in silence. None: nothing voiced."""
        hit = self.t[self.voiced & (self.t > after) & (self.t < before)]
        if not len(hit):
            return None
        return float(np.diff(np.concatenate(([after], hit))).max())


def _unwrap(values: npt.NDArray[np.int64], modulus: int) -> npt.NDArray[np.int64]:
    """A wrapping counter as a monotone-ish one (steps taken as the shortest way round)."""
    if len(values) < 2:
        return values
    step = np.diff(values)
    step = (step + modulus // 2) % modulus - modulus // 2
    return np.concatenate(([values[0]], values[0] + np.cumsum(step)))


@dataclass
class WireCall:
    """One call as seen on the wire."""

    call_id: str
    caller_sip: Addr
    invite_at: float
    status: int | None = None  # final status of the INVITE
    answered_at: float | None = None  # the 200 OK reached the caller
    caller_audio: Addr | None = None  # SDP of the INVITE
    bot_audio: Addr | None = None  # SDP of the 200 OK
    bye_at: float | None = None
    bye_by_bot: bool = False
    up: Media = field(default_factory=Media.empty)  # caller -> bot
    down: Media = field(default_factory=Media.empty)  # bot -> caller

    def late_packets(self, gap_s: float = LATE_GAP_S) -> int:
        """Bot packets that came more than ``gap_s`` after the previous one of the stream.

        Only pairs that are consecutive in both sequence number and timestamp count: a gap the
        sender meant (silence suppression, a new talk spurt) is not lateness.
        """
        d = self.down
        if len(d) < 2:
            return 0
        frame = np.diff(d.ts)
        steady = (np.diff(d.seq) == 1) & (frame > 0) & (frame <= FRAME_SAMPLES)
        return int((steady & (np.diff(d.t) > gap_s)).sum())

    def lost_packets(self) -> int:
        """Bot packets missing from the sequence."""
        if len(self.down) < 2:
            return 0
        return int(np.clip(np.diff(np.sort(self.down.seq)) - 1, 0, None).sum())


def calls_on_wire(packets: Iterable[Packet], bot_sip_port: int) -> dict[str, WireCall]:
    """Calls to the bot's SIP port, with their RTP in both directions, from a capture."""
    calls: dict[str, WireCall] = {}
    media: list[Packet] = []
    for p in packets:
        sip = parse_sip(p.payload)
        if sip is None or sip.call_id is None:
            media.append(p)
            continue
        call = calls.get(sip.call_id)
        if sip.method == "INVITE" and p.dst[1] == bot_sip_port:
            if call is None:
                call = calls[sip.call_id] = WireCall(sip.call_id, p.src, p.t)
            if sip.audio is not None and call.caller_audio is None:
                call.caller_audio = sip.audio
        elif call is None:
            continue
        elif sip.status is not None and sip.cseq_method == "INVITE" and p.dst == call.caller_sip:
            if sip.status >= 200 and call.status is None:
                call.status = sip.status
                if sip.status < 300:
                    call.answered_at = p.t
                    call.bot_audio = sip.audio
        elif sip.method == "BYE" and call.bye_at is None:
            call.bye_at = p.t
            call.bye_by_bot = p.src != call.caller_sip
    _attach_media(calls, media)
    return calls


def _attach_media(calls: dict[str, WireCall], media: Iterable[Packet]) -> None:
    """Each RTP packet to the call whose negotiated address it was sent to, at that time."""
    by_dst: dict[Addr, list[tuple[WireCall, bool]]] = {}
    for call in calls.values():
        if call.caller_audio is not None and call.bot_audio is not None:
            by_dst.setdefault(call.bot_audio, []).append((call, True))
            by_dst.setdefault(call.caller_audio, []).append((call, False))
    rows: dict[tuple[str, bool], list[tuple[float, int, int, bool, int]]] = {}
    for p in media:
        candidates = by_dst.get(p.dst)
        if not candidates:
            continue
        rtp = parse_rtp(p.payload)
        if rtp is None:
            continue
        owner = None
        for call, up in candidates:  # a port may be reused by a later call
            if call.invite_at <= p.t and (call.bye_at is None or p.t <= call.bye_at + 2.0):
                owner = (call, up)
        if owner is None:
            continue
        samples = decode(rtp)
        voiced = samples is not None and is_voiced(samples)
        key = (owner[0].call_id, owner[1])
        rows.setdefault(key, []).append((p.t, rtp.seq, rtp.timestamp, voiced, rtp.payload_type))
    for (call_id, up), packets in rows.items():
        if up:
            calls[call_id].up = Media.build(packets)
        else:
            calls[call_id].down = Media.build(packets)


@dataclass(frozen=True)
class WireTurn:
    """One scripted question and the bot's answer, on the wire (capture clock, seconds)."""

    index: int
    caller_start: float | None  # first voiced packet of the question
    caller_end: float | None  # last voiced packet of the question
    bot_start: float | None  # first voiced bot packet after it
    overlapped: bool  # the bot was talking when the question ended
    #: The longest the caller heard nothing from the question's end to the answer's end
    #: (fillers break the wait; the answer's own pauses count too).
    silence_s: float | None = None

    @property
    def v2v_ms(self) -> float | None:
        if self.caller_end is None or self.bot_start is None or self.overlapped:
            return None
        return (self.bot_start - self.caller_end) * 1000


def greeting_ms(call: WireCall) -> float | None:
    """200 OK on the wire to the bot's first voiced packet."""
    if call.answered_at is None:
        return None
    first = call.down.first_voiced(call.answered_at)
    return None if first is None else (first - call.answered_at) * 1000


def measure_turns(call: WireCall, script: Sequence[ScriptTurn]) -> list[WireTurn]:
    """Find each scripted question in the caller's packets, and the bot's answer after it.

    The caller's RTP timestamps place every packet in the script (8 kHz, one tick per
    sample), aligned on the first voiced packet, which is the first voiced frame of the
    first question. A question's voiced packets are the ones within its scripted span (plus
    ``SLACK_S``), so pauses inside it do not split it.
    """
    up = call.up
    voiced = np.flatnonzero(up.voiced)
    if not len(script) or not len(voiced):
        return [WireTurn(i, None, None, None, False) for i in range(len(script))]
    pos = (up.ts - up.ts[0]) / RATE
    offset = pos[voiced[0]] - script[0].start_s
    spans = []
    for turn in script:
        inside = voiced[
            (pos[voiced] >= turn.start_s + offset - SLACK_S)
            & (pos[voiced] <= turn.end_s + offset + SLACK_S)
        ]
        spans.append((float(up.t[inside[0]]), float(up.t[inside[-1]])) if len(inside) else None)
    end_of_call = call.bye_at if call.bye_at is not None else np.inf
    out = []
    for i, span in enumerate(spans):
        if span is None:
            out.append(WireTurn(i, None, None, None, False))
            continue
        later = [s[0] for s in spans[i + 1 :] if s is not None]
        before = later[0] if later else end_of_call
        start, end = span
        out.append(
            WireTurn(
                index=i,
                caller_start=start,
                caller_end=end,
                bot_start=call.down.first_voiced(end, before),
                overlapped=call.down.voiced_between(end - OVERLAP_S, end),
                silence_s=call.down.longest_silence(end, before),
            )
        )
    return out
