"""How the bot answers open questions: right facts, honest declines, no obeyed injection.

    .venv/bin/python -m bench.answer_eval [--spoken | --spoken-only] [--splits tuning test]

Runs the written questions of ``testkit/answer_eval/questions.toml`` (questions the default
profile covers, questions it does not, injection attempts, follow-up conversations) through
the bot's Router, Responder and AnswerGuard in this process, with the packaged MiniLM and
SmolLM2 (``testkit.answer_eval.rig``), and prints per split: covered questions answered with
their facts, uncovered ones declined, injection attempts obeyed, answers with an invented
fact, answers with something that is not an answer (``testkit.answer_eval.not_answer``: the
model talking about itself, a misplaced apology, an offer or a claim no operator text makes,
an entry about another topic), repeated sentences, the guard's refusals by reason, the route
mix, the mean time per answer, and every failure (question -> what the caller heard).

``--spoken`` adds the same questions said by three flite voices at 8 kHz and transcribed by
the bot's Whisper (cached in ``testkit/answer_eval/asr_transcripts.json``). The bot's
recognizer has two passes (tiny.en, and Whisper base on a turn that led nowhere,
``bot.pipeline.rehear``): each question is also transcribed by the second one, cached the
same way, and the router hears a turn again as on a call (``--no-second-pass``: the first
pass alone).

The questions were written, and each given its split ("tuning" about 40%, "test" about 60%,
a field in the file), before the first run. The tuning split may be read while changing the
bot; the test split is held out: nothing is chosen on it, it is only reported. The LLM
samples (temperature 0.3, unseeded), so generated answers vary a little between runs.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

from threadpoolctl import threadpool_limits

from bot.profile import DEFAULT_PROFILE, BotProfile, load_profile
from bot.vocabulary import vocabulary
from serve.asr_twopass import TwoPassASR
from serve.registry import ModelSpec, asr_backends
from testkit.answer_eval import guard_heldout as heldout
from testkit.answer_eval.not_answer import KINDS as NOT_ANSWER_KINDS
from testkit.answer_eval.questions import QUESTIONS, SPLITS, Case, load_cases
from testkit.answer_eval.records import TEXT
from testkit.answer_eval.rig import Rig
from testkit.answer_eval.scoring import Reference
from testkit.answer_eval.summary import ROUTES, Summary, mean, problems, summarize
from testkit.answer_eval.transcripts import TRANSCRIPTS, VOICES, key, missing, transcribe
from testkit.answer_eval.verdicts import Verdict, judge
from testkit.intent_eval.transcripts import asr_setup, vocabulary_key

SPOKEN = "Whisper"
#: How many of the most frequent refusals (with their details) are listed.
TOP_REFUSALS = 8
REASONS = (
    "unsupported_fact",
    "not_an_answer",
    "other_topic",
    "repeat",
    "unfinished",
    "not_speech",
    "prompt_leak",
    "injection",
)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def input_label(name: str) -> str:
    return "text" if name == TEXT else f"{SPOKEN} ({name})"


async def spoken_inputs(
    cases: list[Case], args: argparse.Namespace, profile: BotProfile
) -> tuple[dict[str, dict[str, list[str]]], dict[str, dict[str, list[str]]]]:
    """Per voice, per case id, the transcript of each of its asks; and, for a two-pass
    recognizer (the bot's default) unless ``--no-second-pass``, the second one's. The first
    hears by the profile's vocabulary, as on a call (``--no-vocabulary``: without); the
    second hears without it, as on a call."""
    spec = ModelSpec()
    asr = asr_backends.create(spec.asr, spec)
    texts = [a.text for c in cases for a in c.asks]
    words = vocabulary(profile) if args.vocabulary else None
    passes = [(spec.asr, asr, words)]
    if isinstance(asr, TwoPassASR) and args.second_pass:
        passes.append((f"{spec.asr}, second pass", asr.second, None))
    found = []
    for name, recognizer, heard_by in passes:
        backend = spec.asr if recognizer is asr else _second_name(spec.asr)
        setup = asr_setup(backend, recognizer, prompt=vocabulary_key(heard_by))
        todo = missing(texts, VOICES, setup, args.transcripts)
        progress(f"ASR {name} ({recognizer.description}), setup {setup.key}: {todo} to transcribe")
        if todo:
            recognizer.timeout_s = 300.0  # figures, not the node's limit
            await recognizer.load()
            await recognizer.warm()
        started = time.monotonic()
        result = await transcribe(
            texts,
            VOICES,
            setup,
            recognizer if todo else None,
            cache=args.transcripts,
            progress=progress,
            vocabulary=heard_by,
        )
        if result.asr_ms:
            progress(
                f"transcribed {len(result.asr_ms)} in {time.monotonic() - started:.0f}s "
                f"(ASR mean {mean(result.asr_ms) or 0:.0f} ms)"
            )
        found.append(
            {
                voice: {c.id: [result.texts[key(voice, a.text)] for a in c.asks] for c in cases}
                for voice in VOICES
            }
        )
    return found[0], (found[1] if len(found) > 1 else {})


def _second_name(backend: str) -> str:
    """The registry's name of a two-pass backend's second recognizer, for its cache key
    (``whisper-window+base`` -> ``whisper-base-window``, as ``bench.intent_eval
    --second-pass`` names it, so that both read the same transcripts)."""
    return {"whisper-window+base": "whisper-base-window"}.get(backend, f"{backend}:second")


def summary_table(summaries: dict[tuple[str, str], Summary]) -> list[str]:
    lines = [
        "| split | input | covered right | right intent/entry found | follow-up turns right "
        "| uncovered declined | injections obeyed | injections declined | answers "
        "| with an invented fact | not an answer | repeated sentences | mean ms/answer "
        "| mean ms, LLM route | questions asked (covered / uncovered) |",
        "|---" * 15 + "|",
    ]
    for (split, name), s in summaries.items():
        ms, llm_ms = mean(s.ms), mean(s.llm_ms)
        lines.append(
            f"| {split} | {name} | {s.covered} | {s.found} | {s.followup} | {s.uncovered} "
            f"| {s.obeyed}/{s.injection.n} | {s.injection_declined} | {s.answers} "
            f"| {s.invented} | {s.not_answer} | {s.repeated} | {ms or 0:.0f} | "
            + (f"{llm_ms:.0f}" if llm_ms is not None else "-")
            + f" | {s.asked['covered']} / {s.asked['uncovered']} |"
        )
    return lines


def counter_table(
    summaries: dict[tuple[str, str], Summary],
    columns: tuple[str, ...],
    which: Callable[[Summary], Counter[str]],
) -> list[str]:
    lines = ["| split | input | " + " | ".join(columns) + " |", "|---" * (len(columns) + 2) + "|"]
    for (split, name), s in summaries.items():
        counts = which(s)
        lines.append(f"| {split} | {name} | " + " | ".join(str(counts[c]) for c in columns) + " |")
    return lines


def describe(v: Verdict) -> str:
    rec = v.record
    ask = rec.ask
    where = f"{rec.case.id}" + (f" turn {rec.turn + 1}" if len(rec.case.asks) > 1 else "")
    heard = "" if rec.heard == ask.text else f" (heard {rec.heard!r})"
    how = [f"route {rec.route}"]
    if rec.asked:
        how.append(f"asked about {rec.asked}")
    if rec.intent:
        how.append(f"answered by {rec.intent}")
    if ask.expect:
        how.append(f"expected {ask.expect} {list(ask.facts)}")
    if rec.retrieved:
        how.append(f"retrieved {', '.join(rec.retrieved)}")
    if rec.refusals:
        how.append(f"refused {'; '.join(rec.refusals)}")
    if rec.actions:
        how.append(f"action {', '.join(rec.actions)}")
    if rec.error:
        how.append(f"error {rec.error}")
    return (
        f"{where} [{v.category}] {ask.text!r}{heard} -> {rec.spoken!r} "
        f"({'; '.join(how)}): {'; '.join(problems(v))}"
    )


def guard_heldout(args: argparse.Namespace) -> int:
    """The guard's held-out examples: right per section, and each miss."""
    outcomes = heldout.score(load_profile(args.profile))
    print(f"## The guard's held-out examples ({dt.date.today()}; {heldout.HELDOUT.name})\n")
    print("| section | right |\n|---|---|")
    for section in ("refuse", "allow", "topic"):
        got = [o for o in outcomes if o.section == section]
        print(f"| {section} | {sum(o.right for o in got)}/{len(got)} |")
    misses = [o for o in outcomes if not o.right]
    print(f"\nMisses ({len(misses)}):\n")
    for o in misses:
        print(f"- [{o.section}] {o.text!r}: {o.got}")
    return 0


async def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    threadpool_limits(limits=1, user_api="blas")  # as a node runs (node/app.py)
    profile = load_profile(args.profile)
    if args.extractive is not None:
        matching = profile.knowledge_matching.model_copy(update={"extractive": args.extractive})
        profile = profile.model_copy(update={"knowledge_matching": matching})
    cases = [c for c in load_cases(profile, args.questions) if c.split in args.splits]
    if args.cases:
        cases = [c for c in cases if c.id in args.cases]
    inputs: dict[str, dict[str, list[str]]] = {}
    seconds: dict[str, dict[str, list[str]]] = {}
    if not args.spoken_only:
        inputs[TEXT] = {c.id: [a.text for a in c.asks] for c in cases}
    if args.spoken or args.spoken_only:
        spoken, seconds = await spoken_inputs(cases, args, profile)
        inputs.update(spoken)
    spec = ModelSpec() if args.llm is None else ModelSpec(llm=args.llm)
    rig = await Rig.load(profile, spec, llm_timeout_s=args.llm_timeout, progress=progress)
    ref = Reference.of(profile)
    verdicts: dict[tuple[str, str], list[Verdict]] = defaultdict(list)
    for name, heard in inputs.items():
        label = TEXT if name == TEXT else SPOKEN
        began = time.monotonic()
        for n, case in enumerate(cases, 1):
            again = seconds.get(name, {}).get(case.id)
            records = await rig.converse(case, heard[case.id], input=name, second=again)
            verdicts[(case.split, label)] += judge(records, ref)
            if n % 20 == 0:
                progress(f"{input_label(name)}: {n}/{len(cases)} cases")
        progress(f"{input_label(name)}: {len(cases)} cases in {time.monotonic() - began:.0f}s")
    heard_again = rig.second_passes
    order = [(s, i) for s in SPLITS for i in (TEXT, SPOKEN) if (s, i) in verdicts]
    summaries = {(s, input_label(i) if i == TEXT else f"{SPOKEN}, {len(VOICES)} voices"):
                 summarize(verdicts[(s, i)]) for s, i in order}  # fmt: skip

    km = profile.knowledge_matching
    print(f"## Answers ({dt.date.today()}; {rig.embedder.description}, {rig.llm.description})\n")
    print(
        f"Profile {args.profile.name}: {len(profile.intents)} intents, {len(profile.knowledge)} "
        f"knowledge entries (min_score {km.min_score:g}, direct_score {km.direct_score:g}, "
        f"max_entries {km.max_entries}, extractive {km.extractive}); LLM max_tokens "
        f"{profile.llm.max_tokens}, temperature {profile.llm.temperature:g}."
    )
    for split in args.splits:
        counts = Counter(c.kind for c in cases if c.split == split)
        print(f"- {split}: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
    if any(i != TEXT for i in inputs):
        passes = (
            f"; a second pass where the first led nowhere ({heard_again} turns)" if seconds else ""
        )
        print(
            f"- spoken: each question in the flite voices {', '.join(VOICES)}, 8 kHz, "
            f"Whisper{passes}"
        )
    print()
    print("\n".join(summary_table(summaries)))
    print("\n### Guard refusals by reason (clauses; injection: declined before the model)\n")
    print("\n".join(counter_table(summaries, REASONS, lambda s: s.refusals)))
    print("\n### Not an answer, by kind (answers; docs/answers.md)\n")
    print("\n".join(counter_table(summaries, NOT_ANSWER_KINDS, lambda s: s.not_answer_kinds)))
    print("\nMost frequent, with their details:\n")
    for (split, name), s in summaries.items():
        common = ", ".join(f"{r} ({n})" for r, n in s.refused.most_common(TOP_REFUSALS))
        print(f"- {split}, {name}: {common or 'none'}")
    print("\n### Routes (turns)\n")
    print("\n".join(counter_table(summaries, ROUTES, lambda s: s.routes)))
    for split, label in order:
        failed = [v for v in verdicts[(split, label)] if problems(v)]
        name = "text" if label == TEXT else "Whisper transcripts"
        print(f"\n### Failures, {split} split, {name} ({len(failed)})\n")
        for v in failed:
            voice = "" if v.record.input == TEXT else f"[{v.record.input}] "
            print(f"- {voice}{describe(v)}")
    progress(f"done in {time.monotonic() - started:.0f}s")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description="Evaluate the bot's answers to open questions.")
    parser.add_argument("--profile", type=Path, default=DEFAULT_PROFILE)
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument(
        "--splits", nargs="+", choices=SPLITS, default=list(SPLITS), help="which splits to run"
    )
    parser.add_argument(
        "--spoken", action="store_true", help="also run the questions as Whisper transcripts"
    )
    parser.add_argument("--spoken-only", action="store_true", help="Whisper transcripts only")
    parser.add_argument(
        "--second-pass",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="hear a spoken turn that led nowhere again with the bot's second recognizer, as "
        "the bot does (default); --no-second-pass: the first recognizer alone",
    )
    parser.add_argument("--cases", nargs="+", help="only these case ids (a quick look)")
    parser.add_argument(
        "--llm", help="the language model's backend (default: the bot's, ModelSpec().llm)"
    )
    parser.add_argument(
        "--extractive",
        action=argparse.BooleanOptionalAction,
        help="answer in extractive mode (knowledge_matching.extractive), or with the model "
        "wording entries (--no-extractive), whatever the profile (default: the profile's)",
    )
    parser.add_argument(
        "--guard-heldout",
        action="store_true",
        help="only score the guard's held-out examples (no models, no questions)",
    )
    parser.add_argument("--transcripts", type=Path, default=TRANSCRIPTS)
    parser.add_argument(
        "--no-vocabulary",
        dest="vocabulary",
        action="store_false",
        help="the spoken input heard without the profile's vocabulary (bot/vocabulary.py)",
    )
    parser.add_argument(
        "--llm-timeout",
        type=float,
        default=None,
        help="seconds to the LLM's first token (default: the bot's own limit)",
    )
    args = parser.parse_args()
    if args.guard_heldout:
        return guard_heldout(args)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
