"""Voice-to-voice latency on the wire: real SIP clients, measured from the packets.

Starts a bot node (``switchboard run``) on a free loopback port and captures the loopback
interface (raw socket: needs root). For each concurrency level it runs that many baresip
callers at once; each plays a script: silence while the greeting plays, then questions, each
followed by silence long enough for the answer. From the captured SIP and RTP:

- greeting delay: the 200 OK to the INVITE, to the bot's first voiced RTP packet;
- voice-to-voice per turn: the caller's last voiced RTP packet of a scripted question, to the
  bot's first voiced RTP packet after it (the arrival time of each packet on the loopback);
- late packets: the bot's RTP packets that arrived more than 40 ms after the one before on
  the 20 ms stream (consecutive sequence numbers and timestamps);
- dropped calls: not answered, a question left unanswered, or hung up before the script ended.

Each turn's route (intent cache or LLM) and the bot's own stage times come from the bot's
call log (SQLite in its data folder), joined to the wire by SIP Call-ID and turn order.

    .venv/bin/python -m bench.v2v_wire --concurrency 1,5,10,20 --turns-per-call 3 \\
        --route both [--write]

``--write`` writes ``docs/latency.md`` and ``docs/latency.png`` (needs matplotlib).
``--cpu-limit 1`` runs it all on one core's worth of CPU (``bench/cpu_limit.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import functools
import itertools
import os
import pickle
import platform
import random
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from bench.botproc import ROOT, run_bot
from bench.cpu_limit import CpuLimitUnavailable, cpu_limit
from bench.ports import free_udp_port
from bench.rtp_capture import Addr, Capture, Packet, PortFilter, decode, parse_rtp, parse_sip
from bench.voice_to_voice import CACHE_QUESTIONS, OPEN_QUESTIONS
from bench.wire import FRAME_MS, is_voiced, percentile, voiced_frames
from bot.caller_voice import FLITE_VOICES, speak, write_wav
from bot.calllog.models import Call, CallEvent, TurnRow
from bot.settings import DEFAULT_PROFILE
from bot.turn import STAGES as LOG_STAGES
from serve.bench import wer

RATE = 8000
FRAME_SAMPLES = RATE * FRAME_MS // 1000
#: A bot packet arriving this long after the previous one on its 20 ms stream is late.
LATE_GAP_S = 0.040
#: Bot audio this close before the end of the caller's question: the bot was talking over it.
OVERLAP_S = 0.2
#: How far outside its scripted place a question's voiced packets may be found.
SLACK_S = 0.5
CACHE_ROUTES = frozenset({"exact", "semantic"})
#: Bot stage durations, in the order they happen (ms).
STAGES = ("eot_wait", "asr", "lookup", "first_token", "first_audio")
STAGE_TITLES = {
    "eot_wait": "eot wait",
    "asr": "ASR",
    "lookup": "lookup",
    "first_token": "first token",
    "first_audio": "first audio",
}


def machine_note() -> str:
    """The kind of machine, as the report states it ("2-core CPU, no GPU")."""
    gpu = "no GPU" if shutil.which("nvidia-smi") is None else "a GPU the CPU defaults leave idle"
    return f"{os.cpu_count()}-core CPU, {gpu}"


# --------------------------------------------------------------------------- the script


@dataclass(frozen=True)
class ScriptTurn:
    """One question in a caller's script; times are seconds from the start of the script."""

    text: str
    planned: str  # "cache" or "llm": the route the question was chosen for
    start_s: float  # first voiced frame
    end_s: float  # end of the last voiced frame


@dataclass(frozen=True)
class Script:
    """What one caller says, as 8 kHz audio, and where each question is in it."""

    voice: str
    turns: tuple[ScriptTurn, ...]
    pcm: bytes

    @property
    def seconds(self) -> float:
        return len(self.pcm) / 2 / RATE


def voiced_bounds(pcm: bytes) -> tuple[float, float]:
    """(first, end of last) voiced 20 ms frame of 8 kHz PCM, in seconds."""
    voiced = np.flatnonzero(voiced_frames(np.frombuffer(pcm, "<i2")))
    if not len(voiced):
        raise ValueError("no voiced audio in utterance")
    return float(voiced[0] * FRAME_MS / 1000), float((voiced[-1] + 1) * FRAME_MS / 1000)


def build_script(
    questions: Sequence[tuple[str, str]],
    voice: str,
    *,
    lead_s: float,
    answer_window_s: float,
    say: Callable[[str, str], bytes] = lambda text, voice: speak(text, voice=voice),
    think_s: Callable[[], float] = lambda: 0.0,
) -> Script:
    """Silence for the greeting, then each (text, planned route) and silence for its answer
    (``answer_window_s``, plus ``think_s()`` more: callers who take their time)."""
    parts = [bytes(int(lead_s * RATE) * 2)]
    at = int(lead_s * RATE) / RATE
    turns = []
    for text, planned in questions:
        pcm = say(text, voice)
        first, last = voiced_bounds(pcm)
        turns.append(ScriptTurn(text, planned, at + first, at + last))
        gap = int((answer_window_s + think_s()) * RATE)
        parts += [pcm, bytes(gap * 2)]
        at += len(pcm) / 2 / RATE + gap / RATE
    return Script(voice=voice, turns=tuple(turns), pcm=b"".join(parts))


def plan_questions(route: str, turns: int, caller: int) -> list[tuple[str, str]]:
    """A caller's questions: intent paraphrases (cache), open questions (llm) or alternating."""
    out = []
    for j in range(turns):
        planned = route if route != "both" else ("cache" if (caller + j) % 2 == 0 else "llm")
        pool = CACHE_QUESTIONS if planned == "cache" else OPEN_QUESTIONS
        out.append((pool[(caller * turns + j) % len(pool)], planned))
    return out


# --------------------------------------------------------------------------- calls on the wire


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


# --------------------------------------------------------------------------- turns


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


# --------------------------------------------------------------------------- the call log


@dataclass(frozen=True)
class LogTurn:
    """One turn in the bot's call log; stage times are ``time.time()`` seconds."""

    seq: int
    route: str
    intent: str | None
    barged_in: bool
    stages: dict[str, float]
    model_ms: dict[str, float]
    #: What the bot's ASR heard in this turn.
    transcript: str | None = None

    @property
    def route_class(self) -> str:
        """The route class: "cache" for an intent match, else the bot's route ("llm"...)."""
        return "cache" if self.route in CACHE_ROUTES else self.route

    def durations_ms(self) -> dict[str, float]:
        """The bot's stage durations: eot wait, ASR, lookup, first token, first audio.

        ``first_token`` is route decided to the LLM's first token; ``first_audio`` is the
        bot's own voice-to-voice, caller's speech end to its first audio out.
        """
        s = self.stages
        spans = {
            "eot_wait": ("speech_end", "eot_decided"),
            "asr": ("eot_decided", "transcript_ready"),
            "lookup": ("transcript_ready", "route_decided"),
            "first_token": ("route_decided", "first_token"),
            "first_audio": ("speech_end", "first_audio_out"),
        }
        return {name: (s[b] - s[a]) * 1000 for name, (a, b) in spans.items() if a in s and b in s}


@dataclass
class LoggedCall:
    """A call in the bot's call log: its turns in order, and when fillers played."""

    turns: list[LogTurn] = field(default_factory=list)
    #: ``time.time()`` of each filler ("one moment please") played while an answer was due.
    fillers: list[float] = field(default_factory=list)


def read_call_log(db: Path) -> dict[str, LoggedCall]:
    """Every call by SIP Call-ID, from the bot's SQLite call log."""
    engine = create_engine(f"sqlite:///{db}")
    out: dict[str, LoggedCall] = {}
    try:
        with Session(engine) as session:
            for sip_call_id in session.scalars(select(Call.sip_call_id)):
                out.setdefault(sip_call_id, LoggedCall())
            fillers = (
                select(Call.sip_call_id, CallEvent.at)
                .join(CallEvent, CallEvent.call_id == Call.id)
                .where(CallEvent.kind == "filler")
                .order_by(CallEvent.at)
            )
            for sip_call_id, at in session.execute(fillers):
                out[sip_call_id].fillers.append(_utc_seconds(at))
            query = (
                select(Call.sip_call_id, TurnRow)
                .join(TurnRow, TurnRow.call_id == Call.id)
                .order_by(Call.sip_call_id, TurnRow.seq)
            )
            for sip_call_id, row in session.execute(query):
                stages = {}
                for name in LOG_STAGES:
                    at = getattr(row, f"{name}_at")
                    if at is not None:
                        stages[name] = _utc_seconds(at)
                out[sip_call_id].turns.append(
                    LogTurn(
                        seq=row.seq,
                        route=row.route,
                        intent=row.intent,
                        barged_in=bool(row.barged_in),
                        stages=stages,
                        model_ms=dict(row.model_ms or {}),
                        transcript=row.transcript,
                    )
                )
    finally:
        engine.dispose()
    return out


def _utc_seconds(at: dt.datetime) -> float:
    """A call-log timestamp (UTC; SQLite hands it back without its zone) as time.time()."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.UTC)
    return at.timestamp()


Window = tuple[float, float]


def question_windows(turns: Sequence[WireTurn], slack_s: float) -> list[Window | None]:
    """Each question's window on the capture clock: ``slack_s`` before its first voiced
    packet to the next question's first one (None: the question is not on the wire)."""
    out: list[Window | None] = []
    for i, turn in enumerate(turns):
        later = [w.caller_start for w in turns[i + 1 :] if w.caller_start is not None]
        out.append(
            None
            if turn.caller_start is None
            else (turn.caller_start - slack_s, later[0] if later else np.inf)
        )
    return out


def ended_inside(
    turn: LogTurn, window: Window | None, to_capture: Callable[[float], float]
) -> bool:
    """Did the logged ``turn``'s speech end lie in ``window``?"""
    if window is None or "speech_end" not in turn.stages:
        return False
    return window[0] <= to_capture(turn.stages["speech_end"]) < window[1]


def join_turns(
    wire: Sequence[WireTurn], logged: Sequence[LogTurn], to_capture: Callable[[float], float]
) -> list[LogTurn | None]:
    """The call-log turn that answered each scripted question.

    By order when the bot logged one answered turn per question (turns with route "none",
    noise the bot ignored, do not count) and each one's speech end lies in its question's
    window: from the question's first voiced packet to the next question's. Otherwise (a
    pause inside a question ended the bot's turn early, say) by time: the last logged turn
    whose speech end lies in the window.
    """
    answered = [t for t in logged if t.route != "none"]
    windows = question_windows(wire, SLACK_S)

    def inside(t: LogTurn, window: Window | None) -> bool:
        return ended_inside(t, window, to_capture)

    if len(answered) == len(wire) and all(map(inside, answered, windows)):
        return list(answered)
    out: list[LogTurn | None] = []
    for window in windows:
        hits = [t for t in answered if inside(t, window)]
        out.append(hits[-1] if hits else None)
    return out


def heard_texts(
    wire: Sequence[WireTurn], logged: Sequence[LogTurn], to_capture: Callable[[float], float]
) -> list[str | None]:
    """What the bot's ASR heard of each scripted question: the transcripts of every logged
    turn whose speech end lies in the question's window (a question the bot split at a
    pause is two turns), in order; None when the question was not found on the wire."""
    return [
        None
        if window is None
        else " ".join(
            t.transcript for t in logged if t.transcript and ended_inside(t, window, to_capture)
        )
        for window in question_windows(wire, SLACK_S)
    ]


# --------------------------------------------------------------------------- results


@dataclass
class TurnResult:
    """One scripted question: what the wire and the bot's call log say about it."""

    concurrency: int
    call: int
    index: int
    planned: str
    route: str  # "cache", "llm", another route of the bot's, or "unjoined"
    intent: str | None
    v2v_ms: float | None
    overlapped: bool
    answered: bool
    bot_ms: dict[str, float]
    #: A filler ("one moment please") played before the answer: it is the first audio heard.
    filler: bool = False
    #: The caller's last voiced packet on the wire to the bot's own speech end (receive
    #: path: jitter buffer, conference bridge, IPC, the VAD's view of the end of speech).
    inbound_ms: float | None = None
    #: The bot's first audio out to its first voiced packet on the wire (send path).
    outbound_ms: float | None = None
    #: The question as scripted, and what the bot's ASR heard of it (None: not on the wire).
    said: str = ""
    heard: str | None = None
    #: The longest the caller heard nothing while waiting for (and through) the answer.
    silence_ms: float | None = None

    @property
    def word_errors(self) -> tuple[int, int] | None:
        """(word edits, words said) of the bot's transcript against the script."""
        return None if self.heard is None else wer(self.said, self.heard)

    @property
    def overhead_ms(self) -> float | None:
        """Wire voice-to-voice minus the bot's own speech end to first audio out.

        None after a filler: the wire then measures the filler, the bot its answer.
        """
        if self.v2v_ms is None or self.filler or "first_audio" not in self.bot_ms:
            return None
        return self.v2v_ms - self.bot_ms["first_audio"]


@dataclass
class CallResult:
    """One caller's call."""

    concurrency: int
    call: int
    voice: str
    call_id: str | None
    status: int | None
    greeting_ms: float | None
    dropped: bool
    why: str
    late_packets: int
    lost_packets: int
    bot_packets: int


@dataclass
class Results:
    levels: list[int]
    calls: list[CallResult] = field(default_factory=list)
    turns: list[TurnResult] = field(default_factory=list)
    #: When the calls were made (ISO date).
    date: str = field(default_factory=lambda: dt.date.today().isoformat())


@dataclass(frozen=True)
class Caller:
    """A baresip caller of one concurrency level."""

    concurrency: int
    index: int  # across the whole run
    sip_port: int
    script: Script


@dataclass
class Collected:
    """Everything a run gathered, before evaluation."""

    levels: list[int]
    callers: list[Caller]
    bot_sip_port: int
    packets: list[Packet]
    log: dict[str, LoggedCall]
    #: ``time.time() - capture time``: puts call-log times on the capture's clock.
    wall_offset: float
    #: The command line that ran the calls (without --save/--analyze and their files).
    command: str = ""
    date: str = field(default_factory=lambda: dt.date.today().isoformat())

    def to_capture(self, wall: float) -> float:
        return wall - self.wall_offset


def filler_turns(turns: Sequence[WireTurn], fillers: Iterable[float]) -> list[bool]:
    """For each turn, did a filler (capture-clock times) play between the end of its question
    and the start of the next? (One that starts as the caller starts speaking belongs to the
    turn before: the voice-to-voice of this one still measures its own answer.)"""
    at = sorted(fillers)
    out = []
    for turn, window in zip(turns, question_windows(turns, 0.0), strict=True):
        end = turn.caller_end
        out.append(window is not None and end is not None and any(end < t < window[1] for t in at))
    return out


def evaluate(run: Collected) -> Results:
    """Per call and per turn results from the capture and the call log."""
    res = Results(levels=run.levels, date=run.date)
    wire = calls_on_wire(run.packets, run.bot_sip_port)
    by_port = {c.caller_sip[1]: c for c in wire.values()}
    for caller in run.callers:
        call = by_port.get(caller.sip_port)
        n_turns = len(caller.script.turns)
        if call is None:
            res.calls.append(
                CallResult(
                    concurrency=caller.concurrency,
                    call=caller.index,
                    voice=caller.script.voice,
                    call_id=None,
                    status=None,
                    greeting_ms=None,
                    dropped=True,
                    why="no INVITE on the wire",
                    late_packets=0,
                    lost_packets=0,
                    bot_packets=0,
                )
            )
            res.turns += [
                TurnResult(
                    concurrency=caller.concurrency,
                    call=caller.index,
                    index=j,
                    planned=t.planned,
                    route="unjoined",
                    intent=None,
                    v2v_ms=None,
                    overlapped=False,
                    answered=False,
                    bot_ms={},
                )
                for j, t in enumerate(caller.script.turns)
            ]
            continue
        turns = measure_turns(call, caller.script.turns)
        logged_call = run.log.get(call.call_id, LoggedCall())
        logged = join_turns(turns, logged_call.turns, run.to_capture)
        heard = heard_texts(turns, logged_call.turns, run.to_capture)
        fillers = filler_turns(turns, map(run.to_capture, logged_call.fillers))
        why = []
        if call.status != 200:
            why.append(f"SIP {call.status}")
        unanswered = sum(t.bot_start is None for t in turns)
        if call.status == 200 and unanswered:
            why.append(f"{unanswered} of {n_turns} questions unanswered")
        if call.bye_by_bot:
            why.append("the bot hung up")
        elif (
            call.answered_at is not None
            and call.bye_at is not None
            and call.bye_at - call.answered_at < caller.script.seconds - 1.0
        ):
            why.append("the caller hung up early")
        res.calls.append(
            CallResult(
                concurrency=caller.concurrency,
                call=caller.index,
                voice=caller.script.voice,
                call_id=call.call_id,
                status=call.status,
                greeting_ms=greeting_ms(call),
                dropped=bool(why),
                why="; ".join(why),
                late_packets=call.late_packets(),
                lost_packets=call.lost_packets(),
                bot_packets=len(call.down),
            )
        )
        for turn, script_turn, log_turn, filler, text in zip(
            turns, caller.script.turns, logged, fillers, heard, strict=True
        ):
            inbound = outbound = None
            if log_turn is not None and not filler:
                stages = log_turn.stages
                if turn.caller_end is not None and "speech_end" in stages:
                    inbound = (run.to_capture(stages["speech_end"]) - turn.caller_end) * 1000
                if turn.bot_start is not None and "first_audio_out" in stages:
                    outbound = (turn.bot_start - run.to_capture(stages["first_audio_out"])) * 1000
            res.turns.append(
                TurnResult(
                    concurrency=caller.concurrency,
                    call=caller.index,
                    index=turn.index,
                    planned=script_turn.planned,
                    route=log_turn.route_class if log_turn is not None else "unjoined",
                    intent=log_turn.intent if log_turn is not None else None,
                    v2v_ms=turn.v2v_ms,
                    overlapped=turn.overlapped,
                    answered=turn.bot_start is not None,
                    bot_ms=log_turn.durations_ms() if log_turn is not None else {},
                    filler=filler,
                    inbound_ms=inbound,
                    outbound_ms=outbound,
                    said=script_turn.text,
                    heard=text,
                    silence_ms=None if turn.silence_s is None else turn.silence_s * 1000,
                )
            )
    return res


# --------------------------------------------------------------------------- running it

#: What baresip prints when a call is over (hung up by either side, or failed).
CALL_OVER = b" terminated (duration"
BARESIP_CONFIG = """\
poll_method epoll
sip_listen 127.0.0.1:{sip_port}
audio_player aufile,{dir}/heard.wav
audio_source aufile,{source}
audio_alert aufile,{dir}/heard.wav
audio_srate 8000
audio_channels 1
net_interface 127.0.0.1
rtp_ports {rtp_first}-{rtp_last}
module_path /usr/lib/baresip/modules
module stdio.so
module g711.so
module aufile.so
module_app account.so
module_app menu.so
"""


def prepare_caller(caller: Caller, workdir: Path, rtp_ports: range, codec: str) -> None:
    """A baresip configuration folder for ``caller``: config, account and script WAV."""
    workdir.mkdir(parents=True, exist_ok=True)
    source = workdir / "script.wav"
    write_wav(source, caller.script.pcm)
    (workdir / "config").write_text(
        BARESIP_CONFIG.format(
            sip_port=caller.sip_port,
            dir=workdir,
            source=source,
            rtp_first=rtp_ports.start,
            rtp_last=rtp_ports.stop - 1,
        )
    )
    (workdir / "accounts").write_text(
        f"<sip:caller{caller.index}@127.0.0.1>;regint=0;audio_codecs={codec.lower()}\n"
    )


async def run_caller(exe: str, uri: str, caller: Caller, workdir: Path) -> str | None:
    """Run one baresip call through its script (from ``prepare_caller``).

    baresip hangs up when its source WAV ends but stays up until ``-t``; it is stopped
    (SIGTERM, by its PID) once it reports the call over. Returns None when the call ended,
    else the end of baresip's output.
    """
    timeout_s = int(caller.script.seconds + 15)
    proc = await asyncio.create_subprocess_exec(
        exe, "-4", "-f", str(workdir), "-e", f"/dial {uri}", "-t", str(timeout_s),
        cwd=workdir, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert proc.stdout is not None
    output = b""
    ended = False
    deadline = time.monotonic() + timeout_s + 20
    try:
        while time.monotonic() < deadline:
            try:
                chunk = await asyncio.wait_for(proc.stdout.read(4096), 1.0)
            except TimeoutError:
                continue
            if not chunk:
                break
            output = (output + chunk)[-8192:]
            if not ended and CALL_OVER in output:
                ended = True
                await asyncio.sleep(0.5)  # the BYE's answer
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGTERM)
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL if not ended else signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()
    return None if ended else output.decode(errors="replace")[-2000:]


async def run_level(
    exe: str,
    uri: str,
    callers: Sequence[Caller],
    workdir: Path,
    rtp_ports: range,
    *,
    codec: str,
    stagger_s: float,
) -> None:
    """Every caller of one concurrency level at once (starts ``stagger_s`` apart)."""

    for caller in callers:
        prepare_caller(caller, workdir / f"caller{caller.index}", rtp_ports, codec)

    async def one(k: int, caller: Caller) -> None:
        await asyncio.sleep(k * stagger_s)
        problem = await run_caller(exe, uri, caller, workdir / f"caller{caller.index}")
        if problem is not None:
            print(f"caller {caller.index}: the call did not end:\n{problem}", file=sys.stderr)

    await asyncio.gather(*(one(k, c) for k, c in enumerate(callers)))


class CaptureDenied(RuntimeError):
    """The raw socket could not be opened (not root)."""


async def run_bench(
    levels: Sequence[int],
    turns_per_call: int,
    route: str,
    **options: Any,
) -> Results:
    """Start a bot, run every level's callers under a capture, and evaluate."""
    return evaluate(await collect(levels, turns_per_call, route, **options))


async def collect(
    levels: Sequence[int],
    turns_per_call: int,
    route: str,
    *,
    lead_s: float = 5.0,
    answer_window_s: float = 12.0,
    stagger_s: float = 0.25,
    think_jitter_s: float = 0.0,
    codec: str = "PCMU",
    questions: Callable[[int], list[tuple[str, str]]] | None = None,
    profile: Path | None = None,
) -> Collected:
    """Start a bot, run every level's callers under a capture; the packets and call log.

    With ``think_jitter_s`` each silence after a question lasts up to that much longer
    (uniform, the same for every run: seeded by the caller's number), so that the calls
    drift apart as independent callers do; without it every call keeps the same rhythm and
    the questions of a level end within ``level * stagger_s`` of each other, every time.
    """
    exe = shutil.which("baresip")
    if exe is None:
        raise RuntimeError("baresip is not installed (apt-get install baresip-core)")
    salt = os.getpid()
    bot_rtp = range(20000 + (salt % 20) * 1000, 20000 + (salt % 20) * 1000 + 1000)
    caller_rtp = range(10000 + (salt % 10) * 1000, 10000 + (salt % 10) * 1000 + 1000)
    voices = itertools.cycle(FLITE_VOICES)
    plan = questions or (lambda i: plan_questions(route, turns_per_call, i))
    with tempfile.TemporaryDirectory(prefix="switchboard-v2v-") as tmp:
        work = Path(tmp)
        env = {
            "SWITCHBOARD_DATA_DIR": str(work / "bot"),
            "SWITCHBOARD_SIP__MAX_CALLS": str(max(*levels, 4)),
            "SWITCHBOARD_SIP__RTP_PORT_START": str(bot_rtp.start),
            "SWITCHBOARD_SIP__RTP_PORT_RANGE": str(len(bot_rtp)),
            # Intents are matched as configured, but a transfer or hang-up would end a call
            # before its script: the bot answers and records the action instead.
            "SWITCHBOARD_CALL_ACTIONS": "false",
        }
        bot_profile = profile or Path(os.environ.get("SWITCHBOARD_PROFILE") or DEFAULT_PROFILE)
        callers: list[Caller] = []
        # Capture first: without root this fails before a bot is started for nothing.
        capture = Capture(PortFilter([bot_rtp, caller_rtp]))
        try:
            capture.start()
        except PermissionError as exc:
            raise CaptureDenied(str(exc)) from exc
        try:
            with run_bot(env=env, profile=bot_profile) as bot:
                capture.filter.add(bot.port)
                for level in levels:
                    batch = []
                    for _ in range(level):
                        i = len(callers)
                        think = random.Random(i)
                        script = build_script(
                            plan(i),
                            next(voices),
                            lead_s=lead_s,
                            answer_window_s=answer_window_s,
                            think_s=functools.partial(think.uniform, 0.0, think_jitter_s),
                        )
                        caller = Caller(level, i, free_udp_port(), script)
                        capture.filter.add(caller.sip_port)
                        batch.append(caller)
                        callers.append(caller)
                    print(f"concurrency {level}: {level} calls...", file=sys.stderr)
                    started = time.monotonic()
                    await run_level(
                        exe, bot.uri, batch, work, caller_rtp, codec=codec, stagger_s=stagger_s
                    )
                    print(f"  done in {time.monotonic() - started:.0f} s", file=sys.stderr)
                await asyncio.sleep(1.0)  # the last BYEs and their answers
        finally:
            capture.stop()
        # the bot has stopped: its call log is written
        log = read_call_log(work / "bot" / "switchboard.db")
    return Collected(
        levels=list(levels),
        callers=callers,
        bot_sip_port=bot.port,
        packets=capture.packets(),
        log=log,
        wall_offset=capture.wall_offset,
    )


# --------------------------------------------------------------------------- the report


def _pct(values: Sequence[float], q: float) -> str:
    return f"{percentile(list(values), q):.0f}" if values else "-"


def route_order(routes: Iterable[str]) -> list[str]:
    seen = set(routes)
    first = ["cache", "llm"]
    return [r for r in first if r in seen] + sorted(seen - set(first))


def report(res: Results, command: str) -> str:
    """The results as Markdown tables."""
    lines = [
        "| concurrency | route | turns | P50 ms | P95 ms | P99 ms | max ms | after a filler | "
        "longest silence P95 / max ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for level in res.levels:
        turns = [t for t in res.turns if t.concurrency == level]
        for route in route_order(t.route for t in turns):
            mine = [t for t in turns if t.route == route and t.v2v_ms is not None]
            v = [t.v2v_ms for t in mine if t.v2v_ms is not None]
            top = f"{max(v):.0f}" if v else "-"
            quiet = [t.silence_ms for t in mine if t.silence_ms is not None]
            longest = f"{_pct(quiet, 95)} / {max(quiet):.0f}" if quiet else "-"
            lines.append(
                f"| {level} | {route} | {len(v)} | {_pct(v, 50)} | {_pct(v, 95)} | "
                f"{_pct(v, 99)} | {top} | {sum(t.filler for t in mine)} | {longest} |"
            )
    calls_table = [
        "| concurrency | calls | dropped | greeting P50 ms | P95 ms | P99 ms | "
        "late bot packets (calls with any) | lost bot packets | turns overlapped | "
        "off-route turns |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    dropped_lines = []
    for level in res.levels:
        calls = [c for c in res.calls if c.concurrency == level]
        turns = [t for t in res.turns if t.concurrency == level]
        g = [c.greeting_ms for c in calls if c.greeting_ms is not None]
        late = sum(c.late_packets for c in calls)
        late_calls = sum(c.late_packets > 0 for c in calls)
        off = sum(t.route in ("cache", "llm") and t.route != t.planned for t in turns)
        calls_table.append(
            f"| {level} | {len(calls)} | {sum(c.dropped for c in calls)} | {_pct(g, 50)} | "
            f"{_pct(g, 95)} | {_pct(g, 99)} | {late} ({late_calls}) | "
            f"{sum(c.lost_packets for c in calls)} | {sum(t.overlapped for t in turns)} | {off} |"
        )
        dropped_lines += [
            f"- concurrency {level}, call {c.call} ({c.voice}): {c.why}" for c in calls if c.dropped
        ]
    wer_table = [
        "| concurrency | route | questions | words said | word errors | WER | "
        "questions heard exactly |",
        "|---|---|---|---|---|---|---|",
    ]
    for level in res.levels:
        turns = [t for t in res.turns if t.concurrency == level and t.word_errors is not None]
        for route in [*route_order(t.route for t in turns), "all"]:
            mine = [t for t in turns if route in ("all", t.route)]
            counted = [e for e in (t.word_errors for t in mine) if e is not None]
            errors, said = sum(e for e, _ in counted), sum(n for _, n in counted)
            rate = f"{errors / said:.1%}" if said else "-"
            wer_table.append(
                f"| {level} | {route} | {len(mine)} | {said} | {errors} | {rate} | "
                f"{sum(e == 0 for e, _ in counted)} |"
            )
    stage_head = " | ".join(f"{STAGE_TITLES[s]} P50 / P95" for s in STAGES)
    stages_table = [
        f"| concurrency | route | turns | {stage_head} | wire v2v P50 / P95 | "
        "wire overhead P50 / P95 | of it inbound / outbound P50 |",
        "|---|---|---|" + "---|" * len(STAGES) + "---|---|---|",
    ]
    for level in res.levels:
        turns = [t for t in res.turns if t.concurrency == level and t.bot_ms]
        for route in route_order(t.route for t in turns):
            mine = [t for t in turns if t.route == route]
            cells = []
            for stage in STAGES:
                v = [t.bot_ms[stage] for t in mine if stage in t.bot_ms]
                cells.append(f"{_pct(v, 50)} / {_pct(v, 95)}" if v else "-")
            wire = [t.v2v_ms for t in mine if t.v2v_ms is not None]
            over = [t.overhead_ms for t in mine if t.overhead_ms is not None]
            inb = [t.inbound_ms for t in mine if t.inbound_ms is not None]
            outb = [t.outbound_ms for t in mine if t.outbound_ms is not None]
            stages_table.append(
                f"| {level} | {route} | {len(mine)} | {' | '.join(cells)} | "
                f"{_pct(wire, 50)} / {_pct(wire, 95)} | {_pct(over, 50)} / {_pct(over, 95)} | "
                f"{_pct(inb, 50)} / {_pct(outb, 50)} |"
            )
    out = [
        f"# Voice-to-voice latency on the wire ({res.date})",
        "",
        f"Command: `{command}`  ",
        f"Machine: {machine_note()} ({platform.machine()}, Python "
        f"{platform.python_version()}); bot on its embedded defaults; callers are baresip "
        f"over loopback, caller voices: flite ({', '.join(FLITE_VOICES)}).",
        "",
        "Measured on the loopback interface (raw packet capture, kernel timestamps): "
        "voice-to-voice is the arrival of the caller's last voiced RTP packet of a question to "
        "the bot's first voiced RTP packet after it; the greeting delay runs from the 200 OK "
        "to the INVITE on the wire. Routes come from the bot's call log: cache is an intent "
        "match (ready audio), llm the language model; unjoined: no call-log turn found. "
        'When the answer is slow the bot plays a filler ("one moment please") first: '
        "voice-to-voice then measures the filler, the first thing the caller hears. Longest "
        "silence: per turn, the longest stretch without a voiced bot packet from the question's "
        "end to the answer's end (a dead line while the caller waits). The bot "
        "matches intents as configured but runs with their actions off "
        "(`SWITCHBOARD_CALL_ACTIONS=false`: a transfer or hang-up is recorded, not done), so "
        "that every call plays its whole script. The capture needs root (a raw packet "
        "socket).",
        "",
        "## Voice-to-voice per route",
        "",
        *lines,
        "",
        "## Calls",
        "",
        "Dropped: not answered, a question left unanswered, or the call ended before its "
        "script. Late: a bot RTP packet more than 40 ms after the previous one of its 20 ms "
        "stream. Overlapped: the bot was talking when the question ended (not measured). "
        "Off-route: the question was chosen for one route and the bot took the other.",
        "",
        *calls_table,
        "",
        *(dropped_lines or ["No dropped calls."]),
        "",
        "## What the bot heard",
        "",
        "Word error rate of the bot's own speech recognition on the callers' questions: "
        "each question's script against the transcripts of the call-log turns that ended "
        "inside it (a question split at a pause is two turns), case and punctuation "
        "ignored. Route: the route of the turn that answered the question.",
        "",
        *wer_table,
        "",
        "## The bot's own clock",
        "",
        "Stage durations from the call log, ms: eot wait (caller's speech end to end of turn "
        "decided), ASR, lookup (intent cache), first token (route decided to the LLM's first "
        "token), first audio (speech end to the first answer audio out). Wire overhead: "
        "wire voice-to-voice minus the bot's first audio (jitter buffers, packetization, "
        "leading silence of the answer, the VAD's view of the speech end), over turns "
        "without a filler.",
        "",
        *stages_table,
        "",
    ]
    return "\n".join(out)


def write_docs(res: Results, command: str, md: Path, png: Path) -> None:
    """``md``: the report; ``png``: P50/P95/P99 per route against concurrency."""
    import matplotlib  # noqa: PLC0415 - only --write needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    md.write_text(report(res, command) + f"\n![voice-to-voice per route]({png.name})\n")
    routes = [r for r in route_order(t.route for t in res.turns) if r in ("cache", "llm")]
    fig, axes = plt.subplots(1, max(len(routes), 1), figsize=(5 * max(len(routes), 1), 4))
    axes_list = list(np.atleast_1d(axes))
    for ax, route in zip(axes_list, routes, strict=False):
        for q, style in ((50, "o-"), (95, "s--"), (99, "^:")):
            xs, ys = [], []
            for level in res.levels:
                v = [
                    t.v2v_ms
                    for t in res.turns
                    if t.concurrency == level and t.route == route and t.v2v_ms is not None
                ]
                if v:
                    xs.append(level)
                    ys.append(percentile(v, q))
            ax.plot(xs, ys, style, label=f"P{q}")
        ax.set_title(f"route: {route}")
        ax.set_xlabel("concurrent calls")
        ax.set_ylabel("voice-to-voice on the wire, ms")
        ax.set_xticks(res.levels)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle(f"Switchboard voice-to-voice on the wire ({machine_note()})")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)


def bench_command(argv: Sequence[str]) -> str:
    """The command line as the report shows it: without --save/--analyze (local files)."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--save", "--analyze"):
            skip = True
        elif not arg.startswith(("--save=", "--analyze=")):
            kept.append(arg)
    return " ".join(["python -m bench.v2v_wire", *kept])


def print_calls(res: Results) -> None:
    for c in res.calls:
        turns = [t for t in res.turns if t.call == c.call]
        parts = [
            f"{t.route}:{t.v2v_ms:.0f}" if t.v2v_ms is not None else f"{t.route}:-" for t in turns
        ]
        greeting = f"{c.greeting_ms:.0f}" if c.greeting_ms is not None else "-"
        print(
            f"c={c.concurrency:2d} call {c.call:3d} ({c.voice:5s}) greeting {greeting} ms, "
            f"v2v {' '.join(parts)}, late {c.late_packets}"
            + (f", DROPPED: {c.why}" if c.dropped else ""),
            file=sys.stderr,
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--concurrency", default="1,5,10,20", help="levels, comma separated")
    parser.add_argument("--turns-per-call", type=int, default=3)
    parser.add_argument("--route", choices=("cache", "llm", "both"), default="both")
    parser.add_argument("--lead", type=float, default=5.0, help="s of silence for the greeting")
    parser.add_argument(
        "--answer-window", type=float, default=12.0, help="s of silence after each question"
    )
    parser.add_argument(
        "--stagger", type=float, default=0.25, help="s between call starts in a level"
    )
    parser.add_argument(
        "--think-jitter",
        type=float,
        default=0.0,
        help="up to this many s more silence after each question (random, seeded per caller):"
        " calls drift apart instead of every caller finishing a question at the same moment",
    )
    parser.add_argument("--codec", choices=("PCMU", "PCMA"), default="PCMU")
    parser.add_argument(
        "--cpu-limit",
        type=float,
        metavar="CORES",
        help="run the bot and its callers on this many cores' worth of CPU (a cgroup quota,"
        " needs root): how much headroom a result has, whatever the machine's speed that day",
    )
    parser.add_argument(
        "--profile", type=Path, help="bot profile (default: $SWITCHBOARD_PROFILE or the default)"
    )
    parser.add_argument(
        "--write", action="store_true", help="write docs/latency.md and docs/latency.png"
    )
    parser.add_argument("--save", type=Path, help="keep the packets and call log in this file")
    parser.add_argument(
        "--analyze", type=Path, help="evaluate a file written by --save instead of running"
    )
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        if args.analyze is not None:
            with args.analyze.open("rb") as saved:
                run = pickle.load(saved)  # a file this command wrote
            if not isinstance(run, Collected):
                raise SystemExit(f"{args.analyze}: not a file written by --save")
        else:
            limited = args.cpu_limit is not None
            with cpu_limit(args.cpu_limit) if limited else contextlib.nullcontext():
                run = asyncio.run(
                    collect(
                        levels,
                        args.turns_per_call,
                        args.route,
                        lead_s=args.lead,
                        answer_window_s=args.answer_window,
                        stagger_s=args.stagger,
                        think_jitter_s=args.think_jitter,
                        codec=args.codec,
                        profile=args.profile,
                    )
                )
    except CpuLimitUnavailable as exc:
        print(f"cannot limit the benchmark's CPU: {exc}", file=sys.stderr)
        return 2
    except CaptureDenied as exc:
        print(
            f"cannot capture packets on the loopback interface: {exc}\n"
            "a raw AF_PACKET socket needs root (or CAP_NET_RAW): run the benchmark as root",
            file=sys.stderr,
        )
        return 2
    if not run.command:
        run.command = bench_command(sys.argv[1:] if argv is None else argv)
    if args.save is not None:
        with args.save.open("wb") as out:
            pickle.dump(run, out)
    res = evaluate(run)
    command = run.command
    print_calls(res)
    print(report(res, command))
    if args.write:
        write_docs(res, command, ROOT / "docs" / "latency.md", ROOT / "docs" / "latency.png")
        print("wrote docs/latency.md and docs/latency.png", file=sys.stderr)
    measured = any(t.v2v_ms is not None for t in res.turns)
    return 0 if measured else 1


if __name__ == "__main__":
    # Run the imported module's main, so that what --save pickles names bench.v2v_wire.
    from bench.v2v_wire import main as _main

    raise SystemExit(_main())
