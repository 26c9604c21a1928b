"""Which call-log turn answered which scripted question: the wire's turns (capture clock)
joined to the bot's logged turns (its own clock, converted by ``to_capture``).

A question's window runs from just before its first voiced packet to the next question's
first one; a logged turn belongs to the question whose window holds its speech end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from testkit.calllog_reader import LogTurn
from testkit.wire_calls import SLACK_S, WireTurn

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
