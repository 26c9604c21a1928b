"""How large a configuration may be: what a node can apply within its time limits.

A node embeds an intent's examples and negatives in one call of its sentence embedder, and
every knowledge question in one call, each under the embedder's time limit (2 s by
default). An intent with 10,000 examples, or one example of 5 MB, was accepted by the API
and then timed out on every node, which kept every later version from being used. The
limits are checked on the whole profile before anything is written (422 naming the field
and the limit); the request body's own limit is ``AdminSettings.max_body_bytes``.
"""

from __future__ import annotations

import json
from typing import Any

Loc = tuple[str | int, ...]

#: Any text of the profile (a phrase the bot says, a name, a URL), in characters.
MAX_TEXT = 1000
#: The LLM's system prompt.
MAX_PROMPT = 8000
#: What a caller says: an intent's example or negative, a knowledge question or keyword.
MAX_SENTENCE = 200
#: Any list (fillers, an intent's examples, menu options...), in items.
MAX_ITEMS = 100
MAX_INTENTS = 200
MAX_KNOWLEDGE = 300
#: Characters a node embeds in one call: one intent's examples and negatives together,
#: and all knowledge questions together. On 2 shared CPU cores all-MiniLM-L6-v2 took 0.8
#: to 3.8 s for 6,000 to 12,000 characters of 60-character sentences (the machine busy
#: with other work); the default profile's largest intent is 1,362, its knowledge 1,658.
EMBED_BUDGET = 6000
#: Any number of the profile, in size: no setting needs more (ms, s, counts), and a node
#: sleeping or sizing a buffer by 2**63 fails where the API cannot see it.
MAX_NUMBER = 1_000_000_000
#: The whole profile as JSON (each version stores all of it).
MAX_PROFILE_BYTES = 512 * 1024

_SENTENCE_LISTS = frozenset({"examples", "negatives", "questions", "keywords"})


def text_limit(loc: Loc) -> tuple[int, str]:
    """The most characters a text at ``loc`` in the profile may have, and what it is
    (an item of a list at any index: the admin API's schema asks with index 0)."""
    if loc == ("system_prompt",):
        return MAX_PROMPT, "the system prompt"
    if len(loc) >= 2 and isinstance(loc[-1], int) and loc[-2] in _SENTENCE_LISTS:
        return MAX_SENTENCE, "what a caller says"
    return MAX_TEXT, "a text"


def _list_limit(loc: Loc) -> int:
    if loc == ("intents",):
        return MAX_INTENTS
    if loc == ("knowledge",):
        return MAX_KNOWLEDGE
    return MAX_ITEMS


def _walk(data: Any, loc: Loc, out: list[tuple[Loc, str]]) -> None:
    if isinstance(data, str):
        limit, what = text_limit(loc)
        if len(data) > limit:
            out.append((loc, f"at most {limit} characters ({what}); this has {len(data)}"))
    elif isinstance(data, list):
        limit = _list_limit(loc)
        if len(data) > limit:
            out.append((loc, f"at most {limit} items; this has {len(data)}"))
            return  # its items are not looked at one by one
        for i, item in enumerate(data):
            _walk(item, (*loc, i), out)
    elif isinstance(data, dict):
        for key, value in data.items():
            _walk(value, (*loc, str(key)), out)
    elif isinstance(data, int | float) and not isinstance(data, bool) and abs(data) > MAX_NUMBER:
        out.append((loc, f"at most {MAX_NUMBER} in size"))


def _chars(texts: Any) -> int:
    return sum(len(t) for t in texts if isinstance(t, str)) if isinstance(texts, list) else 0


def problems(data: dict[str, Any]) -> list[tuple[Loc, str]]:
    """Where ``data`` (a profile as JSON) is beyond a limit, and which: empty if nowhere."""
    out: list[tuple[Loc, str]] = []
    _walk(data, (), out)
    if out:
        return out
    budget = f"at most {EMBED_BUDGET} characters together (a node embeds them in one call)"
    intents = data.get("intents")
    for i, intent in enumerate(intents if isinstance(intents, list) else []):
        if isinstance(intent, dict):
            n = _chars(intent.get("examples")) + _chars(intent.get("negatives"))
            if n > EMBED_BUDGET:
                out.append((("intents", i), f"examples and negatives: {budget}; these have {n}"))
    entries = data.get("knowledge")
    n = sum(
        _chars(e.get("questions"))
        for e in (entries if isinstance(entries, list) else [])
        if isinstance(e, dict)
    )
    if n > EMBED_BUDGET:
        out.append((("knowledge",), f"the questions of all entries: {budget}; these have {n}"))
    size = len(json.dumps(data, default=str).encode())
    if size > MAX_PROFILE_BYTES:
        out.append(((), f"the whole configuration: at most {MAX_PROFILE_BYTES} bytes; {size}"))
    return out
