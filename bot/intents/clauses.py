"""A request said with its context: its clauses matched one by one.

Callers say what happened before what they want: "I've just moved and I need to close the
account at my old place.", "We've got no electricity, the whole street is dark." A sentence
embedding of the whole mixes the two, and a thin intent's three examples ("I'm moving
house.") sit far from the mix: the whole scores below the threshold, or a background line
about another thing is nearer ("I need to change my name on the account."). Each clause
alone ("I've just moved") is as near as a caller who said only that.

The rule: when the whole words are not answered, each clause of at least ``MIN_WORDS``
words (split at punctuation and before "and", "but", "so", "because") is matched as the
whole is, with the same rule (thresholds, margins, background lines, negatives); a clause
the rule answers decides, where the whole was asked about or led nowhere, but only for
the intent the whole words are nearest to. A clause is never asked about: where the whole
led nowhere the knowledge base has its say first ("Is it people? | Box okay as the
shipping address?", heard for a question about PO boxes, was asked about two intents by
its second clause instead of answered from the knowledge base). A
clause that sets the scene for another request ("Uh, my order arrived | but it's all
smashed up.": order status for the clause, a damaged item for the whole) never answers for
the whole. Words an intent's negative example vetoed are not split: the operator wrote
that example against them.

Measured (``python -m bench.intent_eval.decisions``, clean text and cached Whisper
transcripts; docs/benchmarks.md, "A request said with its context"): on the default
profile's tuning split 1-2 more paraphrases answered directly, on a new operator's energy
profile 3 more and 1 more right after at most one question; no wrong intent, no false
accept and no more questions to out-of-scope callers on any set.
"""

from __future__ import annotations

import re

from bot.intents.match import Match

#: The fewest words a clause needs to be matched alone ("Hi," and "Yes," are not requests).
MIN_WORDS = 3
#: The most clauses matched (one embedding call for all): of a longer story the last ones,
#: where a caller's request usually comes ("..., and nobody can tell me where it is.").
MAX_CLAUSES = 4

_SPLIT = re.compile(r"(?<=[,.?!;])\s+|\s+(?=(?:and|but|so|because)\s)", re.IGNORECASE)
_JOINING = re.compile(r"^(?:and|but|so|because)\s+", re.IGNORECASE)
_EDGE = " ,;"

#: The whole words' reasons for not answering that splitting may overcome: not a negative
#: example's veto (the operator's own word) nor no words at all.
_SPLITTABLE = frozenset({"below threshold", "margin too small", "background closer"})


def clauses(text: str) -> list[str]:
    """The clauses of ``text`` worth matching alone, in order (the last ``MAX_CLAUSES``);
    none when it has fewer than two (one clause is the whole)."""
    parts = (_JOINING.sub("", p.strip(_EDGE)) for p in _SPLIT.split(text) if p.strip(_EDGE))
    kept = [p for p in parts if len(p.split()) >= MIN_WORDS]
    return kept[-MAX_CLAUSES:] if len(kept) > 1 else []


def worth_splitting(whole: Match) -> bool:
    """Whether the whole words' match may be bettered by one of their clauses."""
    return whole.route in ("confirm", "none") and whole.reason in _SPLITTABLE


def decides(clause: Match, whole: Match) -> bool:
    """Whether a clause's match decides instead of the whole's: an answer, for the intent
    the whole is nearest to."""
    return clause.best is not None and clause.best == whole.best and clause.route == "semantic"
