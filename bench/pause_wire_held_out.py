"""The paused requests kept out of all tuning (``python -m bench.pause_wire --held-out``):
in a module of their own, so that working on the tuning set never shows them.
"""

from __future__ import annotations

#: Requests of the same kind, written apart and kept out of all tuning: read only with
#: ``--held-out``, in voices of their own (``HELD_OUT_VOICES``). Some halves read as whole
#: sentences ("The parcel was left", "I think I was charged").
PAUSED_HELD_OUT = (
    ("Can you send me", "a copy of my last invoice?"),
    ("I ordered a jacket and", "it still hasn't arrived."),
    ("My account number is", "three one four one five nine."),
    ("Is it possible to", "pay for my order in instalments?"),
    ("I'd like to know", "when my next delivery is due."),
    ("The parcel was left", "with my neighbour at number twelve."),
    ("Would you be able to", "change the size of my order?"),
    ("I think I was charged", "twice for the same order."),
    ("Where can I find", "the returns label for my parcel?"),
    ("I've been waiting for", "my refund for two weeks."),
    ("Do you have any", "gift cards for sale?"),
    ("I need help with", "logging into my account."),
    ("My email address is", "anna at example dot com."),
    ("Could you tell me", "whether my order has shipped?"),
)
HELD_OUT_VOICES = ("en-gb-x-rp", "en-029", "en-us+f4")
