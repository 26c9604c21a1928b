"""What a wire benchmark run measured, per call and per scripted question: the capture's
calls and turns joined to the bot's call log (``evaluate``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from testkit.calllog_reader import LoggedCall
from testkit.turn_join import filler_turns, heard_texts, join_turns
from testkit.v2v_run import Collected, collect
from testkit.wer import wer
from testkit.wire_calls import calls_on_wire, greeting_ms, measure_turns


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
    #: Asked while the caller was still in the call queue: hold audio, not an answer.
    in_line: bool = False
    #: The turn failed and the caller heard the apology.
    apology: bool = False

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
    #: The call queue: how the caller's wait ended and how long it was (None: no wait).
    queue_outcome: str | None = None
    queue_wait_s: float | None = None


@dataclass
class Results:
    """Every call and scripted question of a run, per concurrency level."""

    levels: list[int]
    calls: list[CallResult] = field(default_factory=list)
    turns: list[TurnResult] = field(default_factory=list)
    #: When the calls were made (ISO date).
    date: str = field(default_factory=lambda: dt.date.today().isoformat())


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
        # Questions asked in the call queue got hold audio: not turns of the bot's.
        if logged_call.queue_outcome is not None:
            served = logged_call.dequeued_at
            in_line = [
                served is None or t.caller_end is None or t.caller_end < run.to_capture(served)
                for t in turns
            ]
        else:
            in_line = [False] * len(turns)
        unanswered = sum(t.bot_start is None and not q for t, q in zip(turns, in_line, strict=True))
        if call.status == 200 and unanswered:
            why.append(f"{unanswered} of {n_turns} questions unanswered")
        if logged_call.queue_outcome not in (None, "dequeued"):
            why.append(f"call queue: {logged_call.queue_outcome}")
        elif call.bye_by_bot:
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
                queue_outcome=logged_call.queue_outcome,
                queue_wait_s=logged_call.queue_wait_s,
            )
        )
        for turn, script_turn, joined, filler, text, queued in zip(
            turns, caller.script.turns, logged, fillers, heard, in_line, strict=True
        ):
            log_turn = None if queued else joined  # in line: the bot was not in the call yet
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
                    route=(
                        "in_line"
                        if queued
                        else log_turn.route_class
                        if log_turn is not None
                        else "unjoined"
                    ),
                    intent=log_turn.intent if log_turn is not None else None,
                    v2v_ms=None if queued else turn.v2v_ms,
                    overlapped=turn.overlapped,
                    answered=turn.bot_start is not None and not queued,
                    bot_ms=log_turn.durations_ms() if log_turn is not None else {},
                    filler=filler,
                    inbound_ms=inbound,
                    outbound_ms=outbound,
                    said=script_turn.text,
                    heard=text,
                    silence_ms=(
                        None if turn.silence_s is None or queued else turn.silence_s * 1000
                    ),
                    in_line=queued,
                    apology=log_turn is not None and log_turn.error is not None,
                )
            )
    return res


async def run_bench(
    levels: Sequence[int],
    turns_per_call: int,
    route: str,
    **options: Any,
) -> Results:
    """Start a bot, run every level's callers under a capture, and evaluate."""
    return evaluate(await collect(levels, turns_per_call, route, **options))
