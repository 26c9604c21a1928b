"""The answer guard stage: generated clauses checked, refusals replaced and reported."""

from __future__ import annotations

from bot.answers.guard import RECAP, Refusal
from bot.pipeline.frames import PlayAudio, ResponseDone, Speak
from bot.pipeline.processor import Collector
from bot.pipeline.stages.answer_guard import AnswerGuard
from bot.pipeline.turn import Turn
from bot.pipeline.turnlog import turn_record
from bot.profile import DEFAULT_PROFILE, KnowledgeEntry, load_profile

UNSURE = "I am not sure about that."
ENTRY = "Standard delivery costs 4.95 dollars, and it is free on orders over 50 dollars."


def _guard() -> tuple[AnswerGuard, Collector, list[tuple[int, str]]]:
    refused: list[tuple[int, str]] = []

    def on_refusal(turn: Turn, refusal: Refusal) -> None:
        refused.append((turn.index, str(refusal)))

    guard = AnswerGuard(unsure=UNSURE, unsure_pcm=b"\x00\x01", known_names=("Acme",),
                        on_refusal=on_refusal)  # fmt: skip
    sink = Collector()
    guard.link(sink)
    return guard, sink, refused


async def _answer(guard: AnswerGuard, turn: Turn, *clauses: str) -> None:
    for i, clause in enumerate(clauses):
        final = i == len(clauses) - 1
        await guard.process(Speak(turn=turn, text=clause, generated=True, final=final))
    await guard.process(ResponseDone(turn=turn))


async def test_an_invented_price_is_replaced_by_the_honest_fallback() -> None:
    guard, sink, refused = _guard()
    turn = Turn(call_id="c", transcript="How much does the literary cost?")
    await _answer(guard, turn, "The literary cost is", "$10.00.", "Anything else?")
    texts = [(type(f).__name__, getattr(f, "text", "")) for f in sink.frames]
    assert texts == [
        ("Speak", "The literary cost is"),
        ("PlayAudio", UNSURE),
        ("ResponseDone", ""),
    ]
    assert refused == [(turn.index, "unsupported_fact: 10")]
    assert turn.answer == f"The literary cost is {UNSURE}"
    assert turn.refusals == ["unsupported_fact: 10"]
    assert turn_record(turn)["refusals"] == ["unsupported_fact"]  # no words in the log


async def test_with_an_entry_the_entry_is_said_instead() -> None:
    guard, sink, _ = _guard()
    turn = Turn(call_id="c", transcript="How much is shipping?", knowledge=(ENTRY,))
    await _answer(guard, turn, "Shipping is 7 dollars.")
    spoken = [f for f in sink.frames if isinstance(f, Speak)]
    assert [s.text for s in spoken] == [ENTRY]
    assert not spoken[0].generated  # the operator's words: not checked again
    # Said again in the same call, the entry's words would be a repeat: a new call.
    guard, sink, _ = _guard()
    ok = Turn(call_id="c", transcript="How much is shipping?", knowledge=(ENTRY,))
    await _answer(guard, ok, "It is free on orders over fifty dollars.")
    assert sink.frames[-2] == Speak(
        turn=ok, text="It is free on orders over fifty dollars.", generated=True, final=True
    )


async def test_the_model_repeating_itself_is_cut_and_an_unfinished_end_dropped() -> None:
    guard, sink, refused = _guard()
    said = "It is nice to hear from you today."
    first = Turn(call_id="c", transcript="hello")
    await _answer(guard, first, said)
    second = Turn(call_id="c", transcript="are you there")
    await _answer(guard, second, "Right.", "It is nice to hear from you today.")
    third = Turn(call_id="c", transcript="thanks")
    await _answer(guard, third, "You are welcome.", "Is there")
    assert [r for _, r in refused] == ["repeat: it is nice to hear", "unfinished: Is there"]
    assert second.answer == f"Right. {UNSURE}"
    assert third.answer == "You are welcome."
    assert not any(isinstance(f, PlayAudio) and f.turn is third for f in sink.frames)


async def test_operator_speech_passes_unchecked() -> None:
    guard, sink, refused = _guard()
    turn = Turn(call_id="c", transcript="hours")
    frame = Speak(turn=turn, text="We open at 9 am on Monday.")
    await guard.process(frame)
    assert sink.frames == [frame]
    assert refused == []


async def test_what_the_caller_heard_is_not_said_again() -> None:
    guard, _sink, refused = _guard()
    first = Turn(call_id="c", transcript="How much is shipping?", knowledge=(ENTRY,))
    await guard.process(Speak(turn=first, text=ENTRY))  # the entry, spoken as written
    await guard.process(ResponseDone(turn=first))
    again = Turn(call_id="c", transcript="and over fifty?", knowledge=(ENTRY,))
    await _answer(guard, again, "It is free on orders over 50 dollars.")
    assert [r for _, r in refused] == ["repeat: it is free on orders"]
    # The entry was heard already: the honest fallback, not the same words again.
    assert again.answer == UNSURE


async def test_a_fallback_entry_leaves_out_what_the_model_said_of_it() -> None:
    guard, _sink, refused = _guard()
    entry = "You can pay by card or with PayPal. We do not accept cash."
    turn = Turn(call_id="c", transcript="how can I pay", knowledge=(entry,))
    await _answer(guard, turn, "We do not accept cash.", "You can pay with Venmo.")
    assert [r for _, r in refused] == ["unsupported_fact: venmo"]
    assert turn.answer == "We do not accept cash. You can pay by card or with PayPal."


async def test_an_entry_spoken_again_as_written_becomes_a_recap() -> None:
    guard, sink, _ = _guard()
    first = Turn(call_id="c", transcript="How much is shipping?", knowledge=(ENTRY,))
    await _answer(guard, first, "Shipping is 7 dollars.")  # refused: the entry instead
    assert first.answer == ENTRY
    again = Turn(call_id="c", transcript="what does delivery cost", route="knowledge")
    await guard.process(Speak(turn=again, text=ENTRY))
    assert sink.frames[-1] == Speak(turn=again, text=f"{RECAP} s{ENTRY[1:]}")
    assert again.answer == f"{RECAP} s{ENTRY[1:]}"
    # Another intent's or entry's words, not heard before, pass as written.
    other = Turn(call_id="c", transcript="returns?", route="knowledge")
    await guard.process(Speak(turn=other, text="Returns are free within 30 days."))
    assert sink.frames[-1] == Speak(turn=other, text="Returns are free within 30 days.")


async def test_a_recap_synthesized_at_start_plays_from_its_audio() -> None:
    said = f"{RECAP} s{ENTRY[1:]}"

    def say(turn: Turn | None, text: str) -> Speak | PlayAudio:  # the call's ready audio
        if text == said:
            return PlayAudio(turn=turn, pcm=b"\x00\x02", text=text)
        return Speak(turn=turn, text=text)

    guard = AnswerGuard(unsure=UNSURE, say=say)
    sink = Collector()
    guard.link(sink)
    first = Turn(call_id="c", transcript="delivery cost?", route="knowledge")
    await guard.process(PlayAudio(turn=first, pcm=b"\x00\x01", text=ENTRY))
    again = Turn(call_id="c", transcript="what does delivery cost", route="knowledge")
    await guard.process(PlayAudio(turn=again, pcm=b"\x00\x01", text=ENTRY))
    assert sink.frames[-1] == PlayAudio(turn=again, pcm=b"\x00\x02", text=said)
    assert again.answer == said
    entry = KnowledgeEntry(topic="delivery_cost", answer=ENTRY, questions=["Delivery cost?"])
    profile = load_profile(DEFAULT_PROFILE).model_copy(update={"knowledge": [entry]})
    assert said in AnswerGuard.phrases(profile)  # synthesized at start


async def test_an_entry_heard_before_and_asked_about_again_is_a_recap_after_a_yes() -> None:
    guard, sink, _ = _guard()
    first = Turn(call_id="c", transcript="delivery cost?", route="knowledge", knowledge=(ENTRY,))
    await guard.process(Speak(turn=first, text=ENTRY))
    # A topic question answered "yes" later in the call: the entry again, as a repeat.
    yes = Turn(call_id="c", transcript="Yes.", route="confirmed", knowledge=(ENTRY,))
    await guard.process(PlayAudio(turn=yes, pcm=b"\x00\x01", text=ENTRY))
    assert sink.frames[-1] == Speak(turn=yes, text=f"{RECAP} s{ENTRY[1:]}")
    # An intent's answer after a yes (no entry) passes as written, heard before or not.
    intent = Turn(call_id="c", transcript="Yes.", route="confirmed")
    await guard.process(PlayAudio(turn=intent, pcm=b"\x00\x01", text=ENTRY))
    assert sink.frames[-1] == PlayAudio(turn=intent, pcm=b"\x00\x01", text=ENTRY)
