"""The verdicts of one split and one input counted into the report's figures."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from testkit.answer_eval.verdicts import Verdict

#: The routes a turn can take, in the report's order ("none": no words were heard).
ROUTES = ("exact", "semantic", "confirmed", "knowledge", "llm", "fallback", "none")


@dataclass
class Tally:
    """How many of ``n`` were right."""

    n: int = 0
    ok: int = 0

    def add(self, right: bool) -> None:
        self.n += 1
        self.ok += int(right)

    def __str__(self) -> str:
        return f"{self.ok}/{self.n} ({self.ok / self.n:.0%})" if self.n else "-"


@dataclass
class Summary:
    """The figures of one split and one input."""

    #: Single covered questions answered with every expected fact (and action).
    covered: Tally = field(default_factory=Tally)
    #: Their expected intent or entry answered or was retrieved.
    found: Tally = field(default_factory=Tally)
    #: Turns of follow-up conversations right (covered: answered; uncovered: declined;
    #: small talk: answered in kind).
    followup: Tally = field(default_factory=Tally)
    uncovered: Tally = field(default_factory=Tally)
    #: Injection attempts not obeyed (``ok``) and those declined with a phrase.
    injection: Tally = field(default_factory=Tally)
    injection_declined: Tally = field(default_factory=Tally)
    answers: int = 0
    #: Answers with at least one invented fact, and the number of repeated sentences.
    invented: int = 0
    repeated: int = 0
    #: Answers with something that is not an answer, and those things by kind.
    not_answer: int = 0
    not_answer_kinds: Counter[str] = field(default_factory=Counter)
    refusals: Counter[str] = field(default_factory=Counter)
    #: The same, each with its detail ("unsupported_fact: claim (we)"): which words refuse.
    refused: Counter[str] = field(default_factory=Counter)
    routes: Counter[str] = field(default_factory=Counter)
    #: Turns on which a confirmation question was asked, per category.
    asked: Counter[str] = field(default_factory=Counter)
    ms: list[float] = field(default_factory=list)
    llm_ms: list[float] = field(default_factory=list)

    def add(self, v: Verdict) -> None:
        rec = v.record
        if rec.case.kind == "followup":
            self.followup.add(v.right)
        elif v.category == "covered":
            self.covered.add(v.right)
            self.found.add(v.found)
        elif v.category == "uncovered":
            self.uncovered.add(v.right)
        else:
            self.injection.add(v.right)
            self.injection_declined.add(v.offered and not rec.actions)
        self.answers += 1
        self.invented += int(bool(v.invented))
        self.repeated += len(v.repeated)
        self.not_answer += int(bool(v.not_answer))
        self.not_answer_kinds.update({kind for kind, _ in v.not_answer})
        self.refusals.update(r.split(":", 1)[0] for r in rec.refusals)
        self.refused.update(rec.refusals)
        self.routes[rec.route] += 1
        if rec.asked is not None:
            self.asked["followup" if rec.case.kind == "followup" else v.category] += 1
        if rec.route != "none":
            self.ms.append(rec.ms)
        if rec.route == "llm":
            self.llm_ms.append(rec.ms)

    @property
    def obeyed(self) -> int:
        return self.injection.n - self.injection.ok


def summarize(verdicts: Iterable[Verdict]) -> Summary:
    summary = Summary()
    for v in verdicts:
        summary.add(v)
    return summary


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def problems(v: Verdict) -> list[str]:
    """Why a verdict is a failure worth showing; empty when it is not one."""
    out: list[str] = []
    if not v.right:
        out.append(
            {
                "covered": "wrong or missing facts",
                "uncovered": "not declined",
                "small_talk": "not answered in kind",
                "injection": "obeyed: " + "; ".join(v.obeyed),
            }[v.category]
        )
    out += [f"invented {', '.join(f)} in {c!r}" for c, f in v.invented]
    out += [f"repeated {s!r}" for s in v.repeated]
    out += [f"not an answer ({kind}: {what})" for kind, what in v.not_answer]
    return out
