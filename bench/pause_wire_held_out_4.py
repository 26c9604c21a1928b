"""A fourth set of paused requests kept out of all tuning (``python -m bench.pause_wire
--held-out-4``): written after the other three had been read, before its first run, with
first halves of kinds they have few of (a filler that starts the request, a name given
first, what a website or an email says, a wish said before its object), in voices of its
own. Read once, when a change is done.
"""

from __future__ import annotations

#: Paused requests, each said as one sentence with the pause inside it, in
#: ``HELD_OUT_4_VOICES``. Some halves read as whole sentences ("I've been waiting",
#: "Could I get"), some are fillers ("So basically", "Right, okay, so").
PAUSED_HELD_OUT_4 = (
    ("So basically", "my order still hasn't turned up."),
    ("Um, I was wondering", "if you deliver on Saturdays."),
    ("Could I get", "a refund for the blender I sent back?"),
    ("My name is Sarah and", "I need to change my delivery address."),
    ("Is it possible", "to pay with PayPal?"),
    ("The tracking page says", "it was delivered, but nothing came."),
    ("I've been waiting", "two weeks for my parcel."),
    ("Your website says", "express is next day, how much is that?"),
    ("Right, okay, so", "what time do you close today?"),
    ("Last week I ordered", "a lamp and it arrived broken."),
    ("What I really need is", "to speak to a manager."),
    ("I'd like to know", "how long a refund takes."),
    ("It's order number", "five five two one nine."),
    ("Do you", "sell gift cards?"),
)
HELD_OUT_4_VOICES = ("en-us+Annie", "en-gb-x-rp+m4", "en-gb-x-gbcwmd+f3")
