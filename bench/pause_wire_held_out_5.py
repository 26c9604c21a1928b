"""A fifth set of paused requests kept out of all tuning (``python -m bench.pause_wire
--held-out-5``): written after every change the fourth set led to, before its first run,
with first halves of kinds the other sets have few of (a topic named first, a reason
clause, an apology, "before I forget", a bare wh-word, "what happens if"), in voices of
its own. Read once, when a change is done.
"""

from __future__ import annotations

#: Paused requests, each said as one sentence with the pause inside it, in
#: ``HELD_OUT_5_VOICES``. Some halves read as whole sentences ("I bought a coat",
#: "Can you"), some are clauses that lead on ("Since I moved house", "When I tried to pay").
PAUSED_HELD_OUT_5 = (
    ("About the refund I asked for,", "has it been paid yet?"),
    ("I was hoping", "you could tell me when my parcel will arrive."),
    ("Can you", "check the status of my order?"),
    ("When I tried to pay", "my card was declined."),
    ("Since I moved house", "I need to update my address."),
    ("How much", "does next day delivery cost?"),
    ("Well, the thing is,", "the item I got is the wrong size."),
    ("Before I forget,", "can I pay by bank transfer?"),
    ("Sorry, I just wanted to", "cancel my order."),
    ("What happens if", "I'm not home when it's delivered?"),
    ("I bought a coat", "and I want to return it."),
    ("Where", "is my order?"),
    ("Is there any way", "I could talk to a real person?"),
    ("I got an email", "saying my order was cancelled."),
)
HELD_OUT_5_VOICES = ("en-us+m7", "en-gb-x-gbclan+f5", "en-us-nyc+f2")
