"""Transfer modes on an in-memory call: bridged, warm (with the agent's summary), a refused
REFER falling back to a bridge, and a target that is not configured.

The telephony side of a bridge (the agent's call, the join) is covered over real SIP in
tests/telephony/test_bridge.py and tests/e2e/test_transfers.py; here the call is fake and
the session, the call control and the call log are the real ones. The calls run on a clock
of the test's (test_call_actions.py's rig).
"""

from __future__ import annotations

from bot.callflow import TransferTarget
from bot.pipeline.session import handoff_summary
from telephony.events import TransferResult
from tests.bot import test_call_actions as actions
from tests.bot.test_call_actions import PROFILE, TARGET, Start
from tests.bot.test_session import voiced_ms

started = actions.started  # the in-memory call and its call log

HOLD = "Please hold"  # 200 ms of tone
GREETING_MS, PUT_THROUGH_MS, FAILED_MS = 300, 500, 600


def profile(mode: str, **target: object) -> object:
    return PROFILE.model_copy(
        update={
            "transfer_targets": [TransferTarget(uri=TARGET, mode=mode, **target)],  # type: ignore[arg-type]
            "transfer_hold": HOLD,
        }
    )


async def test_a_warm_handoff_briefs_the_agent_then_the_bot_leaves_the_call(
    started: Start,
) -> None:
    bot = await started(profile=profile("warm"))
    await bot.say("when are you open")
    await bot.until(lambda: len(bot.turns) == 1 and bot.call.queued_frames == 0)
    before = voiced_ms(bot.call.sent)
    await bot.say("talk to a person", lead_ms=200)
    await bot.until(lambda: len(bot.call.bridges) == 1)
    ((target, timeout_s, summary),) = bot.call.bridges
    assert (target, timeout_s) == (TARGET, PROFILE.transfer_timeout_s)
    text = handoff_summary(
        PROFILE.handoff_summary, "sip:caller@pbx", ["when are you open", "talk to a person"]
    )
    assert summary and len(summary) == len(text.split()) * 1600  # ToneTTS: 100 ms a word
    await bot.until(lambda: bot.call.queued_frames == 0)
    # The caller heard the answer, then the hold message until the join (the fake agent
    # answers at once: the join cut it short); nothing after the join.
    heard = voiced_ms(bot.call.sent)
    assert before + PUT_THROUGH_MS < heard <= before + PUT_THROUGH_MS + 200, heard
    # Once bridged, what the caller says is for the agent: no turn, no answer, no hang-up.
    await bot.say("goodbye for now", lead_ms=200)
    await bot.call.play(bytes(16000))  # 1 s
    assert len(bot.turns) == 2 and bot.call.hangups == 0 and not bot.task.done()
    assert voiced_ms(bot.call.sent) == heard
    await bot.hang_up()
    row, events = await bot.records()
    assert row["end_reason"] == "transferred"
    assert events == [
        ("transfer", TARGET),
        ("handoff_summary", text),
        ("bridged", f"warm {TARGET}"),
        ("bridge_ended", "caller hung up"),
    ]
    assert text == ("Call from caller. The caller said: when are you open. talk to a person.")


async def test_a_busy_agent_returns_the_caller_to_the_bot(started: Start) -> None:
    bot = await started(
        profile=profile("bridge"), bridge_result=TransferResult(False, 486, "Busy Here")
    )
    await bot.say("talk to a person")
    expected = GREETING_MS + PUT_THROUGH_MS + 200 + FAILED_MS  # ...hold, transfer_failed
    await bot.until(lambda: voiced_ms(bot.call.sent) == expected)
    ((target, _, summary),) = bot.call.bridges
    assert (target, summary) == (TARGET, b"")  # a plain bridge: no summary
    await bot.until(lambda: bot.call.queued_frames == 0)
    await bot.say("when are you open", lead_ms=200)  # the bot listens again
    await bot.until(lambda: len(bot.turns) == 2)
    await bot.hang_up()
    assert [t.intent for t in bot.turns] == ["talk_to_person", "opening_hours"]
    row, events = await bot.records()
    assert row["end_reason"] == "bye"
    assert events == [("transfer", TARGET), ("transfer_failed", "486 Busy Here")]


async def test_a_refused_refer_falls_back_to_a_bridge(started: Start) -> None:
    bot = await started(
        profile=profile("refer", bridge_on_refer_failure=True),
        transfer_result=TransferResult(False, 501, "Not Implemented"),
    )
    await bot.say("talk to a person")
    await bot.until(lambda: len(bot.call.bridges) == 1)
    assert len(bot.call.transfers) == 1
    await bot.call.pass_time(0.2)  # the agent's INVITE and answer
    await bot.hang_up()
    assert bot.call.hangups == 0  # the bridged call is the caller's and the agent's
    row, events = await bot.records()
    assert row["end_reason"] == "transferred"
    assert events == [
        ("transfer", TARGET),
        ("transfer_failed", "501 Not Implemented; bridging"),
        ("bridged", f"bridge {TARGET}"),
        ("bridge_ended", "caller hung up"),
    ]


async def test_a_target_that_is_not_configured_is_refused(started: Start) -> None:
    other = PROFILE.model_copy(
        update={"transfer_targets": [TransferTarget(uri="sip:sales@127.0.0.1:5071")]}
    )
    bot = await started(profile=other)
    await bot.say("talk to a person")  # the intent's target is not in the list
    await bot.until(lambda: voiced_ms(bot.call.sent) == GREETING_MS + PUT_THROUGH_MS + FAILED_MS)
    await bot.hang_up()
    assert bot.call.transfers == [] and bot.call.bridges == []
    row, events = await bot.records()
    assert row["end_reason"] == "bye"
    assert events == [("transfer_refused", TARGET)]


def test_the_summary_names_the_caller_and_their_last_turns() -> None:
    template = PROFILE.handoff_summary
    said = ["hello", "where is my order?", "it is late.", "talk to a person"]
    assert handoff_summary(template, "<sip:+4930123@pbx>;tag=x", said) == (
        "Call from plus 4 9 3 0 1 2 3. The caller said: where is my order. it is late. "
        "talk to a person."
    )
    assert handoff_summary(template, "anonymous", []) == (
        "Call from an unknown number. The caller said: nothing yet."
    )
