"""Barge-in and concurrent calls, heard from the calling side with the project's dialer."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from telephony.dialer import dial
from testkit.botproc import BotProcess
from testkit.voices import speak
from testkit.wire import FRAME_MS, segments, voiced_frames
from tests.e2e.conftest import Listener

pytestmark = [pytest.mark.sip, pytest.mark.models]

RATE = 8000


def voiced_ms(samples: np.ndarray, start_ms: int, end_ms: int) -> int:
    frames = voiced_frames(samples[start_ms * 8 : end_ms * 8])
    return int(frames.sum()) * FRAME_MS


async def test_caller_talking_over_the_bot_stops_it(bot: BotProcess) -> None:
    interruption = speak("Sorry, I just need to know where my parcel is right now.", voice="rms")
    result = await dial(bot.uri, play=interruption, play_at_s=0.8, record_seconds=12)
    assert result.sip_final_status == 200

    spoke = segments(voiced_frames(result.sent), max_gap_ms=600)
    assert len(spoke) == 1
    onset_ms, end_ms = spoke[0][0] * FRAME_MS, (spoke[0][1] + 1) * FRAME_MS
    # The greeting was playing when the caller started talking...
    assert voiced_ms(result.received, max(0, onset_ms - 1000), onset_ms) >= 300
    # ...and stopped: barge_in_ms (200) to decide, plus jitter buffers and a frame or two.
    assert voiced_ms(result.received, onset_ms + 500, end_ms) == 0
    # Then the bot listens, and answers once the caller is done.
    assert voiced_ms(result.received, end_ms, len(result.received) // 8) >= 500


async def test_five_concurrent_calls_each_get_greeted_and_answered(
    bot: BotProcess, listener: Listener
) -> None:
    questions = [
        ("What time do you open tomorrow?", "slt"),
        ("Can I change my delivery address?", "rms"),
        ("Where is my order?", "awb"),
        ("How do I return a jacket?", "kal16"),
        ("Do you ship to Canada?", "slt"),
    ]
    calls = [
        dial(bot.uri, play=speak(text, voice=voice), play_at_s=4.0, record_seconds=24)
        for text, voice in questions
    ]
    results = await asyncio.gather(*calls)
    for (text, _), result in zip(questions, results, strict=True):
        assert result.sip_final_status == 200, (text, result.error)
        spoke = segments(voiced_frames(result.sent), max_gap_ms=600)
        assert len(spoke) == 1
        onset_ms, end_ms = spoke[0][0] * FRAME_MS, (spoke[0][1] + 1) * FRAME_MS
        greeting = await listener.hear(result.received[: onset_ms * 8])
        assert "calling" in greeting.lower(), greeting
        assert voiced_ms(result.received, end_ms, len(result.received) // 8) >= 500, text


async def test_caller_talking_over_a_long_answer_stops_it(bot: BotProcess) -> None:
    # An exact match of the "returns" intent: a seven-second answer, deterministic.
    question = speak("What is your return policy?", voice="awb")
    interruption = speak("Okay, and can I speak to a person about it?", voice="awb")
    result = await dial(bot.uri, script=[(4.0, question), (9.0, interruption)], record_seconds=16)
    assert result.sip_final_status == 200
    spoke = segments(voiced_frames(result.sent), max_gap_ms=600)
    assert len(spoke) == 2, spoke
    asked_end = (spoke[0][1] + 1) * FRAME_MS
    onset_ms, end_ms = spoke[1][0] * FRAME_MS, (spoke[1][1] + 1) * FRAME_MS
    # The bot was in the middle of its answer (about 7 s of audio) when the caller cut in:
    # it had started less than 4 s before and was talking in the second before.
    answer_start = asked_end + FRAME_MS * int(
        np.flatnonzero(voiced_frames(result.received[asked_end * 8 :]))[0]
    )
    assert onset_ms - answer_start < 4000, (answer_start, onset_ms)
    assert voiced_ms(result.received, asked_end, onset_ms) >= 1500
    assert voiced_ms(result.received, onset_ms - 1000, onset_ms) >= 300
    # ...and went quiet within barge_in_ms plus jitter buffers, for as long as the caller spoke.
    assert voiced_ms(result.received, onset_ms + 500, end_ms) == 0
