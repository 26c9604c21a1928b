"""``python -m bench.intent_eval``: accuracy, false accepts, confusion and lookup cost, for the
tuning split and the held-out test split; ``--sweep`` chooses thresholds on tuning only."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bot.intents.match import IntentIndex, IntentMatchingConfig, Vectors, normalize
from bot.knowledge.index import KnowledgeIndex
from bot.pipeline.rehear import leads_somewhere, other_words, worth_hearing_again
from bot.profile import DEFAULT_PROFILE, BotProfile, load_profile
from bot.vocabulary import vocabulary
from serve import ASR as Recognizer
from serve import Embedder
from serve.registry import ModelSpec, asr_backends, embedder_backends
from testkit.intent_eval.eval_sets import DATA, SPLITS, EvalSet, Items, load_eval_sets
from testkit.intent_eval.lookup_cost import lookup_cost_ms
from testkit.intent_eval.outcomes import NONE, Outcome, evaluate, ranking
from testkit.intent_eval.prefixes import evaluate_prefixes
from testkit.intent_eval.profile_index import build_index, embed_queries
from testkit.intent_eval.sweep import (
    ACTION_THRESHOLDS,
    CALIBRATIONS,
    MARGINS,
    NEGATIVE_MARGINS,
    THRESHOLDS,
    TOP_KS,
    choose,
    strictness,
    sweep,
)
from testkit.intent_eval.transcripts import (
    TRANSCRIPTS,
    VOICES,
    asr_setup,
    asr_transcripts,
    cache_file,
    vocabulary_key,
)
from testkit.wire import percentile

CLEAN = "clean text"
ASR = "Whisper transcripts"


def summary_row(split: str, name: str, out: Outcome) -> str:
    return (
        f"| {split} | {name} | {out.positives} | {out.accuracy:.1%} ({out.correct}) | "
        f"{out.wrong} | {out.missed} | {out.negatives} | "
        f"{out.false_accepts} ({out.false_accept_rate:.1%}) | {out.right_with_confirm:.1%} | "
        f"{out.asked_in_scope:.1%} | {out.asked_out_of_scope:.1%} | {out.background_closer} |"
    )


SUMMARY_HEAD = (
    "| split | input | paraphrases | answered right | wrong intent | to LLM | negatives "
    "| false accepts | right, directly or after a question | asked (paraphrases) "
    "| asked (negatives) | background closer |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def nearest_negative(index: IntentIndex, name: str, vector: Vectors) -> str:
    intent = next(i for i in index.intents if i.name == name)
    return intent.negatives[int(np.argmax(intent.negative_vectors @ vector))]


def confusion_table(out: Outcome, names: list[str]) -> list[str]:
    cols = [*names, NONE]
    lines = [
        "| said \\ answered | " + " | ".join(cols) + " |",
        "|---" * (len(cols) + 1) + "|",
    ]
    for want in cols:
        cells = [str(out.confusion.get((want, got), 0) or ".") for got in cols]
        lines.append(f"| {want} | " + " | ".join(cells) + " |")
    return lines


def describe(rule: IntentMatchingConfig) -> str:
    return (
        f"top_k {rule.top_k}, calibration {rule.calibration:g}, threshold {rule.threshold:.3g}, "
        f"action threshold {rule.action_threshold:g}, margin {rule.margin:g}, "
        f"negative margin {rule.negative_margin:g}, background margin "
        f"{rule.background_margin:g}, confirm threshold {rule.confirm_threshold:g}, "
        f"confirm background margin {rule.confirm_background_margin:g}, confirm margin "
        f"{rule.confirm_margin:g}, clear margin {rule.clear_margin:g}, clear background "
        f"margin {rule.clear_background_margin:g}"
    )


async def run(args: argparse.Namespace) -> int:
    profile = load_profile(args.profile)
    absent: list[str] = []
    splits = list(args.splits)
    sets = load_eval_sets(profile, data=args.data, absent=absent, splits=tuple(splits))
    names = [i.name for i in profile.intents]
    # Whole splits are embedded in one batch: more time than one turn gets.
    embedder = embedder_backends.create(args.embedder, ModelSpec(threads=args.threads))
    embedder.timeout_s = 120.0
    await embedder.load()
    await embedder.warm()
    index, fitted = await build_index(profile, embedder)
    rule = fitted.rule

    # inputs[split][input name] = (items, vectors)
    inputs: dict[str, dict[str, tuple[Items, Vectors]]] = {}
    for split in splits:
        items = sets[split].items
        inputs[split] = {CLEAN: (items, await embed_queries(embedder, [t for t, _ in items]))}
    if args.asr:
        await add_transcripts(
            args, profile, sets=sets, splits=splits, embedder=embedder, inputs=inputs
        )
    second: dict[str, SecondPass] = {}
    if args.asr and args.second_pass:
        second = await add_second_pass(
            args,
            profile,
            sets=sets,
            splits=splits,
            embedder=embedder,
            index=index,
            rule=rule,
            inputs=inputs,
        )

    outcomes = {
        split: {k: evaluate(index, items, vectors, rule) for k, (items, vectors) in per.items()}
        for split, per in inputs.items()
    }
    print(f"## Intent matching ({len(names)} intents; {describe(rule)})\n")
    for name, threshold in fitted.thresholds.items():
        print(f"- threshold of {name!r} raised to {threshold:.3g}")
    for warning in fitted.warnings:
        print(f"- warning at load: {warning.message}")
    if absent:
        print(f"- not in the profile, so counted as negatives: paraphrases of {absent}")
    for split in splits:
        s = sets[split]
        per = s.per_intent()
        print(
            f"- {split}: {len(s.positives)} paraphrases ({min(per.values())}-{max(per.values())} "
            f"per intent, {len(per)} intents), {len(s.negatives)} negatives"
        )
    print("\n" + SUMMARY_HEAD)
    for split, per_input in outcomes.items():
        for k, out in per_input.items():
            print(summary_row(split, k, out))
    if second:
        print(
            f"\n### Second pass ({args.second_pass}) on the turns whose transcript matched "
            "nothing (no intent, not small talk, no knowledge entry)\n"
        )
        print(
            "| split | utterances | second passes | second transcript taken | of them another "
            "reading | ASR P50/P95 ms |"
        )
        print("|---|---|---|---|---|---|")
        for split, sp in second.items():
            cost = (
                f"{percentile(sp.asr_ms, 50):.0f}/{percentile(sp.asr_ms, 95):.0f}"
                if sp.asr_ms
                else "cached"
            )
            print(
                f"| {split} | {sp.utterances} | {sp.passes} | {sp.taken} | "
                f"{sp.taken_alternative} | {cost} |"
            )

    print(
        f"\n### The embedder alone ({embedder.description}, mean of the {rule.top_k} nearest "
        "examples, no rule)\n"
    )
    print("| split | input | nearest intent right | one threshold, 0 false accepts |")
    print("|---|---|---|---|")
    for split, by_input in inputs.items():
        for k, (heard, vectors) in by_input.items():
            r = ranking(index, heard, vectors, rule.top_k)
            print(f"| {split} | {k} | {r.nearest_right:.1%} | {r.one_threshold:.1%} |")

    for split, per_input in outcomes.items():
        print(f"\n### Per intent, {split} split (correct / n; wrong intent; to LLM)\n")
        print("| intent | " + " | ".join(per_input) + " |")
        print("|---" * (len(per_input) + 1) + "|")
        for name in names:
            cells = []
            for out in per_input.values():
                n = sum(v for (w, _), v in out.confusion.items() if w == name)
                ok = out.confusion.get((name, name), 0)
                miss = out.confusion.get((name, NONE), 0)
                cells.append(f"{ok}/{n}; {n - ok - miss}; {miss}")
            print(f"| {name} | " + " | ".join(cells) + " |")
    for split, per_input in outcomes.items():
        for k, out in per_input.items():
            if split == "test":
                print(f"\n### Confusion, test split, {k}\n")
                print("\n".join(confusion_table(out, names)))
            elif out.false_accept_texts or out.wrong_texts or args.verbose:
                print(f"\n### Errors, {split} split, {k}\n")
            for text, got, score in out.false_accept_texts:
                print(f"- false accept: {text!r} -> {got} ({score:.3f})")
            for text, want, got, score in out.wrong_texts:
                print(f"- wrong intent: {text!r} ({want}) -> {got} ({score:.3f})")
            if args.verbose and split != "test":
                for text, want, reason, score in out.missed_texts:
                    print(f"- to LLM: {text!r} ({want}; {reason}, {score:.3f})")
                vetoes = [(t, i) for t, i in zip(*inputs[split][k], strict=True)]
                for (text, truth), vector in vetoes:
                    match = index.exact(text) or index.semantic(vector, rule)
                    if truth is not None and match.reason == "negative example closer":
                        negative = nearest_negative(index, match.best or "", vector)
                        print(f"- vetoed: {text!r} ({truth}) by {negative!r}")

    if args.sweep:
        print_sweep(index, inputs, rule)

    if args.prefixes:
        print(
            "\n### Partial utterances (clean text: the first 2 to n-1 words of each, as a "
            "speculative lookup sees them at a pause)\n"
        )
        print(
            "| split | paraphrase prefixes | own intent | wrong intent | negative prefixes "
            "| false accepts |"
        )
        print("|---|---|---|---|---|---|")
        found = {
            split: await evaluate_prefixes(index, embedder, sets[split].items, rule)
            for split in splits
        }
        for split, pre in found.items():
            print(
                f"| {split} | {pre.paraphrase_prefixes} | {pre.own_intent} | {len(pre.wrong)} "
                f"| {pre.negative_prefixes} | {len(pre.false_accepts)} |"
            )
        for split, pre in found.items():
            for prefix, text, got in pre.false_accepts:
                print(f"- {split}, false accept: {prefix!r} (of {text!r}) -> {got}")
            for prefix, text, want, got in pre.wrong:
                print(f"- {split}, wrong intent: {prefix!r} (of {text!r}, {want}) -> {got}")

    texts = [t for split in splits for t, _ in sets[split].items]
    costs, matching = await lookup_cost_ms(index, embedder, texts, rule)
    print(
        f"\n### Lookup cost (normalize + embed + match, one utterance at a time, "
        f"{args.threads} threads)\n"
    )
    print("| measure | n | P50 ms | P95 ms | max ms |")
    print("|---|---|---|---|---|")
    embed_label = f"{embedder.description}: embed + match"
    for label, values in ((embed_label, costs), ("match only", matching)):
        print(
            f"| {label} | {len(values)} | {percentile(values, 50):.2f} | "
            f"{percentile(values, 95):.2f} | {max(values):.2f} |"
        )
    return 0


async def add_transcripts(
    args: argparse.Namespace,
    profile: BotProfile,
    *,
    sets: dict[str, EvalSet],
    splits: list[str],
    embedder: Embedder,
    inputs: dict[str, dict[str, tuple[Items, Vectors]]],
) -> None:
    """The bot's own ASR (settings' default backend) on each utterance spoken by flite
    (``--voices espeak``: by espeak-ng), heard by the profile's vocabulary as on a call
    (``--no-vocabulary``: without)."""
    settings = ModelSpec()
    asr = asr_backends.create(settings.asr, settings)
    unhurried(asr)
    words = vocabulary(profile) if args.vocabulary else None
    setup = asr_setup(settings.asr, asr, prompt=vocabulary_key(words))
    loaded = False
    print(f"ASR: {settings.asr} ({asr.description}), transcripts {setup.key}", file=sys.stderr)
    for split in splits:
        items = sets[split].items
        try:
            result = await asr_transcripts(
                items, setup, None, args.transcripts, words, voices=args.voices
            )
        except KeyError:
            if not loaded:
                await asr.load()
                await asr.warm()
                loaded = True
            result = await asr_transcripts(
                items, setup, asr, args.transcripts, words, voices=args.voices
            )
            p50, p95 = percentile(result.asr_ms, 50), percentile(result.asr_ms, 95)
            print(
                f"{split}: transcribed {result.transcribed}, ASR P50 {p50:.0f}, P95 {p95:.0f} ms",
                file=sys.stderr,
            )
        label = ASR if words else f"{ASR} (no vocabulary)"
        if args.voices != "flite":
            label += f" ({args.voices} voices)"
        heard = [(text, truth) for text, (_, truth) in zip(result.texts, items, strict=True)]
        inputs[split][label] = (heard, await embed_queries(embedder, result.texts))


def unhurried(asr: Recognizer) -> None:
    """Figures, not the node's limit: a transcription may take what a loaded machine takes
    (a two-pass recognizer's both)."""
    for part in (asr, *(getattr(asr, a) for a in ("first", "second") if hasattr(asr, a))):
        part.timeout_s = 300.0


def other_readings(first: str, second: str | None, alternatives: Sequence[str] = ()) -> list[str]:
    """The words to try, in order, instead of ``first``: the second recognizer's reading,
    then its other readings (a recognizer asked for them: ``whisper-base-window-alt``,
    measured, not adopted), each once and only when it says other words than ``first``."""
    tried = {normalize(first)}
    readings: list[str] = []
    for text in (second or "", *alternatives):
        words = other_words(first, text)
        if words is not None and normalize(words) not in tried:
            tried.add(normalize(words))
            readings.append(words)
    return readings


@dataclass
class SecondPass:
    """What the second pass did on one split."""

    utterances: int = 0
    #: Turns whose first transcript led nowhere and is worth hearing again (not small
    #: talk, no knowledge entry): the bot decodes them again.
    passes: int = 0
    #: Of those, the turns whose second transcript matched: the bot goes on with it.
    taken: int = 0
    #: Of those, the turns whose taken words were one of the second recognizer's other
    #: readings, not its best.
    taken_alternative: int = 0
    #: The second recognizer's time per utterance, when it ran (not cached).
    asr_ms: list[float] = field(default_factory=list)


async def add_second_pass(
    args: argparse.Namespace,
    profile: BotProfile,
    *,
    sets: dict[str, EvalSet],
    splits: list[str],
    embedder: Embedder,
    index: IntentIndex,
    rule: IntentMatchingConfig,
    inputs: dict[str, dict[str, tuple[Items, Vectors]]],
) -> dict[str, SecondPass]:
    """The bot's rule (``bot.pipeline.rehear``'s functions, as the router applies them) on
    the Whisper transcripts: a turn whose transcript matched no intent, is not small talk and
    retrieved no knowledge entry is decoded again by ``--second-pass``'s recognizer, and the
    second transcript is taken when it says other words and they match."""
    spec = ModelSpec(asr=args.second_pass)
    asr = asr_backends.create(spec.asr, spec)
    unhurried(asr)
    setup = asr_setup(spec.asr, asr)
    knowledge = (
        await KnowledgeIndex.build(profile.knowledge, embedder, profile.knowledge_matching)
        if profile.knowledge
        else None
    )
    loaded = False
    found: dict[str, SecondPass] = {}
    for split in splits:
        items = sets[split].items
        heard, vectors = next(v for k, v in inputs[split].items() if k.startswith(ASR))
        try:
            result = await asr_transcripts(items, setup, None, args.transcripts, voices=args.voices)
        except KeyError:
            if not loaded:
                await asr.load()
                await asr.warm()
                loaded = True
            result = await asr_transcripts(items, setup, asr, args.transcripts, voices=args.voices)
        again = await embed_queries(embedder, result.texts)
        sp = found[split] = SecondPass(utterances=len(items), asr_ms=list(result.asr_ms))
        chosen: Items = []
        others = result.alternatives or [()] * len(items)
        for k, ((text, truth), second) in enumerate(zip(heard, result.texts, strict=True)):
            first = index.exact(text) or index.semantic(vectors[k], rule)
            taken = text
            if not leads_somewhere(first) and await worth_hearing_again(
                text, knowledge.retrieve if knowledge is not None else None
            ):
                sp.passes += 1
                for words in other_readings(text, second, others[k]):
                    vector = (
                        again[k] if words == second else (await embed_queries(embedder, [words]))[0]
                    )
                    if leads_somewhere(index.exact(words) or index.semantic(vector, rule)):
                        sp.taken += 1
                        if words != second:
                            sp.taken_alternative += 1
                        taken = words
                        break
            chosen.append((taken, truth))
        voiced = "" if args.voices == "flite" else f" ({args.voices} voices)"
        inputs[split][f"{ASR}{voiced} + second pass"] = (
            chosen,
            await embed_queries(embedder, [t for t, _ in chosen]),
        )
    return found


def print_sweep(
    index: IntentIndex,
    inputs: dict[str, dict[str, tuple[Items, Vectors]]],
    current: IntentMatchingConfig,
) -> None:
    if "tuning" not in inputs:
        print("\n(--sweep needs the tuning split)")
        return
    labels = list(inputs["tuning"])
    cells = sweep(index, list(inputs["tuning"].values()))
    print(
        f"\n### Threshold sweep on the tuning split only ({len(cells)} cells: top_k "
        f"{', '.join(map(str, TOP_KS))}; calibration {', '.join(map(str, CALIBRATIONS))}; "
        f"threshold {THRESHOLDS[0]}-{THRESHOLDS[-1]}; margin {MARGINS[0]}-{MARGINS[-1]}; "
        f"negative margin {NEGATIVE_MARGINS[0]}-{NEGATIVE_MARGINS[-1]}; action threshold "
        f"{', '.join(map(str, ACTION_THRESHOLDS))})\n"
    )
    print("Best cells with no false accept on any tuning input (accuracy per input):\n")
    head = "| top_k | calibration | threshold | action threshold | margin | negative margin | "
    print(head + " | ".join(labels) + " |")
    print("|---|---|---|---|---|---|" + "---|" * len(labels))
    safe = [c for c in cells if c.total_false_accepts == 0]
    safe.sort(key=lambda c: (c.total_correct, *strictness(c)), reverse=True)
    for c in safe[:12]:
        r = c.rule
        accs = [f"{c.accuracy(n):.1%}" for n in range(len(labels))]
        print(
            f"| {r.top_k} | {r.calibration:g} | {r.threshold:g} | {r.action_threshold:g} | "
            f"{r.margin:g} | "
            f"{r.negative_margin:g} | " + " | ".join(accs) + " |"
        )
    print("\nBest per top_k and calibration (no false accept):\n")
    print("| top_k | " + " | ".join(f"calibration {w:g}" for w in CALIBRATIONS) + " |")
    print("|---|" + "---|" * len(CALIBRATIONS))
    for k in TOP_KS:
        row = []
        for w in CALIBRATIONS:
            group = [c for c in safe if c.rule.top_k == k and c.rule.calibration == w]
            row.append(
                " / ".join(f"{group[0].accuracy(n):.1%}" for n in range(len(labels)))
                if group
                else "-"
            )
        print(f"| {k} | " + " | ".join(row) + " |")
    best = choose(cells)
    if best is None:
        print("\nNo cell has zero false accepts on the tuning split.")
        return
    chosen = ", ".join(f"{k} {best.accuracy(n):.1%}" for n, k in enumerate(labels))
    print(
        "\nChosen on tuning (no false accept on any input, then most correct, then strictest): "
        f"{describe(best.rule)} ({chosen})"
    )
    if best.rule != current:
        print(f"The profile has: {describe(current)}")


def main() -> int:
    parser = argparse.ArgumentParser(description="Evaluate the intent cache's matching.")
    parser.add_argument("--profile", type=Path, default=DEFAULT_PROFILE)
    parser.add_argument("--asr", action="store_true", help="also evaluate on ASR transcripts")
    parser.add_argument("--sweep", action="store_true", help="choose thresholds on tuning")
    parser.add_argument(
        "--splits", nargs="+", default=list(SPLITS), help="which splits (folders) to run"
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=DATA,
        help="the folder of the splits (new_profiles/<name> for the profiles of other businesses)",
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--embedder",
        default="minilm",
        choices=embedder_backends.names(),
        help="the sentence embedder to evaluate (the sweep's thresholds belong to one embedder)",
    )
    parser.add_argument(
        "--transcripts",
        type=Path,
        default=None,
        help=f"the transcripts' cache (default: {TRANSCRIPTS.name} in the data folder)",
    )
    parser.add_argument(
        "--no-vocabulary",
        dest="vocabulary",
        action="store_false",
        help="with --asr: the recognizer without the profile's vocabulary (bot/vocabulary.py)",
    )
    parser.add_argument(
        "--second-pass",
        default="",
        choices=["", *asr_backends.names()],
        help="with --asr: decode again with this ASR backend the turns that matched nothing "
        "(whisper-base-window, whisper-beam), as the bot's two-pass recognizers do",
    )
    parser.add_argument(
        "--voices",
        default="flite",
        choices=VOICES,
        help="with --asr: who speaks the utterances: flite's voices, or espeak-ng's robotic "
        "ones (cached under keys of their own)",
    )
    parser.add_argument(
        "--prefixes", action="store_true", help="also match the first words of each utterance"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="list tuning misses too")
    args = parser.parse_args()
    args.transcripts = cache_file(args.data, args.transcripts)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
