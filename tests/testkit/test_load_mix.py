"""The route-mix load benchmark's pieces: each call's plan, its steps found on the wire
(spoken and keyed), their call-log turns, and the summary by the logged route."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from testkit.calllog_reader import LogTurn
from testkit.load_mix import (
    MIX,
    PLAN,
    CallPlan,
    Step,
    StepResult,
    by_route,
    eot_share,
    join_steps,
    key_times,
    misrouted,
    plan_call,
    route_label,
    steps_on_wire,
    summarize,
)
from testkit.rtp_capture import Packet
from testkit.wire_calls import Media, WireCall

CALLER_RTP = ("127.0.0.1", 11000)
BOT_RTP = ("127.0.0.1", 21000)
#: The capture clock of plan time 0 (the call's first media tick).
ORIGIN = 100.0


def one_second(text: str, voice: str) -> bytes:
    return bytes(16000)  # 1 s at 8 kHz


def voiced_inside(pcm: bytes) -> tuple[float, float]:
    return 0.1, 0.9


def test_a_call_asks_the_whole_mix_rotated_by_caller() -> None:
    plans = [
        plan_call(
            i, "slt", one_second, voiced_inside, lead_s=5.0, answer_window_s=10.0, jitter_s=0.0
        )
        for i in range(3)
    ]
    for i, plan in enumerate(plans):
        kinds = [s.kind for s in plan.steps]
        assert sorted(kinds) == sorted(PLAN)
        assert kinds[0] == PLAN[i % len(PLAN)]
    first = plans[0]
    # Each spoken step is in the audio at its time; the keypad step is a key at its time.
    assert [at for at, _ in first.audio] == [s.at_s for s in first.steps if not s.keyed]
    (key,) = [s for s in first.steps if s.keyed]
    assert first.keys == ((key.at_s, MIX["keypad"][0]),)
    assert first.steps[0].start_s == pytest.approx(5.1)
    assert first.steps[1].at_s == pytest.approx(5.0 + 1.0 + 10.0)
    # Two cached intents in one call are two different questions.
    cached = [s.text for s in first.steps if s.kind == "cache"]
    assert len(cached) == 2 and len(set(cached)) == 2
    assert first.seconds > first.steps[-1].end_s + 10.0


def rtp(pt: int, seq: int) -> bytes:
    return struct.pack("!BBHII", 0x80, pt, seq, seq * 160, 1234) + bytes(160)


def test_keys_are_the_caller_s_event_packets_not_its_audio() -> None:
    call = WireCall("c1", ("127.0.0.1", 40000), invite_at=1.0)
    call.caller_audio, call.bot_audio = CALLER_RTP, BOT_RTP
    packets = [
        Packet(2.0, CALLER_RTP, BOT_RTP, rtp(0, 1)),  # audio
        Packet(3.0, CALLER_RTP, BOT_RTP, rtp(101, 2)),  # key
        Packet(3.1, CALLER_RTP, BOT_RTP, rtp(101, 3)),
        Packet(3.2, BOT_RTP, CALLER_RTP, rtp(101, 4)),  # the other way: not the caller's
        Packet(3.3, ("127.0.0.1", 11002), BOT_RTP, rtp(101, 6)),  # another source port
        Packet(0.5, CALLER_RTP, BOT_RTP, rtp(101, 5)),  # before the call
    ]
    assert key_times(packets, call) == [3.0, 3.1, 3.3]


def media(voiced_spans: list[tuple[float, float]], until: float, origin: float) -> Media:
    """A 20 ms packet stream from ``origin`` to ``origin + until``, voiced in the spans
    (plan seconds)."""
    rows = []
    for n, t in enumerate(np.arange(0.0, until, 0.02)):
        voiced = any(a <= t < b for a, b in voiced_spans)
        rows.append((origin + float(t), n, n * 160, voiced, 0))
    return Media.build(rows)


@pytest.fixture
def plan() -> CallPlan:
    steps = (
        Step("cache", "Where is my parcel?", 1.0, 1.1, 2.0),
        Step("keypad", "3", 5.0, 5.0, 5.16),
        Step("decline", "Do you have it in blue?", 9.0, 9.1, 10.0),
    )
    return CallPlan(0, "slt", steps, (), ((5.0, "3"),), 14.0)


@pytest.fixture
def call() -> WireCall:
    c = WireCall("c1", ("127.0.0.1", 40000), invite_at=ORIGIN - 1.0)
    # The caller's packets: its first voiced packet is the first step's first voiced frame.
    c.up = media([(1.1, 2.0), (9.1, 10.0)], 14.0, ORIGIN)
    # The bot answers 300 ms after the question, 100 ms after the key is pressed (its
    # first event packet; before the key's last), and 400 ms after the last question.
    c.down = media([(2.28, 4.0), (5.1, 7.0), (10.38, 12.0)], 14.0, ORIGIN)
    return c


def test_each_step_found_on_the_wire_with_the_bot_s_answer(plan: CallPlan, call: WireCall) -> None:
    keys = [ORIGIN + 5.0, ORIGIN + 5.06, ORIGIN + 5.16]
    steps = steps_on_wire(call, plan, keys)
    # Packets are 20 ms apart: each time is known to a packet.
    assert [s.v2v_ms for s in steps] == [
        pytest.approx(300.0, abs=21.0),
        pytest.approx(100.0, abs=21.0),
        pytest.approx(400.0, abs=21.0),
    ]
    assert steps[1].start == ORIGIN + 5.0
    assert not any(s.overlapped for s in steps)


def test_a_question_asked_over_the_bot_is_not_measured(plan: CallPlan, call: WireCall) -> None:
    call.down = media([(1.5, 2.1)], 14.0, ORIGIN)  # still talking as the caller finished
    steps = steps_on_wire(call, plan, [])
    assert steps[0].overlapped and steps[0].v2v_ms is None
    assert steps[1].start is None and steps[1].v2v_ms is None  # no key on the wire


def turn(route: str, speech_end: float, seq: int = 0) -> LogTurn:
    stages = {"speech_end": speech_end, "eot_decided": speech_end + 0.2}
    return LogTurn(seq=seq, route=route, intent=None, barged_in=False, stages=stages, model_ms={})


def test_each_step_gets_the_last_logged_turn_that_ended_inside_it(
    plan: CallPlan, call: WireCall
) -> None:
    wall = 5000.0  # the call log's clock: capture time + wall
    steps = steps_on_wire(call, plan, [ORIGIN + 5.0, ORIGIN + 5.16])
    logged = [
        turn("fallback", wall + ORIGIN + 1.5),  # the question cut at a pause...
        turn("exact", wall + ORIGIN + 2.05),  # ...and its end: the step's turn
        turn("none", wall + ORIGIN + 6.0),  # noise the bot ignored
        turn("keypad", wall + ORIGIN + 5.0),
    ]
    joined = join_steps(steps, logged, lambda t: t - wall)
    assert [route_label(t) for t in joined] == ["cache", "keypad", "unjoined"]


def test_a_step_said_in_line_is_counted_apart() -> None:
    assert route_label(None, in_line=True) == "in line"
    assert route_label(None, in_line=False) == "unjoined"
    # A turn the bot logged is its route, whatever the queue said.
    assert route_label(turn("exact", 1.0), in_line=True) == "cache"


def step(planned: str, route: str, v2v: float | None, eot: float | None = None) -> StepResult:
    return StepResult(calls=1, caller=0, planned=planned, route=route, v2v_ms=v2v, eot_ms=eot)


def test_the_summary_counts_each_step_under_its_logged_route() -> None:
    steps = [
        step("cache", "cache", 300.0, 200.0),
        step("cache", "cache", 500.0, 300.0),
        step("question", "fallback", 2000.0, 1900.0),  # misrouted: counted as "not sure"
        step("decline", "fallback", None),  # not measured
    ]
    groups = by_route(steps)
    assert sorted(groups) == ["cache", "fallback"]
    assert summarize([s.v2v_ms for s in groups["cache"] if s.v2v_ms is not None]) == (
        2,
        400.0,
        pytest.approx(490.0),
        500.0,
    )
    assert eot_share(groups["cache"]) == pytest.approx(500.0 / 800.0)
    assert eot_share([step("cache", "cache", None, 100.0)]) is None
    assert misrouted(steps) == {("question", "fallback"): 1}
    assert summarize([]) == (0, None, None, None)
