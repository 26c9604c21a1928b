"""``python -m bench.intent_eval``: accuracy, false accepts, confusion and lookup cost."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from bench.intent_eval import (
    DATA,
    NONE,
    Outcome,
    asr_transcripts,
    build_index,
    evaluate,
    load_eval_set,
    lookup_cost_ms,
    percentile,
)
from bot.intent_match import Thresholds
from bot.profile import load_profile
from bot.settings import DEFAULT_PROFILE
from serve import MiniLMEmbedder


def summary_row(name: str, out: Outcome) -> str:
    return (
        f"| {name} | {out.positives} | {out.accuracy:.1%} ({out.correct}) | {out.wrong} | "
        f"{out.missed} | {out.negatives} | {out.false_accepts} ({out.false_accept_rate:.1%}) |"
    )


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


async def run(args: argparse.Namespace) -> int:
    profile = load_profile(args.profile)
    evalset = load_eval_set(profile)
    names = [i.name for i in profile.intents]
    embedder = MiniLMEmbedder(threads=args.threads)
    await embedder.load()
    await embedder.warmup()
    index = await build_index(profile, embedder)
    m = profile.intent_matching
    rule = Thresholds(
        threshold=m.threshold, margin=m.margin, negative_margin=m.negative_margin, top_k=m.top_k
    )

    texts = {"clean text": [t for t, _ in evalset.items]}
    if args.asr:
        texts["Whisper transcripts"] = await asr_transcripts(
            evalset.items, DATA / "asr_transcripts.json"
        )
    truths = [i for _, i in evalset.items]
    vectors = {k: await embedder.embed(v) for k, v in texts.items()}
    items = {k: list(zip(v, truths, strict=True)) for k, v in texts.items()}
    outcomes = {k: evaluate(index, items[k], vectors[k], rule) for k in texts}

    print(
        f"## Intent matching ({len(names)} intents; top_k {m.top_k}, threshold {m.threshold}, "
        f"margin {m.margin}, negative margin {m.negative_margin})\n"
    )
    print("| input | paraphrases | accuracy | wrong intent | to LLM | negatives | false accepts |")
    print("|---|---|---|---|---|---|---|")
    for k, out in outcomes.items():
        print(summary_row(k, out))
    print("\n### Per intent (correct / n; wrong intent; to LLM)\n")
    print("| intent | " + " | ".join(outcomes) + " |")
    print("|---" * (len(outcomes) + 1) + "|")
    for name in names:
        cells = []
        for out in outcomes.values():
            n = sum(v for (w, _), v in out.confusion.items() if w == name)
            ok = out.confusion.get((name, name), 0)
            miss = out.confusion.get((name, NONE), 0)
            cells.append(f"{ok}/{n}; {n - ok - miss}; {miss}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    for k, out in outcomes.items():
        print(f"\n### Confusion, {k}\n")
        print("\n".join(confusion_table(out, names)))
        for text, got, score in out.false_accept_texts:
            print(f"- false accept: {text!r} -> {got} ({score:.3f})")
        for text, want, got, score in out.wrong_texts:
            print(f"- wrong intent: {text!r} ({want}) -> {got} ({score:.3f})")

    if args.sweep:
        print("\n### Threshold sweep (accuracy / false accepts)\n")
        print("| threshold | margin | negative margin | " + " | ".join(outcomes) + " |")
        print("|---|---|---|" + "---|" * len(outcomes))
        best: tuple[float, float, float, float] | None = None
        for t in (0.40, 0.425, 0.45, 0.475, 0.50, 0.55, 0.60):
            for mg in (0.0, 0.05, 0.075, 0.10, 0.15):
                for nm in (0.0, 0.05, 0.10):
                    r = Thresholds(threshold=t, margin=mg, negative_margin=nm, top_k=m.top_k)
                    swept = [evaluate(index, items[k], vectors[k], r) for k in texts]
                    cells = [f"{o.accuracy:.1%} / {o.false_accepts}" for o in swept]
                    print(f"| {t:.3f} | {mg:.3f} | {nm:.2f} | " + " | ".join(cells) + " |")
                    worst = min(o.accuracy for o in swept)
                    clean = all(o.false_accepts == 0 for o in swept)
                    if clean and (best is None or worst > best[0]):
                        best = (worst, t, mg, nm)
        if best is not None:
            print(
                f"\nBest with no false accept on any input: threshold {best[1]:.2f}, margin "
                f"{best[2]:.2f}, negative margin {best[3]:.2f} (lowest accuracy {best[0]:.1%})"
            )

    costs = await lookup_cost_ms(index, embedder, texts["clean text"], rule)
    print(f"\n### Lookup cost (embed + match, one utterance at a time, {args.threads} threads)\n")
    print("| measure | n | P50 ms | P95 ms | max ms |")
    print("|---|---|---|---|---|")
    print(
        f"| MiniLM embed + match | {len(costs)} | {percentile(costs, 50):.1f} | "
        f"{percentile(costs, 95):.1f} | {max(costs):.1f} |"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description="Evaluate the intent cache's matching.")
    parser.add_argument("--profile", type=Path, default=DEFAULT_PROFILE)
    parser.add_argument("--asr", action="store_true", help="also evaluate on Whisper transcripts")
    parser.add_argument("--sweep", action="store_true", help="print a threshold/margin sweep")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
