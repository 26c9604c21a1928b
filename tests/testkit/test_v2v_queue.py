"""The wire benchmark with the node's call queue: questions asked in line are set apart,
and each level's waits, outcomes and apologies are reported."""

from __future__ import annotations

import dataclasses

from testkit.calllog_reader import LoggedCall
from testkit.v2v_report import report
from testkit.v2v_results import evaluate
from tests.testkit.test_v2v_wire import FakeCall, collected, log_turn


def test_a_question_asked_in_line_is_not_a_turn_and_not_unanswered() -> None:
    fake = FakeCall([35, 55])  # in line the caller hears hold audio: voiced, not an answer
    ends = [fake.times[i] for i in fake.last_caller_packet]
    second = log_turn(1, "llm", 1000 + ends[1] + 0.15, 0.9)
    logged = LoggedCall(
        turns=[dataclasses.replace(second, error="llm: timed out")],
        dequeued_at=1000 + ends[0] + 1.0,  # after the first question ended
        queue_wait_s=4.5,
        queue_outcome="dequeued",
    )
    res = evaluate(collected(fake, logged))
    [call] = res.calls
    assert call.queue_outcome == "dequeued" and call.queue_wait_s == 4.5
    assert not call.dropped, call.why
    first, later = res.turns
    assert first.in_line and first.route == "in_line" and first.v2v_ms is None
    assert not first.answered and first.silence_ms is None
    assert not later.in_line and later.route == "llm" and later.apology
    text = report(res, "cmd")
    assert "| 1 | 1 | 1 | 1 | 0 / 0 / 0 | 4.5 / 4.5 / 4.5 | 1 | 1 |" in text


def test_a_caller_who_never_got_the_bot_is_a_dropped_call() -> None:
    fake = FakeCall([35, 55])
    logged = LoggedCall(queue_wait_s=120.0, queue_outcome="queue_timeout")
    res = evaluate(collected(fake, logged))
    [call] = res.calls
    assert call.dropped and "call queue: queue_timeout" in call.why
    assert all(t.in_line for t in res.turns)
    assert "| 1 | 1 | 1 | 0 | 1 / 0 / 0 | 120.0 / 120.0 / 120.0 | 2 | 0 |" in report(res, "cmd")


def test_without_a_queue_nothing_is_set_apart() -> None:
    res = evaluate(collected(FakeCall([35, 55]), LoggedCall()))
    assert not any(t.in_line for t in res.turns)
    assert "| 1 | 1 | 0 | 0 | 0 / 0 / 0 | - | 0 | 0 |" in report(res, "cmd")
