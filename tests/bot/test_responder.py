"""The responder's conversation history: bounded, and trimmed so the prompt prefix holds."""

from __future__ import annotations

from bot.frames import Transcript
from bot.processor import Collector
from bot.profile import load_profile
from bot.responder import Responder
from bot.settings import DEFAULT_PROFILE
from bot.turn import Turn
from tests.bot.fakes import ScriptedLLM


async def test_history_is_trimmed_in_halves_so_the_prompt_prefix_is_reused() -> None:
    profile = load_profile(DEFAULT_PROFILE)
    profile = profile.model_copy(
        update={"llm": profile.llm.model_copy(update={"history_turns": 4})}
    )
    llm = ScriptedLLM(["Sure."])
    await llm.load()
    responder = Responder(llm, profile, apology_pcm=b"")
    responder.link(Collector())
    for i in range(9):
        await responder.process(Transcript(turn=Turn(call_id="c"), text=f"question {i}"))
    sizes = [len(p) for p in llm.prompts]  # system + history + the new question
    # history grows to 4 turns (8 messages), then drops to the newest 2 turns at once
    assert sizes == [2, 4, 6, 8, 10, 6, 8, 10, 6]
    for before, after in zip(llm.prompts, llm.prompts[1:], strict=False):
        if len(after) > len(before):  # no trim between them: the old prompt is a prefix
            assert list(after[: len(before)]) == list(before)
    last = llm.prompts[-1]
    assert [m.content for m in last if m.role == "user"][-1] == "question 8"
    assert len(last) <= 1 + 2 * 4 + 1
