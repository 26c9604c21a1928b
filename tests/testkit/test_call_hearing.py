"""The call-hearing benchmark's reading of what a call heard (``testkit.call_hearing``)."""

from __future__ import annotations

from testkit.call_hearing import HeardTurn, said_twice, what_was_heard


def test_a_turn_the_next_one_went_on_with_is_heard_in_that_one() -> None:
    turns = [
        HeardTurn("I don't like the item.", joined=False, from_pause=True),
        HeardTurn("I don't like the item. Can I give it back?", joined=True, from_pause=False),
        HeardTurn("Thanks, bye.", joined=False, from_pause=True),
    ]
    assert what_was_heard(turns) == "I don't like the item. Can I give it back? Thanks, bye."
    assert what_was_heard([]) == ""


def test_words_said_twice_are_those_the_caller_did_not_say_twice() -> None:
    said = "Do you do free returns?"
    assert said_twice(said, "Do you do free returns? DO YOU DO YOU do free return!")
    assert not said_twice(said, "Do you do free returns?")
    assert not said_twice("Agent, agent.", "Agent. Agent.")
    assert said_twice("Where is my order?", "Where is my order? Where is my")
