"""The intent evaluation's labelled utterances: a tuning split and a held-out test split.

Each split is a folder of the benchmark's data (``bench/intent_eval/``) with
``paraphrases.toml`` (per intent) and ``negatives.txt`` (other requests, near-misses and
chit-chat). ``load_eval_sets`` checks that no utterance is a profile example or negative
and that the splits share none.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from bot.intents.match import normalize
from bot.profile import BotProfile
from testkit.botproc import ROOT

DATA = ROOT / "bench" / "intent_eval"
SPLITS = ("tuning", "test")
#: What the held-out test split must keep (tests/testkit/test_intent_eval.py checks).
MIN_TEST_INTENTS = 8
MIN_TEST_PER_INTENT = 10
MIN_TEST_NEGATIVES = 80

Items = list[tuple[str, str | None]]


@dataclass(frozen=True)
class EvalSet:
    """One split: utterances with the intent they mean (``None``: must not match)."""

    name: str
    items: Items

    @property
    def positives(self) -> list[tuple[str, str]]:
        return [(t, i) for t, i in self.items if i is not None]

    @property
    def negatives(self) -> list[str]:
        return [t for t, i in self.items if i is None]

    def per_intent(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for _, name in self.positives:
            counts[name] = counts.get(name, 0) + 1
        return counts


def read_split(name: str, data: Path = DATA) -> EvalSet:
    """One split's files as they are (``load_eval_sets`` adds the checks)."""
    folder = data / name
    paraphrases = tomllib.loads((folder / "paraphrases.toml").read_text(encoding="utf-8"))
    negatives = [
        line.strip()
        for line in (folder / "negatives.txt").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    items: Items = []
    for intent, texts in paraphrases.items():
        items += [(str(t), str(intent)) for t in texts]
    items += [(t, None) for t in negatives]
    return EvalSet(name, items)


def load_eval_sets(
    profile: BotProfile,
    data: Path = DATA,
    absent: list[str] | None = None,
    splits: tuple[str, ...] = SPLITS,
) -> dict[str, EvalSet]:
    """Both splits, checked: none of their utterances in the profile, no utterance twice
    (within a split or across the two). Paraphrases of an intent the profile does not have
    must not match any intent: they count as negatives (their names are added to
    ``absent``)."""
    known = {i.name for i in profile.intents}
    in_profile = {normalize(t) for i in profile.intents for t in (*i.examples, *i.negatives)}
    sets = {name: read_split(name, data) for name in splits}
    for name, split in sets.items():
        missing = sorted({i for _, i in split.positives} - known)
        if missing:
            if absent is not None:
                absent += [m for m in missing if m not in absent]
            items = [(t, i if i in known else None) for t, i in split.items]
            sets[name] = EvalSet(name, items)
    seen: dict[str, str] = {}
    for split in sets.values():
        leaked = [t for t, _ in split.items if normalize(t) in in_profile]
        if leaked:
            raise ValueError(f"{split.name}: utterances that are in the profile: {leaked}")
        for text, _ in split.items:
            other = seen.setdefault(normalize(text), split.name)
            if other != split.name:
                raise ValueError(f"{text!r} is in both {other} and {split.name}")
        repeated = len(split.items) - len({normalize(t) for t, _ in split.items})
        if repeated:
            raise ValueError(f"{split.name}: {repeated} utterances appear twice")
    return sets
