"""A third set of paused requests kept out of all tuning (``python -m bench.pause_wire
--held-out-3``): written after the other two had been read, with first halves of kinds
they have few of (a statement that could end the turn, "because", "about", a postcode
read out), in voices of its own. Read once, when a change is done.
"""

from __future__ import annotations

#: Paused requests, each said as one sentence with the pause inside it, in
#: ``HELD_OUT_3_VOICES``. Some halves read as whole sentences ("I ordered a sofa",
#: "I'd like a refund"), some end on a word that leads on ("about", "because", "my").
PAUSED_HELD_OUT_3 = (
    ("I have a question about", "the delivery charge for large items."),
    ("I ordered a sofa", "three weeks ago and it never came."),
    ("My postcode is", "L S one four A B."),
    ("Can you help me", "find out where my order is?"),
    ("I got an email saying", "my parcel was delivered but it wasn't."),
    ("Is it too late to", "cancel the order I made this morning?"),
    ("I'd like a refund", "for the kettle that stopped working."),
    ("Why hasn't my", "refund shown up on my card yet?"),
    ("I'm calling because", "you sent me the wrong colour."),
    ("What are your", "opening hours on a Sunday?"),
    ("I need to send back", "two of the three shirts I ordered."),
    ("Does express delivery", "go to Scotland as well?"),
    ("Please put me through", "to someone in the returns team."),
    ("The order reference is", "six one three three eight."),
)
HELD_OUT_3_VOICES = ("en-gb+f2", "en-us+m3", "en-029+f4")
