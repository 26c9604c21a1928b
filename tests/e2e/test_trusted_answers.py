"""A ten-question call of a new caller: no fact the operator did not write, no repeats.

Before the knowledge base and the answer guard, the packaged model answered such a call
with invented prices and policies ("The literary cost is $10.00.") and, once one answer
went wrong, repeated it for the rest of the call.

The call is made to a node with the model wording retrieved entries
(``knowledge_matching.extractive = false``): it checks the answer guard on the model's own
words, which the default extractive mode keeps to small talk.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.answers.guard import facts
from bot.answers.text import sentences
from bot.profile import DEFAULT_PROFILE, load_profile
from testkit.botproc import run_bot
from testkit.voices import speak, write_wav
from tests.support.baresip import baresip_call

pytestmark = [pytest.mark.sip, pytest.mark.models]

RATE = 8000
#: Asked as a new caller would, none of them an example of the profile's.
QUESTIONS = (
    "How much does delivery cost?",
    "Do you sell gift cards?",
    "Can I pay with a credit card over the phone?",
    "Will you match a lower price from another shop?",
    "Can I pay in cash when it arrives?",
    "Do you have a shop I can visit in Denver?",
    "How many days until I get my money back?",
    "Is there a guarantee if it breaks?",
    "Do you give a discount to students?",
    "What is your email address?",
)
GAP_S = 9.0  # silence after each question: room for the answer


def _sentences(text: str) -> list[str]:
    return [s.lower() for s in sentences(text)]


def model_worded(path: Path) -> Path:
    """The default profile with the model wording the entries below ``direct_score``
    (``extractive = false``), so that the guard on the model's text is what this call tests."""
    text, on = DEFAULT_PROFILE.read_text(), "\nextractive = true\n"
    assert text.count(on) == 1, "the default profile states extractive = true once"
    path.write_text(text.replace(on, "\nextractive = false\n"))
    return path


async def test_a_ten_question_call_invents_nothing_and_repeats_nothing(tmp_path: Path) -> None:
    profile_path = model_worded(tmp_path / "profile.toml")
    profile = load_profile(profile_path)
    assert not profile.knowledge_matching.extractive
    audio = bytes(int(4.5 * RATE) * 2)
    for question in QUESTIONS:
        audio += speak(question, voice="awb") + bytes(int(GAP_S * RATE) * 2)
    source = tmp_path / "caller.wav"
    write_wav(source, audio)
    # A first node synthesizes every fixed phrase (over 300 s on a loaded, slow machine),
    # as the other tests' own nodes wait for.
    with run_bot(profile=profile_path, timeout_s=420) as bot:
        baresip_call(bot.uri, source, tmp_path / "baresip", timeout_s=160)
        texts = bot.records("turn_text")
        turns = {r["turn"]: r for r in bot.records("turn")}
    assert len(texts) >= 8, f"the bot heard {len(texts)} of 10 questions: {texts}"
    # What the operator wrote, and what the caller said: the only places a fact may come from.
    written = [
        profile.greeting, profile.apology, profile.unsure, profile.decline,
        *profile.fillers, *(i.answer for i in profile.intents),
        *(e.answer for e in profile.knowledge),
    ]  # fmt: skip
    allowed = set().union(*(facts(t) for t in written))
    operator_sentences = {s for t in written for s in _sentences(t)}
    generated: list[str] = []
    for record in texts:
        answer, heard = record["answer"], record["transcript"]
        print(f"{turns[record['turn']]['route']:>9}  {heard!r} -> {answer!r}")
        invented = facts(answer) - allowed - facts(heard)
        assert not invented, f"{heard!r} -> {answer!r}: {sorted(invented)} not in the profile"
        route = turns[record["turn"]]["route"]
        if route == "llm":  # the model's own words (operator phrases may recur)
            generated += [s for s in _sentences(answer) if s not in operator_sentences]
    repeated = {s for s in generated if generated.count(s) > 1}
    assert not repeated, f"repeated sentences: {repeated}"
    routes = [turns[r["turn"]]["route"] for r in texts]
    assert routes.count("knowledge") + routes.count("semantic") + routes.count("exact") >= 4, (
        f"most covered questions should be answered from what the operator wrote: {routes}"
    )
