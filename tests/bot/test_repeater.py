"""The repeater: "Could you repeat that?" gets the last answer again, word for word."""

from __future__ import annotations

from bot.pipeline.frames import DataFrame, PlayAudio, ResponseDone, Speak, Transcript
from bot.pipeline.processor import Collector
from bot.pipeline.repeater import Repeater
from bot.pipeline.turn import Turn

READY = {"Our phone line is open Monday to Friday.": b"\x01\x00" * 80}


def say(turn: Turn | None, text: str) -> DataFrame:
    pcm = READY.get(text)
    return Speak(turn=turn, text=text) if pcm is None else PlayAudio(turn=turn, pcm=pcm, text=text)


async def _said(repeater: Repeater, sink: Collector, text: str) -> Turn:
    turn = Turn(call_id="c", transcript=text)
    await repeater.process(Transcript(turn=turn, text=text))
    return turn


async def test_the_last_answer_is_said_again() -> None:
    repeater, sink = Repeater(say), Collector()
    repeater.link(sink)
    first = await _said(repeater, sink, "When are you open?")
    first.answer, first.intent = "Our phone line is open Monday to Friday.", "opening_hours"
    again = await _said(repeater, sink, "Sorry, could you repeat that?")
    assert (again.route, again.answer, again.intent) == ("repeat", first.answer, "opening_hours")
    played = [f for f in sink.frames if getattr(f, "turn", None) is again]
    assert isinstance(played[0], PlayAudio) and played[0].text == first.answer
    assert isinstance(played[1], ResponseDone)
    # The repeat went no further: the stages after it saw only the first turn's words.
    assert [f.text for f in sink.frames if isinstance(f, Transcript)] == ["When are you open?"]
    # Asked again, the same answer again (the repeat is not what is repeated next).
    third = await _said(repeater, sink, "Pardon?")
    assert third.answer == first.answer


async def test_an_answer_without_ready_audio_is_synthesized() -> None:
    repeater, sink = Repeater(say), Collector()
    repeater.link(sink)
    first = await _said(repeater, sink, "Do you price match?")
    first.answer = "Sorry, we do not match other shops' prices."
    again = await _said(repeater, sink, "What was that?")
    spoken = [f for f in sink.frames if isinstance(f, Speak) and f.turn is again]
    assert [s.text for s in spoken] == [first.answer] and not spoken[0].generated


async def test_with_nothing_said_yet_or_a_request_of_its_own_the_words_go_on() -> None:
    repeater, sink = Repeater(say), Collector()
    repeater.link(sink)
    await _said(repeater, sink, "Could you repeat that?")  # nothing answered before it
    first = await _said(repeater, sink, "When are you open?")
    first.answer = "Our phone line is open Monday to Friday."
    await _said(repeater, sink, "Could you repeat the opening hours on Saturday?")
    passed = [f.text for f in sink.frames if isinstance(f, Transcript)]
    assert passed == [
        "Could you repeat that?",
        "When are you open?",
        "Could you repeat the opening hours on Saturday?",
    ]
    assert not [f for f in sink.frames if isinstance(f, PlayAudio | Speak)]
