"""Callers who pause mid-sentence, on the wire: are their requests cut in two?

A bot node (``switchboard run``) is called by baresip callers one after another, each in
its own espeak-ng voice, under a packet capture of loopback (raw socket: needs root). Each
caller asks requests with one pause of 0.5-1.5 s inside (one sentence, one intonation
contour: espeak-ng SSML ``<break>``), then the benchmark's usual finished cache-route
questions (flite). From the capture and the bot's call log:

- cut in two: a paused request during which the bot decided that a turn had ended (a
  turn's ``eot_decided`` between the request's first and last voiced packet);
- overlap: the bot's voiced packets between the pause's start and the request's end;
- voice-to-voice on the finished questions (the last voiced packet of the question to the
  bot's first voiced packet after it), and the end-of-turn wait the bot logged.

    .venv/bin/python -m bench.pause_wire [--voices en-us,en-gb+f3,en-gb-scotland]
        [--held-out | --held-out-2 | --held-out-3 | --held-out-4]

``--held-out`` asks requests written apart from the ones the end-of-turn rules were
worked on, in other voices: read once, when a change is done. ``--held-out-2`` is a
second such set, written once the first had been read several times, and
``--held-out-3`` a third, written once both had been read, ``--held-out-4`` a fourth,
written once all three had been.

The same command, run from a checkout of an earlier commit (with this file and
``testkit/paused_speech.py`` copied in), gives the figures before a change.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.pause_wire_held_out import HELD_OUT_VOICES, PAUSED_HELD_OUT
from bench.pause_wire_held_out_2 import HELD_OUT_2_VOICES, PAUSED_HELD_OUT_2
from bench.pause_wire_held_out_3 import HELD_OUT_3_VOICES, PAUSED_HELD_OUT_3
from bench.pause_wire_held_out_4 import HELD_OUT_4_VOICES, PAUSED_HELD_OUT_4
from bench.pause_wire_held_out_5 import HELD_OUT_5_VOICES, PAUSED_HELD_OUT_5
from bot.profile import DEFAULT_PROFILE
from testkit.baresip import Caller, run_level
from testkit.botproc import run_bot
from testkit.calllog_reader import read_call_log
from testkit.paused_speech import ESPEAK_VOICES, say_with_pause
from testkit.ports import free_udp_port
from testkit.question_script import CACHE_QUESTIONS, build_script
from testkit.rtp_capture import Capture, PortFilter
from testkit.voices import FLITE_VOICES, speak
from testkit.wire import FRAME_MS, voiced_frames
from testkit.wire_calls import calls_on_wire, measure_turns

#: (before the pause, after it): requests a caller pauses inside, looking something up.
PAUSED = (
    ("I'd like to change", "the delivery address on my order."),
    ("My order number is", "four five six seven eight."),
    ("Can you tell me", "how much express shipping costs?"),
    ("Could you check if", "my refund has gone through yet?"),
    ("I want to return", "the shoes I bought last week."),
    ("Do you deliver to", "France and Germany?"),
    ("I need to update", "the phone number on my account."),
    ("Can I speak to", "someone about a damaged parcel?"),
    ("What time does your", "customer service open tomorrow?"),
    ("My parcel arrived and", "the box was completely crushed."),
    ("I was wondering if", "you could send it to my office instead?"),
    ("How long does it take to", "get a refund on a return?"),
    ("The tracking number is", "nine eight seven six five."),
    ("I'd like to cancel", "the second item on my order."),
)
PAUSES_MS = (500, 700, 1000, 1200, 1500)
_SEP = " | "


@dataclass(frozen=True)
class Outcome:
    """One scripted request or question, as the wire and the call log saw it."""

    voice: str
    text: str
    pause_ms: int  # 0: a finished question
    cut: bool
    overlap_ms: float
    v2v_ms: float | None
    eot_ms: float | None
    route: str | None
    #: What the bot heard in the turns that ended inside the request (cut) or at its end.
    heard: tuple[str, ...] = ()
    #: A cut request whose turn at its end was heard as the whole request (the caller went
    #: on over the bot, and both halves were read as one: ``Turn.continues``).
    rejoined: bool = False
    #: Each turn that ended inside the request: its route, intent, the silence after which
    #: it ended (which limit ended it: 300 a finished sentence, 500 the usual wait...), and
    #: what the pause's pass heard (each recognizer) and found.
    cut_as: tuple[str, ...] = ()
    #: The model time of the turn at the request's end (``asr``: the first recognizer's
    #: last pass in the pause, reused; ``asr_second``: heard again), from the call log.
    model_ms: tuple[tuple[str, float], ...] = ()
    #: The reading the turn at the request's end waited by (``wait``, "fell" where the
    #: voice fell, and where it ended in semitones, "long" where the sentence was), from
    #: the pause's record.
    waited: str = ""


def _pause_at(pcm: bytes) -> tuple[float, float]:
    """The longest silence between voiced frames of ``pcm`` (start, end), in seconds."""
    voiced = np.flatnonzero(voiced_frames(np.frombuffer(pcm, "<i2")))
    gaps = np.diff(voiced)
    i = int(np.argmax(gaps))
    return (voiced[i] + 1) * FRAME_MS / 1000, voiced[i + 1] * FRAME_MS / 1000


def plan(
    voice: str, index: int, finished: int, paused: Sequence[tuple[str, str]] = PAUSED
) -> list[tuple[str, str]]:
    """A caller's requests: every paused one (pauses cycling), then finished questions."""
    out = []
    for j, (before, after) in enumerate(paused):
        pause = PAUSES_MS[(index * len(paused) + j) % len(PAUSES_MS)]
        out.append((f"{before}{_SEP}{after}{_SEP}{pause}", "paused"))
    for j in range(finished):
        out.append((CACHE_QUESTIONS[(index * finished + j) % len(CACHE_QUESTIONS)], "cache"))
    return out


def say(text: str, voice: str) -> bytes:
    """A paused request in the caller's espeak-ng voice; a finished question in flite."""
    if _SEP not in text:
        known = (*ESPEAK_VOICES, *HELD_OUT_VOICES, *HELD_OUT_2_VOICES, *HELD_OUT_3_VOICES)
        at = known.index(voice) if voice in known else 0
        flite = FLITE_VOICES[at % len(FLITE_VOICES)]
        return speak(text, voice=flite)
    before, after, pause = text.split(_SEP)
    return say_with_pause(before, after, int(pause), voice=voice)


async def run(
    voices: Sequence[str],
    finished: int,
    answer_window_s: float,
    paused: Sequence[tuple[str, str]] = PAUSED,
) -> list[Outcome]:
    exe = shutil.which("baresip")
    if exe is None:
        raise RuntimeError("baresip is not installed (apt-get install baresip-core)")
    salt = os.getpid()
    bot_rtp = range(20000 + (salt % 20) * 1000, 20000 + (salt % 20) * 1000 + 1000)
    caller_rtp = range(10000 + (salt % 10) * 1000, 10000 + (salt % 10) * 1000 + 1000)
    with tempfile.TemporaryDirectory(prefix="switchboard-pause-") as tmp:
        work = Path(tmp)
        env = {
            "SWITCHBOARD_DATA_DIR": str(work / "bot"),
            "SWITCHBOARD_SIP__RTP_PORT_START": str(bot_rtp.start),
            "SWITCHBOARD_SIP__RTP_PORT_RANGE": str(len(bot_rtp)),
            "SWITCHBOARD_CALL_ACTIONS": "false",  # a transfer would end the script early
        }
        profile = Path(os.environ.get("SWITCHBOARD_PROFILE") or DEFAULT_PROFILE)
        capture = Capture(PortFilter([bot_rtp, caller_rtp]))
        capture.start()
        callers = []
        try:
            with run_bot(env=env, profile=profile, timeout_s=600) as bot:
                capture.filter.add(bot.port)
                for i, voice in enumerate(voices):
                    script = build_script(
                        plan(voice, i, finished, paused),
                        voice,
                        lead_s=6.0,
                        answer_window_s=answer_window_s,
                        say=say,
                    )
                    caller = Caller(1, i, free_udp_port(), script)
                    capture.filter.add(caller.sip_port)
                    callers.append(caller)
                    print(f"caller {i} ({voice}): {script.seconds:.0f} s", file=sys.stderr)
                    await run_level(
                        exe, bot.uri, [caller], work, caller_rtp, codec="PCMU", stagger_s=0
                    )
                await asyncio.sleep(1.0)
        finally:
            capture.stop()
        log = read_call_log(work / "bot" / "switchboard.db")
    # What the pause's pass heard and found, by the words the turn was heard as at its end.
    found = {(r["call_id"], r["turn"]): r.get("pause") for r in bot.records("turn")}
    pause_of = {
        r["transcript"]: (
            r.get("pause_heard"),
            r.get("pause_second"),
            found.get((r["call_id"], r["turn"])),
        )
        for r in bot.records("turn_text")
    }
    packets = capture.packets()
    wire = calls_on_wire(packets, bot.port)
    by_port = {c.caller_sip[1]: c for c in wire.values()}
    out = []
    for caller in callers:
        call = by_port[caller.sip_port]
        turns = measure_turns(call, caller.script.turns)
        logged = log[call.call_id].turns if call.call_id in log else []
        decided = [
            (capture.wall_offset, t)
            for t in logged
            if "eot_decided" in t.stages and "speech_end" in t.stages
        ]
        for wt, st in zip(turns, caller.script.turns, strict=True):
            if wt.caller_start is None or wt.caller_end is None:
                continue
            start, end = wt.caller_start, wt.caller_end
            ends = [t for off, t in decided if start < t.stages["eot_decided"] - off < end - 0.05]
            after = [t for off, t in decided if t.stages["eot_decided"] - off >= end - 0.05]
            first = after[0] if after else None
            pause_ms, overlap = 0, 0.0
            if _SEP in st.text:
                pause_ms = int(st.text.split(_SEP)[2])
                pcm = say(st.text, caller.script.voice)
                # where the pause starts, from the request's first voiced packet
                into = _pause_at(pcm)[0] - _first_voiced_s(pcm)
                down = call.down
                in_pause = down.voiced & (down.t >= start + into) & (down.t <= end)
                overlap = float(in_pause.sum()) * FRAME_MS
            rejoined = False
            if ends and first is not None and pause_ms:
                before, after_words = st.text.split(_SEP)[:2]
                rejoined = _holds(first.transcript or "", before) and _holds(
                    first.transcript or "", after_words
                )
            eot = None
            if first is not None:
                eot = (first.stages["eot_decided"] - first.stages["speech_end"]) * 1000
            out.append(
                Outcome(
                    voice=caller.script.voice,
                    text=st.text.replace(_SEP, " ", 1).rsplit(_SEP, 1)[0],
                    pause_ms=pause_ms,
                    cut=bool(ends),
                    overlap_ms=overlap,
                    v2v_ms=None if wt.bot_start is None else (wt.bot_start - end) * 1000,
                    eot_ms=eot,
                    route=None if first is None else first.route_class,
                    heard=tuple(t.transcript or "" for t in [*ends, *after[:1]]),
                    rejoined=rejoined,
                    cut_as=tuple(
                        f"{t.route}/{t.intent} after "
                        f"{(t.stages['eot_decided'] - t.stages['speech_end']) * 1000:.0f} ms, "
                        f"pause {pause_of.get(t.transcript or '')}"
                        for t in ends
                    ),
                    model_ms=() if first is None else tuple(first.model_ms.items()),
                    waited=_waited(pause_of.get(first.transcript or "") if first else None),
                )
            )
    return out


def _waited(pause: tuple[object, object, object] | None) -> str:
    """The reading the turn waited by: its wait, whether the voice fell (end in st), and
    whether the sentence was long."""
    record = pause[2] if pause is not None else None
    if not isinstance(record, dict):
        return ""
    fell = "fell " if record.get("fell") else ""
    long = " long" if record.get("long") else ""
    return f"{record.get('wait')} {fell}{record.get('end_st')}{long}"


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9']+", text.lower()))


def _holds(heard: str, said: str) -> bool:
    """Whether ``heard`` has at least half of the words of ``said`` (Whisper mishears some)."""
    words = _words(said)
    return bool(words) and len(words & _words(heard)) * 2 >= len(words)


def _first_voiced_s(pcm: bytes) -> float:
    voiced = np.flatnonzero(voiced_frames(np.frombuffer(pcm, "<i2")))
    return float(voiced[0] * FRAME_MS / 1000)


def _pct(values: list[float], q: float) -> str:
    if not values:
        return "-"
    return f"{np.percentile(values, q):.0f}"


def report(outcomes: list[Outcome]) -> str:
    paused = [o for o in outcomes if o.pause_ms]
    lines = [
        "| pause | requests | cut in two | of them heard whole at the end | bot voice in the "
        "pause (requests, ms in all) |"
    ]
    lines.append("|---|---|---|---|---|")
    for pause in [*PAUSES_MS, 0]:
        group = [o for o in paused if pause in (0, o.pause_ms)]
        over = [o for o in group if o.overlap_ms > 0]
        label = f"{pause} ms" if pause else "all"
        lines.append(
            f"| {label} | {len(group)} | {sum(o.cut for o in group)} | "
            f"{sum(o.rejoined for o in group)} | "
            f"{len(over)}, {sum(o.overlap_ms for o in over):.0f} |"
        )
    cache = [o for o in outcomes if not o.pause_ms and o.route == "cache"]
    v2v = [o.v2v_ms for o in cache if o.v2v_ms is not None]
    eot = [o.eot_ms for o in cache if o.eot_ms is not None]
    lines.append("")
    lines.append(
        f"finished questions answered from the cache: {len(cache)} of "
        f"{sum(not o.pause_ms for o in outcomes)}; voice-to-voice P50 {_pct(v2v, 50)} / "
        f"P95 {_pct(v2v, 95)} ms; end-of-turn wait P50 {_pct(eot, 50)} / P95 {_pct(eot, 95)} ms"
    )
    waits = [o.eot_ms for o in paused if o.eot_ms is not None and not o.cut]
    if waits:
        lines.append(
            f"paused requests kept whole: end-of-turn wait after the request, P50 "
            f"{statistics.median(waits):.0f} ms"
        )
    lines.append(_pass_times(outcomes))
    return "\n".join(lines)


def _pass_times(outcomes: list[Outcome]) -> str:
    """What deciding the end of turn cost in model time: the recognizers' time on the turn
    that ended each request (the pause's pass is reused when the caller did not go on)."""
    times = [dict(o.model_ms) for o in outcomes if o.model_ms]
    first = [t["asr"] for t in times if "asr" in t]
    second = [t["asr_second"] for t in times if "asr_second" in t]
    return (
        f"recognizer time of the turn that ended a request: first pass P50 {_pct(first, 50)} / "
        f"P95 {_pct(first, 95)} ms ({len(first)} turns); heard again on {len(second)} of "
        f"{len(times)}, P50 {_pct(second, 50)} / P95 {_pct(second, 95)} ms"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--voices", default=None, help="espeak-ng voices (comma-separated)")
    held_out = {
        "held_out": (HELD_OUT_VOICES, PAUSED_HELD_OUT, "the held-out requests"),
        "held_out_2": (HELD_OUT_2_VOICES, PAUSED_HELD_OUT_2, "the second held-out set"),
        "held_out_3": (HELD_OUT_3_VOICES, PAUSED_HELD_OUT_3, "the third held-out set"),
        "held_out_4": (HELD_OUT_4_VOICES, PAUSED_HELD_OUT_4, "the fourth held-out set"),
        "held_out_5": (HELD_OUT_5_VOICES, PAUSED_HELD_OUT_5, "the fifth held-out set"),
    }
    chosen = parser.add_mutually_exclusive_group()
    for dest, (_, _, what) in held_out.items():
        chosen.add_argument(
            "--" + dest.replace("_", "-"),
            dest=dest,
            action="store_true",
            help=f"{what}, in voices of their own (read once, at the end of a change)",
        )
    parser.add_argument("--finished", type=int, default=4, help="finished questions a caller")
    parser.add_argument("--answer-window", type=float, default=8.0, help="s after each request")
    args = parser.parse_args(argv)
    default: Sequence[str] = ESPEAK_VOICES
    paused: Sequence[tuple[str, str]] = PAUSED
    for dest, (voices_of_set, requests, _) in held_out.items():
        if getattr(args, dest):
            default, paused = voices_of_set, requests
    voices = [v for v in (args.voices or ",".join(default)).split(",") if v]
    outcomes = asyncio.run(run(voices, args.finished, args.answer_window, paused))
    for o in outcomes:
        print(
            f"{o.voice:15s} {o.pause_ms:5d} cut={o.cut!s:5s} whole={o.rejoined!s:5s} "
            f"overlap={o.overlap_ms:4.0f} "
            f"route={o.route} v2v={o.v2v_ms} eot={o.eot_ms} waited={o.waited!r} {o.text} "
            f"heard={o.heard}" + (f" cut_as={o.cut_as}" if o.cut_as else ""),
            file=sys.stderr,
        )
    print(report(outcomes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
