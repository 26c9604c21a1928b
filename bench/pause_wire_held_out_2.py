"""A second set of paused requests kept out of all tuning (``python -m bench.pause_wire
--held-out-2``): written after the first held-out set had been read several times, so
that a change worked out from that set's failures is judged on requests and voices
nobody has looked at. Read once, when a change is done.
"""

from __future__ import annotations

#: Paused requests of the same kind, in voices of their own (``HELD_OUT_2_VOICES``). Some
#: halves read as whole sentences ("The courier came", "I paid for"), some as questions
#: ("Do you ship", "When will I").
PAUSED_HELD_OUT_2 = (
    ("Could you send", "a new password to my email?"),
    ("I bought a lamp from you and", "it arrived broken."),
    ("My reference number is", "seven seven two one four."),
    ("Is there a way to", "track my parcel online?"),
    ("I want to know", "how long delivery takes to Spain."),
    ("The courier came", "but nobody left a card."),
    ("Am I able to", "swap these trainers for a bigger size?"),
    ("I paid for", "next day delivery but it took a week."),
    ("When will I", "get my money back for the coat?"),
    ("Do you ship", "to Ireland as well?"),
    ("I'm having trouble", "changing my delivery address."),
    ("Can someone help me", "with a missing item from my order?"),
    ("I'd like to speak to", "a manager about my complaint."),
    ("What's the cheapest way", "to send something back?"),
)
HELD_OUT_2_VOICES = ("en-gb-x-gbclan", "en-us-nyc", "en-gb-x-gbcwmd")
