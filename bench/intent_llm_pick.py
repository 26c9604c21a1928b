"""Could the local language model pick the intent the matcher could not? A measurement.

For each utterance of a profile's evaluation split that the intent matcher sends on (route
``none``: "not sure" unless the knowledge base has something), the local model is shown the
profile's intents (name and examples) and the caller's words, and asked for the name of the
intent they mean, or ``none``. Were the bot to ask "Do you mean ...?" about the model's pick,
a right pick would be a paraphrase "right after one question", and a pick on a request the
profile does not cover one more question asked of such a caller (the issue allows 10%).

    .venv/bin/python -m bench.intent_llm_pick --profile P --data D [--splits dev] [--asr]
        [--model smollm2|qwen]

Nothing here is wired into the bot: it measures whether it would be worth doing.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from pathlib import Path
from typing import Any

from llama_cpp import Llama

from bot.intents.match import Match
from bot.profile import DEFAULT_PROFILE, BotProfile, load_profile
from serve.llm_llamacpp import QWEN, SMOLLM2, packaged_gguf
from serve.registry import ModelSpec, asr_backends, embedder_backends
from testkit.intent_eval.eval_sets import DATA, load_eval_sets
from testkit.intent_eval.outcomes import NONE, prepare
from testkit.intent_eval.profile_index import build_index, embed_queries
from testkit.intent_eval.transcripts import TRANSCRIPTS, asr_setup, asr_transcripts
from testkit.wire import percentile

_NAME = re.compile(r"[a-z_]+")


def menu(profile: BotProfile) -> str:
    """The intents as the model sees them: a line each, the name and three examples."""
    lines = []
    for intent in profile.intents:
        shown = "; ".join(f'"{e}"' for e in intent.examples[:3])
        lines.append(f"- {intent.name}: {shown}")
    return "\n".join(lines)


def prompt_for(profile: BotProfile, words: str) -> tuple[str, str]:
    system = (
        "You sort a caller's words into one of a company's request types. Reply with the "
        "name of the request type only, exactly as written, or none when no type fits."
    )
    user = (
        f"Request types, each with example requests:\n{menu(profile)}\n\n"
        f'The caller said: "{words}"\nWhich request type is it? Reply with its name or none.'
    )
    return system, user


def read_pick(reply: str, names: list[str]) -> str:
    """The intent name in the model's reply, or NONE."""
    tokens: list[str] = _NAME.findall(reply.lower())
    return next((token for token in tokens if token in names), NONE)


def load_model(which: str) -> Llama:
    name = QWEN if which == "qwen" else SMOLLM2
    return Llama(model_path=str(packaged_gguf(name)), n_ctx=2048, n_threads=2, verbose=False)


async def run(args: argparse.Namespace) -> int:
    profile = load_profile(args.profile)
    names = [i.name for i in profile.intents]
    sets = load_eval_sets(profile, data=args.data or DATA, absent=[], splits=tuple(args.splits))
    embedder = embedder_backends.create("minilm", ModelSpec(threads=2))
    embedder.timeout_s = 120.0
    await embedder.load()
    index, fitted = await build_index(profile, embedder)
    rule = fitted.rule
    llm = load_model(args.model)
    for split in args.splits:
        items = sets[split].items
        if args.asr:
            settings = ModelSpec()
            asr = asr_backends.create(settings.asr, settings)
            setup = asr_setup(settings.asr, asr, prompt="")
            cache = args.transcripts or (args.data or DATA) / TRANSCRIPTS.name
            heard = await asr_transcripts(items, setup, None, cache)
            items = [(text, truth) for text, (_, truth) in zip(heard.texts, items, strict=True)]
        vectors = await embed_queries(embedder, [t for t, _ in items])
        prepared = prepare(index, items, vectors, rule.top_k)
        sent_on = right = wrong = said_none = 0
        neg_sent_on = neg_picked = 0
        positives = sum(1 for _, truth in items if truth is not None)
        negatives = len(items) - positives
        times: list[float] = []
        for (text, truth), found in zip(items, prepared, strict=True):
            match = found if isinstance(found, Match) else index.judge(found, rule)
            if match.route != "none":
                continue
            started = time.perf_counter()
            system, user = prompt_for(profile, text)
            reply: Any = llm.create_chat_completion(
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                max_tokens=8,
                temperature=0.0,
            )
            times.append((time.perf_counter() - started) * 1000)
            pick = read_pick(str(reply["choices"][0]["message"]["content"]), names)
            if truth is None:
                neg_sent_on += 1
                neg_picked += pick != NONE
            else:
                sent_on += 1
                if pick == truth:
                    right += 1
                elif pick == NONE:
                    said_none += 1
                else:
                    wrong += 1
            if args.verbose:
                print(f"  {truth or NONE:>18} -> {pick:<18} {text}", file=sys.stderr)
        label = "Whisper transcripts" if args.asr else "clean text"
        print(
            f"| {split} | {label} | {args.model} | {positives} | {sent_on} | {right} | {wrong} | "
            f"{said_none} | {negatives} | {neg_sent_on} | {neg_picked} | "
            f"{percentile(times, 50):.0f} / {percentile(times, 95):.0f} |"
        )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", type=Path, default=DEFAULT_PROFILE)
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--splits", nargs="+", default=["dev"])
    parser.add_argument("--asr", action="store_true")
    parser.add_argument("--transcripts", type=Path, default=None)
    parser.add_argument("--model", choices=("smollm2", "qwen"), default="qwen")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    print(
        "| split | input | model | paraphrases | sent on | model right | model wrong | "
        "model none | negatives | sent on | model picked one | model ms P50 / P95 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
