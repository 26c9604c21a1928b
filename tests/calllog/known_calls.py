"""Six calls with known endings, reported to a ``CallLog`` as a call session reports them.

Each call is answered at a fixed wall-clock time (``T0`` plus whole minutes) and lasts a
fixed length, and each of its turns is heard ``first_audio_ms`` after the caller's end of
speech, so that what the admin API figures from them (rates by day and hour, the average
length, the first answer's latency) is known exactly. ``outcome`` is what each call comes
to.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from bot.calllog import CallLog
from bot.pipeline.turn import Turn

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
HANGUP = "200 Normal call clearing"


@dataclass(frozen=True)
class KnownCall:
    sip_call_id: str
    minute: int  # answered at T0 + this many minutes
    length_s: float
    #: Turns as (route, words, intent, answer) and events as ("event", kind, detail).
    steps: list[tuple[str, ...]]
    end_reason: str
    outcome: tuple[str, str]
    turn_outcomes: list[str] = field(default_factory=list)
    #: Each turn's end of speech to first audio (ms).
    first_audio_ms: float = 200.0

    @property
    def answered_at(self) -> datetime:
        return T0 + timedelta(minutes=self.minute)


KNOWN: list[KnownCall] = [
    KnownCall(
        "answered-then-goodbye",
        0,
        30.0,
        [
            ("exact", "Where is my order?", "order_status", "You can follow your order..."),
            ("exact", "Goodbye", "goodbye", "Thanks for calling."),
            ("event", "post_call_answer", "yes"),
        ],
        "bot_hangup",
        ("resolved", "goodbye"),
        ["answered", "answered"],
        first_audio_ms=300.0,
    ),
    KnownCall(
        "transfer-request",
        10,
        20.0,
        [
            ("semantic", "Can I talk to a person?", "talk_to_person", "Putting you through."),
            ("event", "transfer", "sip:agents@pbx"),
        ],
        "transferred",
        ("transferred", "asked"),
        ["answered"],
        first_audio_ms=500.0,
    ),
    KnownCall(
        "no-then-put-through",
        20,
        40.0,
        [
            ("confirm", "My parcel never came", "order_status", "Is it about your order?"),
            ("fallback", "No", "", "I am not sure. Shall I put you through to a colleague?"),
            ("confirmed", "Yes please", "talk_to_person", "Putting you through."),
            ("event", "transfer", "sip:agents@pbx"),
        ],
        "transferred",
        ("transferred", "declined"),
        ["confirmed_no", "declined", "answered"],
        first_audio_ms=900.0,
    ),
    KnownCall(
        "hangup-after-not-sure",
        70,
        15.0,
        [("fallback", "Do you sell gift cards?", "", "I am not sure about that.")],
        HANGUP,
        ("abandoned", "not_sure"),
        ["declined"],
    ),
    KnownCall(
        "hangup-in-queue",
        80,
        10.0,
        [("event", "queued", "position 1"), ("event", "queue_abandoned", "waited 10.0 s")],
        HANGUP,
        ("abandoned", "queue"),
        [],
    ),
    KnownCall(
        "silence-until-the-timer",
        24 * 60 + 5,
        25.0,
        [
            ("event", "silence_prompt", "8 s quiet"),
            ("event", "call_limit", "silence"),
            ("fallback", "", "", "Goodbye."),
        ],
        "silence",
        ("abandoned", "silence"),
        ["no_speech"],
    ),
]


def mono_at(wall: datetime) -> float:
    """The ``time.monotonic()`` value of a wall-clock time (as the call log converts back)."""
    return time.monotonic() - (time.time() - wall.timestamp())


def report(log: CallLog, call: KnownCall) -> None:
    """Report ``call`` to ``log`` as a call session does: answer, turns, events, end."""
    start = mono_at(call.answered_at)
    log.call_answered(
        call.sip_call_id, caller="sip:+4930555@pbx", callee="sip:bot@pbx", answered_at=start
    )
    for n, step in enumerate(call.steps, 1):
        if step[0] == "event":
            log.event(call.sip_call_id, step[1], step[2], start + n)
            continue
        route, words, intent, answer = step
        turn = Turn(call_id=call.sip_call_id, transcript=words, answer=answer)
        turn.route = route  # type: ignore[assignment]
        turn.intent = intent or None
        turn.mark("speech_end", start + n)
        turn.mark("eot_decided", start + n + 0.05)
        turn.mark("first_audio_out", start + n + call.first_audio_ms / 1000)
        log.turn_finished(turn)
    log.call_ended(call.sip_call_id, call.end_reason, start + call.length_s)
