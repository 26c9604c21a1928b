"""A node under concurrent callers who ask what a real line asks: the plan of each call,
what the wire and the call log say about each step of it, and the summary by route.

Each caller asks a mix (``MIX``): cached intents, knowledge entries, a question the bot
answers with a question ("Just to check, ...?"), one nobody covers ("not sure"), small
talk, and a key pressed on the keypad. A step's route is what the node logged for the
turn, never what the plan meant it for: a misrouted turn shows in its logged route. The
command is ``bench.load_mix``; the pieces here are what it is made of, and what the tests
check.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from testkit.calllog_reader import CACHE_ROUTES, LogTurn
from testkit.rtp_capture import Packet, parse_rtp
from testkit.soak import children, command_name, percentile, rss_kib
from testkit.wire_calls import OVERLAP_S, SLACK_S, WireCall

#: RTP payload types of audio the benchmark's callers send (PCMU, PCMA, G.722, comfort
#: noise); any other on the caller's stream is a keypad event (RFC 4733).
AUDIO_PAYLOAD_TYPES = frozenset({0, 8, 9, 13})

#: What each kind of step says, a few phrasings each (callers rotate through them, so that
#: calls do not all say the same words). ``keypad`` holds the keys pressed.
MIX: Mapping[str, tuple[str, ...]] = {
    # Paraphrases of the default profile's intents (from testkit.question_script's
    # CACHE_QUESTIONS, and one more), each matched to its intent as text. Not "Can you check
    # where my parcel is?" (a question about order_status, 0.63) nor "Do you deliver to
    # France?" (flite's voices are heard saying "friends").
    "cache": (
        "What do you charge for shipping?",
        "What time does your customer service open in the morning?",
        "How can I return something I ordered?",
        "My package was damaged in the post.",
        "When are you open on Saturday?",
    ),
    # Knowledge entries' questions, and one rewording close enough to be answered (MiniLM
    # scored it 0.81 against the entry, over its direct_score, 0.65).
    "knowledge": (
        "How long does delivery take?",
        "When does my money come back?",
        "How long does a refund take?",
        "Do you sell gift cards?",
    ),
    # Words an intent or a knowledge entry only half covers: the bot asks ("Just to check,
    # ...?"): a weak intent match, or an entry under its direct_score.
    "question": (
        "Is my thing covered if it breaks?",
        "Is there a way to reach you by mail?",
        "I need help with a delivery.",
        "Can I swap the colour on my order?",
    ),
    # Nothing the operator wrote covers these: "I am not sure about that...".
    "decline": (
        "Do you have a shop in London?",
        "I forgot my password.",
        "Can you recommend a good winter coat?",
    ),
    "small_talk": ("Hello, can you hear me?", "Hi there.", "Hello, is anyone there?"),
    # The main menu's 3: the delivery-time entry's answer, ready audio.
    "keypad": ("3",),
}
#: The order of one call's steps (rotated per caller, so that at any moment the calls are
#: at different kinds of step). Two cached intents: the commonest kind of question.
PLAN = ("cache", "knowledge", "question", "decline", "small_talk", "keypad", "cache")
#: RFC 4733 events the dialer sends for one key last about this long.
KEY_S = 0.16


@dataclass(frozen=True)
class Step:
    """One step of a call: what the caller says (or keys), from ``at_s`` after media starts."""

    kind: str  # what the plan meant it for: a key of ``MIX``
    text: str  # the words said, or the keys pressed
    at_s: float
    #: The said words' first and last voiced frame, from the start of media (a keypad step:
    #: the key's start and end).
    start_s: float
    end_s: float

    @property
    def keyed(self) -> bool:
        return self.kind == "keypad"


@dataclass(frozen=True)
class CallPlan:
    """One caller's whole call: its steps, their audio, and how long to stay on the line."""

    index: int
    voice: str
    steps: tuple[Step, ...]
    audio: tuple[tuple[float, bytes], ...]
    keys: tuple[tuple[float, str], ...]
    seconds: float


def plan_call(
    index: int,
    voice: str,
    say: Callable[[str, str], bytes],
    voiced: Callable[[bytes], tuple[float, float]],
    *,
    lead_s: float,
    answer_window_s: float,
    jitter_s: float,
    rate: int = 8000,
) -> CallPlan:
    """Caller ``index``'s call: ``PLAN`` rotated by ``index``, each kind's phrasing picked
    by ``index``; silence for the greeting (``lead_s``), then each step and
    ``answer_window_s`` (plus up to ``jitter_s``, seeded by ``index``) for its answer.
    ``say(text, voice)`` makes 8 kHz PCM; ``voiced(pcm)`` its first and last voiced second."""
    rng = random.Random(index)
    at = lead_s
    steps: list[Step] = []
    audio: list[tuple[float, bytes]] = []
    keys: list[tuple[float, str]] = []
    asked: dict[str, int] = {}
    for k in range(len(PLAN)):
        kind = PLAN[(index + k) % len(PLAN)]
        choices = MIX[kind]
        text = choices[(index + asked.get(kind, 0)) % len(choices)]
        asked[kind] = asked.get(kind, 0) + 1
        if kind == "keypad":
            keys.append((at, text))
            steps.append(Step(kind, text, at, at, at + KEY_S * len(text)))
            length = KEY_S * len(text)
        else:
            pcm = say(text, voice)
            first, last = voiced(pcm)
            audio.append((at, pcm))
            steps.append(Step(kind, text, at, at + first, at + last))
            length = len(pcm) / 2 / rate
        at += length + answer_window_s + rng.uniform(0.0, jitter_s)
    return CallPlan(index, voice, tuple(steps), tuple(audio), tuple(keys), at + 2.0)


# --------------------------------------------------------------------------- the wire


def key_times(packets: Iterable[Packet], call: WireCall) -> list[float]:
    """Arrival times of the keypad events (RFC 4733) the caller sent on ``call``."""
    if call.bot_audio is None:
        return []
    out = []
    for p in packets:
        # By destination, as the call's audio is (``calls_on_wire``): the caller's source
        # address need not be the one its SDP gave.
        if p.dst != call.bot_audio:
            continue
        if call.invite_at > p.t or (call.bye_at is not None and p.t > call.bye_at):
            continue
        rtp = parse_rtp(p.payload)
        if rtp is not None and rtp.payload_type not in AUDIO_PAYLOAD_TYPES:
            out.append(p.t)
    return sorted(out)


@dataclass(frozen=True)
class WireStep:
    """One step on the wire (capture clock, seconds)."""

    start: float | None  # the first voiced packet (a key: its first event packet)
    end: float | None  # the last voiced packet (a key: its first event packet too)
    bot_start: float | None  # the bot's first voiced packet after it
    overlapped: bool  # the bot was talking as the caller finished

    @property
    def v2v_ms(self) -> float | None:
        if self.end is None or self.bot_start is None or self.overlapped:
            return None
        return (self.bot_start - self.end) * 1000.0


def steps_on_wire(call: WireCall, plan: CallPlan, keys: Sequence[float]) -> list[WireStep]:
    """Each planned step found on the wire, and the bot's first audio after it.

    The caller's RTP timestamps place its voiced packets in the plan (aligned on the first
    voiced packet: the first spoken step's first voiced frame); a step's packets are the
    voiced ones within its planned span, ``SLACK_S`` either side. A keypad step's are the
    event packets within its span and a second after. The bot's answer is its first
    voiced packet after the step's last packet and before the next step starts."""
    up = call.up
    voiced = np.flatnonzero(up.voiced)
    spoken = [s for s in plan.steps if not s.keyed]
    spans: list[tuple[float, float] | None] = []
    offset: float | None = None
    if len(voiced) and spoken:
        pos = (up.ts - up.ts[0]) / 8000.0
        offset = float(pos[voiced[0]]) - spoken[0].start_s
        # The capture time of a plan time: from the first voiced packet's arrival.
        origin = float(up.t[voiced[0]]) - spoken[0].start_s
    for step in plan.steps:
        if offset is None:
            spans.append(None)
        elif step.keyed:
            lo, hi = origin + step.start_s - SLACK_S, origin + step.end_s + 1.0
            inside = [t for t in keys if lo <= t <= hi]
            # A key is the caller's last input from its first event packet on (the node
            # acts on it; the event's end packets follow 160 ms later, three times).
            spans.append((inside[0], inside[0]) if inside else None)
        else:
            at = pos[voiced]
            hit = voiced[
                (at >= step.start_s + offset - SLACK_S) & (at <= step.end_s + offset + SLACK_S)
            ]
            spans.append((float(up.t[hit[0]]), float(up.t[hit[-1]])) if len(hit) else None)
    end_of_call = call.bye_at if call.bye_at is not None else math.inf
    out = []
    for i, span in enumerate(spans):
        if span is None:
            out.append(WireStep(None, None, None, False))
            continue
        later = [s[0] for s in spans[i + 1 :] if s is not None]
        before = later[0] if later else end_of_call
        start, end = span
        out.append(
            WireStep(
                start=start,
                end=end,
                bot_start=call.down.first_voiced(end, before),
                overlapped=call.down.voiced_between(end - OVERLAP_S, end),
            )
        )
    return out


def join_steps(
    wire: Sequence[WireStep], logged: Sequence[LogTurn], to_capture: Callable[[float], float]
) -> list[LogTurn | None]:
    """The call-log turn of each step: the last turn (noise the bot ignored, route
    "none", aside) whose speech end lies between ``SLACK_S`` before the step's first packet
    and the next step's first packet (a key's turn is logged with the key's time as its
    speech end)."""
    answered = [t for t in logged if t.route != "none" and "speech_end" in t.stages]
    out: list[LogTurn | None] = []
    for i, step in enumerate(wire):
        if step.start is None:
            out.append(None)
            continue
        later = [w.start for w in wire[i + 1 :] if w.start is not None]
        lo, hi = step.start - SLACK_S, later[0] if later else math.inf
        hits = [t for t in answered if lo <= to_capture(t.stages["speech_end"]) < hi]
        out.append(hits[-1] if hits else None)
    return out


#: A step said while its caller waited in the call queue (the node's log says when the
#: caller got the bot): no turn of the bot's to join, and what the wire carries after it is
#: the hold message, not an answer.
IN_LINE = "in line"


def route_label(turn: LogTurn | None, *, in_line: bool = False) -> str:
    """The route a step is counted under: the logged route ("cache" for an intent's ready
    answer); ``IN_LINE`` for a step with no turn said before its caller left the queue;
    "unjoined" when no logged turn was found for it otherwise."""
    if turn is None:
        return IN_LINE if in_line else "unjoined"
    return "cache" if turn.route in CACHE_ROUTES else turn.route


# --------------------------------------------------------------------------- results


@dataclass
class StepResult:
    calls: int  # the concurrency level
    caller: int
    planned: str
    route: str  # from the call log
    v2v_ms: float | None  # on the wire
    #: The bot's own times from its call log: speech end to the end-of-turn decision, and
    #: to its first audio out.
    eot_ms: float | None = None
    bot_ms: float | None = None
    heard: str | None = None
    said: str = ""


@dataclass
class Usage:
    """What the node's processes used over one level: CPU seconds (main process and its
    children, the SIP workers) and the RSS (MB) before the calls and at their peak."""

    seconds: float = 0.0
    cpu_s: float = 0.0
    rss_idle_mb: float = 0.0
    rss_peak_mb: float = 0.0
    by_process: dict[str, float] = field(default_factory=dict)  # peak RSS MB by name


@dataclass
class LevelResult:
    calls: int
    steps: list[StepResult] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    failed_calls: list[str] = field(default_factory=list)
    #: Seconds each caller that waited in the call queue waited (the call log's).
    queue_waits_s: list[float] = field(default_factory=list)


def summarize(values: Sequence[float]) -> tuple[int, float | None, float | None, float | None]:
    """(n, P50, P95, max)."""
    if not values:
        return 0, None, None, None
    return len(values), percentile(values, 50), percentile(values, 95), max(values)


def by_route(steps: Iterable[StepResult]) -> dict[str, list[StepResult]]:
    out: dict[str, list[StepResult]] = {}
    for s in steps:
        out.setdefault(s.route, []).append(s)
    return dict(sorted(out.items()))


def eot_share(steps: Iterable[StepResult]) -> float | None:
    """The end-of-turn decision's share of the wire's voice-to-voice, over the steps that
    have both: sum of the decisions' times over the sum of the waits."""
    pairs = [(s.eot_ms, s.v2v_ms) for s in steps if s.eot_ms is not None and s.v2v_ms]
    total = sum(v for _, v in pairs if v is not None)
    if not pairs or total <= 0:
        return None
    return sum(e for e, _ in pairs if e is not None) / total


def misrouted(steps: Iterable[StepResult]) -> dict[tuple[str, str], int]:
    """(planned, logged route) counts where the logged route is not what the plan meant."""
    meant = {
        "cache": {"cache"},
        "knowledge": {"knowledge"},
        "question": {"confirm"},
        "decline": {"fallback"},
        "small_talk": {"small_talk"},
        "keypad": {"keypad"},
    }
    out: dict[tuple[str, str], int] = {}
    for s in steps:
        if s.route not in meant.get(s.planned, {s.planned}):
            out[(s.planned, s.route)] = out.get((s.planned, s.route), 0) + 1
    return dict(sorted(out.items()))


# --------------------------------------------------------------------------- processes


def cpu_seconds(pid: int) -> float | None:
    """User and system CPU seconds of ``pid`` so far (None: gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime


def node_processes(pid: int) -> dict[int, str]:
    """The node's main process and its children (the SIP workers), by PID."""
    return {pid: "main", **{c: command_name(c) for c in children(pid)}}


def tree_cpu(procs: Mapping[int, str]) -> dict[int, float]:
    out = {}
    for p in procs:
        s = cpu_seconds(p)
        if s is not None:
            out[p] = s
    return out


def tree_rss_mb(procs: Mapping[int, str]) -> dict[str, float]:
    """RSS (MB) summed by process name."""
    out: dict[str, float] = {}
    for p, name in procs.items():
        kib = rss_kib(p)
        if kib is not None:
            out[name] = out.get(name, 0.0) + kib / 1024.0
    return out
