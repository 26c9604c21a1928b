"""The guard's held-out examples (``tests/bot/not_an_answer_heldout.toml``), scored.

Written before the "not an answer" rules were tuned and never used to tune them: clauses
the guard must refuse or let through with the default profile's entries retrieved, and
question-entry pairs whose topic must be told apart. ``bench.answer_eval --guard-heldout``
prints the result; nothing asserts it.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from bot.answers.grounding import common_stems, on_topic
from bot.answers.guard import check
from bot.profile import BotProfile, KnowledgeEntry

HELDOUT = Path(__file__).parents[2] / "tests" / "bot" / "not_an_answer_heldout.toml"


@dataclass(frozen=True)
class Outcome:
    """One example: its section, its text, whether the guard did what it should, and what
    the guard said."""

    section: str
    text: str
    right: bool
    got: str


def _texts(entry: KnowledgeEntry) -> list[str]:
    return [entry.topic.replace("_", " "), *entry.questions, entry.answer, *entry.keywords]


def score(profile: BotProfile, path: Path = HELDOUT) -> list[Outcome]:
    """Each held-out example checked as the bot checks it."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    entries = {e.topic: e for e in profile.knowledge}
    common = common_stems([_texts(e) for e in profile.knowledge])
    out: list[Outcome] = []
    for section in ("refuse", "allow"):
        for ex in data.get(section, []):
            sources = [entries[t].answer for t in ex["entries"]]
            refusal = check(
                ex["clause"],
                sources=sources,
                caller=ex["question"],
                known_names=(profile.name,),
                strict=not sources,
                stock=(profile.unsure,),
            )
            right = (refusal is not None) == (section == "refuse")
            out.append(Outcome(section, ex["clause"], right, str(refusal or "let through")))
    for ex in data.get("topic", []):
        on = on_topic(ex["question"], _texts(entries[ex["topic"]]), common=common)
        got = f"{'on' if on else 'off'} topic {ex['topic']}"
        out.append(Outcome("topic", ex["question"], on == ex["on"], got))
    return out
