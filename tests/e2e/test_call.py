"""A real SIP client calls a real bot process over loopback and has a conversation."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from bot.profile import DEFAULT_PROFILE, load_profile
from testkit.botproc import BotProcess
from testkit.voices import speak, write_wav
from testkit.wire import FRAME_MS, segments, voiced_frames
from tests.e2e.conftest import Listener
from tests.support.baresip import baresip_call
from tests.support.text import word_error_rate

pytestmark = [pytest.mark.sip, pytest.mark.models]

RATE = 8000
QUESTION = "Where is my order? I placed it last week."


async def test_baresip_call_greeting_answer_and_transcript(
    bot: BotProcess, listener: Listener, tmp_path: Path
) -> None:
    profile = load_profile(DEFAULT_PROFILE)
    utterance = speak(QUESTION, voice="slt")
    lead, tail = bytes(int(4.5 * RATE) * 2), bytes(15 * RATE * 2)
    source = tmp_path / "caller.wav"
    write_wav(source, lead + utterance + tail)

    first_line = len(bot.lines)
    call = baresip_call(bot.uri, source, tmp_path / "baresip", timeout_s=35)

    # On the caller's side: where the caller spoke, and what it heard before and after.
    spoke = segments(voiced_frames(call.sent), max_gap_ms=600)
    assert len(spoke) == 1, f"caller utterance not found in what baresip sent: {spoke}"
    start, end = (i * FRAME_MS * RATE // 1000 for i in spoke[0])
    greeting = await listener.hear(call.received[:start])
    assert word_error_rate(profile.greeting, greeting) <= 0.35, greeting

    answer_audio = call.received[end:]
    assert voiced_frames(answer_audio).sum() * FRAME_MS >= 500, "the bot did not answer"
    answer = await listener.hear(answer_audio)
    # What the caller heard is the order-status answer (not the apology, not "not sure").
    order_status = next(i for i in profile.intents if i.name == "order_status")
    said_last = bot.records("turn_text", since=first_line)[-1]["answer"]
    assert said_last == order_status.answer, said_last
    # Heard from its start (the keypad's offer to look the order up may follow it).
    head = " ".join(answer.split()[: len(order_status.answer.split())])
    assert word_error_rate(order_status.answer, head) <= 0.35, answer

    # On the bot's side: it heard what the caller said, and timed every stage.
    # (all of this call's turns). Whisper tiny.en on G.711 audio mishears a word or two
    # ("I placed it" -> "high place to").
    # A pause inside the question can split it into turns whose transcripts overlap (the
    # early turn's answer is cut by the caller going on), so count the question's words
    # heard: 6 of 9 or more.
    heard = " ".join(r["transcript"] for r in bot.records("turn_text", since=first_line))
    said = re.findall(r"[a-z']+", QUESTION.lower())
    got = set(re.findall(r"[a-z']+", heard.lower()))
    assert sum(w in got for w in said) >= 6, heard
    turns = bot.records("turn", since=first_line)
    assert turns, "no turn log line"
    stages = turns[-1]["stages_ms"]
    for stage in ("eot_decided", "transcript_ready", "route_decided", "first_audio_out"):
        assert stage in stages, stages
    if turns[-1]["route"] == "llm":  # the question may be answered from the intent cache
        assert "first_token" in stages, stages
    assert np.isfinite(list(stages.values())).all()
