"""``python -m bench.intent_eval.decisions``: what the bot decides on each utterance of a split,
through the turn's one decision (``bot.pipeline.deciding.decider``: the intent cache, its questions,
the knowledge base), with a caller who answers a question truly, as opposed to the matcher
alone (``python -m bench.intent_eval``).

Each utterance is the first turn of a call of its own. When the decision asks, the caller
answers as the one who meant the utterance would: "Yes." to a question about the intent they
meant, "No." to any other yes-or-no question, "The first one." / "The second one." to a
two-choice question that offers it, else "Neither."; and the reply is decided as the bot
decides it. Counted per split and input (clean text; ``--asr``: the cached transcripts heard
by the profile's vocabulary, as ``bench.intent_eval --asr`` made them; ``--voices espeak``:
the utterances as espeak-ng's voices said them):

- paraphrases answered right directly, and right directly or after one question;
- paraphrases answered with another intent (directly or after a reply);
- negatives (out of scope) answered by an intent: false accepts, directly or after a reply;
- negatives asked a question, and how many of those questions offered two choices.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bot.intents.cache import IntentCache
from bot.knowledge.index import KnowledgeIndex
from bot.pipeline.deciding.call_lookups import CallLookups
from bot.pipeline.deciding.decider import Decider
from bot.pipeline.deciding.decision import Asked, Decision
from bot.pipeline.turn import Turn
from bot.profile import DEFAULT_PROFILE, BotProfile, load_profile
from bot.vocabulary import vocabulary
from serve.registry import ModelSpec, asr_backends, embedder_backends
from testkit.intent_eval.eval_sets import DATA, SPLITS, Items, load_eval_sets
from testkit.intent_eval.transcripts import (
    VOICES,
    Voices,
    asr_setup,
    cache_file,
    read_transcripts,
    vocabulary_key,
    voice_keys,
)
from testkit.profile_lookups import profile_lookups

CLEAN = "clean text"
ASR = "Whisper transcripts"


@dataclass
class Tally:
    """The decisions on one split and input."""

    positives: int = 0
    negatives: int = 0
    direct: int = 0
    after_question: int = 0
    #: Paraphrases answered with another intent (directly, or after a reply).
    wrong: int = 0
    #: Paraphrases asked a question (any kind) and of them, offered two choices.
    asked: int = 0
    choices: int = 0
    false_accepts: int = 0
    negatives_asked: int = 0
    negative_choices: int = 0
    notes: list[str] = field(default_factory=list)

    def row(self, split: str, label: str) -> str:
        def pct(n: int, of: int) -> str:
            return f"{n / of:.1%} ({n})" if of else "-"

        return (
            f"| {split} | {label} | {self.positives} | {pct(self.direct, self.positives)} | "
            f"{pct(self.direct + self.after_question, self.positives)} | {self.wrong} | "
            f"{pct(self.asked, self.positives)} | {self.choices} | {self.negatives} | "
            f"{self.false_accepts} | {pct(self.negatives_asked, self.negatives)} | "
            f"{self.negative_choices} |"
        )


HEAD = (
    "| split | input | paraphrases | right directly | right directly or after one question "
    "| wrong intent | paraphrases asked | of them two choices | negatives | false accepts "
    "| negatives asked | of them two choices |\n" + "|---" * 12 + "|"
)


def reply_to(asked: Asked, truth: str | None) -> str:
    """What the caller who meant ``truth`` (None: no intent) answers to the question."""
    options = getattr(asked, "options", ())
    if asked.kind == "choice":
        names = [o.name for o in options]
        if truth in names:
            return "The first one." if names.index(truth) == 0 else "The second one."
        return "Neither."
    if asked.kind == "intent" and asked.entry is not None and asked.entry.name == truth:
        return "Yes."
    return "No."


def _commit(decider: Decider, words: str, decision: Decision) -> None:
    turn = Turn(call_id="eval", transcript=words, decision=decision)
    turn.route, turn.intent, turn.answer = decision.route, decision.intent, decision.say or ""
    decider.conversation.commit(turn, decision)


async def decide_all(
    profile: BotProfile, cache: IntentCache, knowledge: KnowledgeIndex | None, items: Items
) -> Tally:
    out = Tally()
    for text, truth in items:
        decider = Decider(CallLookups(cache, knowledge), profile)
        first = await decider.decide(text, call_id="eval")
        _commit(decider, text, first)
        final = first
        if first.kind == "ask" and first.asks is not None:
            choice = first.asks.kind == "choice"
            if truth is None:
                out.negatives_asked += 1
                out.negative_choices += choice
                out.notes.append(f"asked out of scope: {text!r} -> {first.asks.key} ({first.why})")
            else:
                out.asked += 1
                out.choices += choice
            reply = reply_to(first.asks, truth)
            final = await decider.decide(reply, call_id="eval")
        answered = final.entry.name if final.kind == "answer" and final.entry else None
        if truth is None:
            out.negatives += 1
            if answered is not None:
                out.false_accepts += 1
                out.notes.append(f"false accept: {text!r} -> {answered} ({final.why})")
            continue
        out.positives += 1
        if answered == truth:
            if final is first:
                out.direct += 1
            else:
                out.after_question += 1
        elif answered is not None:
            out.wrong += 1
            out.notes.append(f"wrong intent: {text!r} ({truth}) -> {answered} ({final.why})")
        else:
            did = first.kind if first.asks is None else f"{first.kind} {first.asks.key}"
            out.notes.append(f"missed: {text!r} ({truth}) -> {did} ({first.why})")
    return out


def transcripts(
    profile: BotProfile, items: Items, cache_file: Path, voices: Voices = "flite"
) -> tuple[Items, str] | None:
    """The split's cached transcripts heard by the profile's vocabulary, and the code they
    were made with (None: not all cached; ``bench.intent_eval --asr`` makes them). The
    recognizer's code may have changed since (a new ``sources`` digest): the decision is
    what is measured here, on the same words before and after."""
    settings = ModelSpec()
    asr = asr_backends.create(settings.asr, settings)
    setup = asdict(asr_setup(settings.asr, asr, prompt=vocabulary_key(vocabulary(profile))))
    keys = voice_keys(items, voices)
    for entry in read_transcripts(cache_file).values():
        made = dict(entry["setup"])
        if {**made, "sources": ""} != {**setup, "sources": ""}:
            continue
        done = entry["transcripts"]
        if all(k in done for k in keys):
            heard = [(done[k], truth) for k, (_, truth) in zip(keys, items, strict=True)]
            return heard, str(made["sources"])
    return None


async def run(args: argparse.Namespace) -> int:
    profile = load_profile(args.profile)
    sets = load_eval_sets(profile, data=args.data, absent=[], splits=tuple(args.splits))
    embedder = embedder_backends.create("minilm", ModelSpec(threads=args.threads))
    embedder.timeout_s = 120.0
    await embedder.load()
    await embedder.warm()
    cache, knowledge = await profile_lookups(profile, embedder)
    rows: list[str] = []
    notes: list[str] = []
    try:
        for split in args.splits:
            items = sets[split].items
            inputs: dict[str, Items] = {CLEAN: items}
            if args.asr:
                cached = transcripts(profile, items, args.transcripts, args.voices)
                label = ASR if args.voices == "flite" else f"{ASR} ({args.voices} voices)"
                if cached is None:
                    print(f"{split}: transcripts not all cached", file=sys.stderr)
                else:
                    inputs[label], sources = cached
                    notes.append(f"- {split}: transcripts made by recognizer code {sources}")
            for label, said in inputs.items():
                tally = await decide_all(profile, cache, knowledge, said)
                rows.append(tally.row(split, label))
                notes += [f"- {split}, {label}: {n}" for n in tally.notes]
    finally:
        await cache.stop()
    print(f"## Decisions ({args.profile})\n")
    print(HEAD)
    print("\n".join(rows))
    shown = [n for n in notes if args.verbose or "recognizer code" in n]
    if shown:
        print()
        print("\n".join(shown))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description="The turn's decision on the intent evaluation's utterances, with a caller "
        "who answers its questions truly."
    )
    parser.add_argument("--profile", type=Path, default=DEFAULT_PROFILE)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--splits", nargs="+", default=list(SPLITS))
    parser.add_argument("--asr", action="store_true", help="also the cached ASR transcripts")
    parser.add_argument("--transcripts", type=Path, default=None)
    parser.add_argument(
        "--voices",
        default="flite",
        choices=VOICES,
        help="with --asr: the transcripts of the utterances as flite's or espeak-ng's voices "
        "said them",
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("-v", "--verbose", action="store_true", help="list the errors")
    args = parser.parse_args()
    args.transcripts = cache_file(args.data, args.transcripts)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
