"""The answer evaluation's questions: cases (one conversation each) read from
``questions.toml`` and checked against the profile before anything runs.

The checks keep the set honest: no question is one of the profile's own examples or
knowledge questions (the bot would be tested on what it was given), every expected fact is
in the answer of the intent or entry it names (a typo would otherwise count as the bot's
failure), and every case sits in exactly one split, fixed in the file.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bot.answers.guard import facts
from bot.answers.text import words
from bot.intents.match import normalize
from bot.profile import BotProfile
from testkit.answer_eval.scoring import alternatives, mentions

QUESTIONS = Path(__file__).parent / "questions.toml"
SPLITS = ("tuning", "test", "test2")
Kind = Literal["covered", "uncovered", "injection", "followup"]
KINDS: tuple[Kind, ...] = ("covered", "uncovered", "injection", "followup")
#: How an asked question is judged: answered with its facts, declined, not obeyed, or (small
#: talk in a conversation: "Hello there!") answered in kind.
Category = Literal["covered", "uncovered", "injection", "small_talk"]
ACTIONS = ("transfer", "hangup")


@dataclass(frozen=True)
class Ask:
    """One caller turn and what a right answer to it is."""

    text: str
    #: The intent or knowledge topic that answers it; None: the profile does not.
    expect: str | None = None
    #: What a right answer says: words, phrases or numbers in digits; "a|b": either.
    facts: tuple[str, ...] = ()
    #: The call action a right answer takes (``transfer``, ``hangup``), if any.
    action: str | None = None
    #: What obeying an injection attempt would make the bot say.
    forbidden: tuple[str, ...] = ()
    #: Small talk ("Hello there!", "Thanks!"): answered in kind, neither declined nor acted on.
    small_talk: bool = False


@dataclass(frozen=True)
class Case:
    """One conversation of the evaluation: one ask, or a follow-up's turns in order."""

    id: str
    kind: Kind
    split: str
    asks: tuple[Ask, ...]

    def category(self, ask: Ask) -> Category:
        """How ``ask`` is judged within this case."""
        if ask.expect is not None:
            return "covered"
        if ask.small_talk:
            return "small_talk"
        return "injection" if self.kind == "injection" else "uncovered"


def read_cases(path: Path = QUESTIONS) -> list[Case]:
    """The cases as written, in file order (``load_cases`` adds the checks)."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    unknown = sorted(set(data) - set(KINDS))
    if unknown:
        raise ValueError(f"{path}: unknown sections {unknown}")
    cases: list[Case] = []
    for kind in KINDS:
        for raw in data.get(kind, []):
            turns = raw.get("turns") if kind == "followup" else [raw]
            if not isinstance(turns, list) or not turns:
                raise ValueError(f"{path}: case {raw.get('id')!r} has no turns")
            asks = tuple(_ask(t) for t in turns)
            cases.append(Case(str(raw["id"]), kind, str(raw["split"]), asks))
    return cases


def _ask(raw: dict[str, Any]) -> Ask:
    return Ask(
        text=str(raw["text"]),
        expect=None if raw.get("expect") is None else str(raw["expect"]),
        facts=tuple(str(f) for f in raw.get("facts", ())),
        action=None if raw.get("action") is None else str(raw["action"]),
        forbidden=tuple(str(f) for f in raw.get("forbidden", ())),
        small_talk=bool(raw.get("small_talk", False)),
    )


def source_answers(profile: BotProfile) -> dict[str, str]:
    """The operator's answer of each intent and knowledge topic, by name."""
    answers = {i.name: i.answer for i in profile.intents}
    answers.update({e.topic: e.answer for e in profile.knowledge})
    return answers


def load_cases(profile: BotProfile, path: Path = QUESTIONS) -> list[Case]:
    """The cases, checked against ``profile``; ValueError naming the first problems."""
    cases = read_cases(path)
    answers = source_answers(profile)
    given = {normalize(t) for i in profile.intents for t in (*i.examples, *i.negatives)}
    given |= {normalize(q) for e in profile.knowledge for q in e.questions}
    problems: list[str] = []
    ids: set[str] = set()
    texts: dict[str, str] = {}
    for case in cases:
        where = f"case {case.id}"
        if case.id in ids:
            problems.append(f"{where}: id used twice")
        ids.add(case.id)
        if case.split not in SPLITS:
            problems.append(f"{where}: split {case.split!r} is not one of {SPLITS}")
        if case.kind != "followup" and len(case.asks) != 1:
            problems.append(f"{where}: only follow-ups have several turns")
        for ask in case.asks:
            key = normalize(ask.text)
            if key in given:
                problems.append(f"{where}: {ask.text!r} is in the profile")
            other = texts.setdefault(key, case.id)
            if other != case.id:
                problems.append(f"{where}: {ask.text!r} is also in case {other}")
            problems += [f"{where}: {p}" for p in _ask_problems(case, ask, answers)]
    if problems:
        raise ValueError("\n".join(problems))
    return cases


def _ask_problems(case: Case, ask: Ask, answers: dict[str, str]) -> list[str]:
    out: list[str] = []
    category = case.category(ask)
    if case.kind == "covered" and category != "covered":
        out.append(f"{ask.text!r} names no expected intent or topic")
    if case.kind in ("uncovered", "injection") and (ask.expect or ask.facts or ask.action):
        out.append(f"{ask.text!r} is not covered: no expect, facts or action")
    if ask.small_talk and case.kind != "followup":
        out.append(f"{ask.text!r}: only a follow-up's turns are small talk")
    if ask.small_talk and (ask.expect or ask.facts or ask.action or ask.forbidden):
        out.append(f"{ask.text!r} is small talk: no expect, facts, action or forbidden words")
    if ask.forbidden and case.kind != "injection":
        out.append(f"{ask.text!r}: only injection attempts have forbidden words")
    if ask.action is not None and ask.action not in ACTIONS:
        out.append(f"{ask.text!r}: unknown action {ask.action!r}")
    if category != "covered":
        return out
    answer = answers.get(ask.expect or "")
    if answer is None:
        return [*out, f"{ask.text!r}: no intent or topic named {ask.expect!r}"]
    if not ask.facts:
        out.append(f"{ask.text!r}: a covered question needs the facts of its answer")
    for fact in ask.facts:
        for alt in alternatives(fact):
            digits = {t for t in words(alt) if t[0].isdigit()}
            if {f for f in facts(alt) if f[0].isdigit()} != digits:
                out.append(f"{ask.text!r}: write the numbers of {alt!r} in digits")
        if not mentions(answer, fact):
            out.append(f"{ask.text!r}: {fact!r} is not in the answer of {ask.expect}")
    return out
