"""A caller pauses for a second mid-sentence, over real SIP: one turn, one answer, and the
bot silent through the pause."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from bot.profile import DEFAULT_PROFILE, load_profile
from testkit.botproc import BotProcess
from testkit.paused_speech import say_with_pause
from testkit.voices import write_wav
from testkit.wire import FRAME_MS, segments, voiced_frames
from tests.e2e.conftest import Listener
from tests.support.baresip import baresip_call
from tests.support.text import word_error_rate

pytestmark = [pytest.mark.sip, pytest.mark.models]

RATE = 8000
BEFORE, AFTER = "I'd like to change", "the delivery address on my order."


async def test_a_pause_mid_sentence_gets_one_answer_to_the_whole_request(
    bot: BotProcess, listener: Listener, tmp_path: Path
) -> None:
    # One sentence with a 1 s silence inside (one intonation contour, as a person pausing
    # mid-thought), after the greeting has played.
    utterance = say_with_pause(BEFORE, AFTER, 1000, voice="en-us")
    lead, tail = bytes(int(6.0 * RATE) * 2), bytes(14 * RATE * 2)
    source = tmp_path / "caller.wav"
    write_wav(source, lead + utterance + tail)

    first_line = len(bot.lines)
    call = baresip_call(bot.uri, source, tmp_path / "baresip", timeout_s=45)

    # The caller's two stretches of speech, and the pause between them, as sent.
    spoke = segments(voiced_frames(call.sent), max_gap_ms=400)
    assert len(spoke) >= 2, spoke
    halves = segments(voiced_frames(call.sent), max_gap_ms=1500)
    assert len(halves) == 1, halves
    gaps = [(a[1], b[0]) for a, b in itertools.pairwise(spoke)]
    pause = max(gaps, key=lambda g: g[1] - g[0])
    assert (pause[1] - pause[0]) * FRAME_MS >= 800, gaps
    at = [i * FRAME_MS * RATE // 1000 for i in (*pause, halves[0][1])]

    # Nothing from the bot while the caller paused; its answer after the whole request.
    assert voiced_frames(call.received[at[0] : at[1]]).sum() == 0, "the bot spoke in the pause"
    answer_audio = call.received[at[2] :]
    assert voiced_frames(answer_audio).sum() * FRAME_MS >= 500, "the bot did not answer"
    answer = await listener.hear(answer_audio)
    # What the caller heard is the bot's reply to the whole request, as the bot heard it:
    # where it heard the request (its key word, "address"), the change of address's answer
    # or the question whether that is what they want; where a loaded machine's recognizer
    # lost that word ("the delivery of this on my order"), a question about what it did
    # hear. Never the apology, nor "not sure", nor an answer to the first half alone.
    profile = load_profile(DEFAULT_PROFILE)
    intent = next(i for i in profile.intents if i.name == "change_address")
    turn_text = bot.records("turn_text", since=first_line)[-1]
    said, decision = turn_text["answer"], bot.records("turn", since=first_line)[-1]["decision"]
    seen = (said, turn_text.get("transcript"), decision)
    if "address" in turn_text["transcript"].lower():
        assert said in (intent.answer, intent.confirm), seen
    else:
        assert decision is not None and decision["kind"] == "ask", seen
    assert said not in (profile.apology, profile.unsure), seen
    assert word_error_rate(said, answer) <= 0.35, answer

    # One turn, made of both halves of the sentence.
    turns = bot.records("turn", since=first_line)
    texts = [r["transcript"] for r in bot.records("turn_text", since=first_line)]
    assert len(turns) == 1 and len(texts) == 1, texts
    heard = set(re.findall(r"[a-z']+", texts[0].lower()))
    assert "change" in heard, texts
    assert heard & {"delivery", "address", "order"}, texts
