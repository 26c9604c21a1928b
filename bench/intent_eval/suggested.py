"""``python -m bench.intent_eval.suggested``: what a new operator gains by accepting the
examples the node suggests (``bot.intents.suggest``: paraphrases the local model writes and
the matcher gives to the intent), measured through the turn's one decision as
``bench.intent_eval.decisions`` measures it.

For each intent of the profile, the suggestions are asked for once (``--rounds`` times,
each round's accepted ones added before the next: an operator pressing the button again),
every one offered is accepted, and the decisions on the split are counted before and after,
on clean text and, with ``--asr``, on the cached transcripts (heard by the profile's own
vocabulary as it was: the added examples would change what the recognizer is prompted with,
which is not measured here).

    python -m bench.intent_eval.suggested \\
        --profile bench/intent_eval/new_profiles/<name>/profile.toml \\
        --data bench/intent_eval/new_profiles/<name> --splits dev [--asr] [--llm llama-cpp-qwen]

The model samples (temperature 0.8, as the console asks it): two runs differ.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from bench.intent_eval.decisions import ASR, CLEAN, HEAD, decide_all, transcripts
from bot.intents.suggest import suggest_examples
from bot.knowledge.index import KnowledgeIndex
from bot.profile import DEFAULT_PROFILE, BotProfile, IntentConfig, load_profile
from serve.registry import ModelSpec, embedder_backends, llm_backends
from testkit.intent_eval.eval_sets import DATA, SPLITS, Items, load_eval_sets
from testkit.intent_eval.transcripts import cache_file
from testkit.profile_lookups import silent_cache


async def run(args: argparse.Namespace) -> int:
    profile = load_profile(args.profile)
    sets = load_eval_sets(profile, data=args.data, absent=[], splits=tuple(args.splits))
    spec = ModelSpec(threads=args.threads, llm=args.llm)
    embedder = embedder_backends.create("minilm", spec)
    embedder.timeout_s = 120.0
    await embedder.load()
    await embedder.warm()
    llm = llm_backends.create(args.llm, spec)
    llm.timeout_s = 120.0
    await llm.load()
    knowledge = (
        await KnowledgeIndex.build(profile.knowledge, embedder, profile.knowledge_matching)
        if profile.knowledge
        else None
    )

    inputs: dict[str, dict[str, Items]] = {}
    for split in args.splits:
        items = sets[split].items
        inputs[split] = {CLEAN: items}
        if args.asr:
            cached = transcripts(profile, items, args.transcripts)
            if cached is None:
                print(f"{split}: transcripts not all cached", file=sys.stderr)
            else:
                inputs[split][ASR] = cached[0]

    async def tally_rows(p: BotProfile, tag: str) -> list[str]:
        cache = await silent_cache(p, embedder)
        try:
            rows = []
            for split, by_input in inputs.items():
                for label, said in by_input.items():
                    tally = await decide_all(p, cache, knowledge, said)
                    rows.append(tally.row(split, f"{label}, {tag}"))
                    for note in tally.notes:
                        if note.startswith(("false accept", "wrong intent")):
                            print(f"  {tag}, {split}, {label}: {note}")
            return rows
        finally:
            await cache.stop()

    rows = await tally_rows(profile, "as written")
    current = profile
    accepted: dict[str, list[str]] = {i.name: [] for i in profile.intents}
    started = time.perf_counter()
    for _ in range(args.rounds):
        cache = await silent_cache(current, embedder)
        try:
            intents: list[IntentConfig] = []
            for intent in current.intents:
                found = await suggest_examples(intent, llm, cache, count=args.count)
                new = [s.text for s in found.offered]
                accepted[intent.name] += new
                intents.append(intent.model_copy(update={"examples": [*intent.examples, *new]}))
        finally:
            await cache.stop()
        current = current.model_copy(update={"intents": intents})
    spent = time.perf_counter() - started
    rows += await tally_rows(current, "with the suggestions")

    print(f"## Suggested examples accepted ({args.profile}, {args.llm}, {args.rounds} round(s))\n")
    print(HEAD)
    print("\n".join(rows))
    total = sum(len(v) for v in accepted.values())
    print(f"\n{total} suggestions accepted in {spent:.0f} s:")
    for name, lines in accepted.items():
        print(f"- {name} ({len(lines)}): " + " | ".join(lines))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description="The decisions before and after accepting every suggested example."
    )
    parser.add_argument("--profile", type=Path, default=DEFAULT_PROFILE)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--splits", nargs="+", default=list(SPLITS))
    parser.add_argument("--asr", action="store_true", help="also the cached ASR transcripts")
    parser.add_argument("--transcripts", type=Path, default=None)
    parser.add_argument("--llm", default="llama-cpp-qwen", help="the model that writes them")
    parser.add_argument("--count", type=int, default=6, help="paraphrases asked per intent")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    args.transcripts = cache_file(args.data, args.transcripts)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
