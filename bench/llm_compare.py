"""The packaged LLMs side by side on the bot's own grounded prompts:

    .venv/bin/python -m bench.llm_compare [--llm llama-cpp llama-cpp-qwen]

The backends answer each prompt in turn, so that a busy machine slows them alike; the memory
each adds is read when it loads (one backend: a process of its own). The prompts are what
the Responder sends on the LLM route: the profile's system prompt, then the caller's question
with the entries the knowledge index retrieves for it (``FACTS_INTRO``). The questions are the
tuning split's covered ones of ``testkit/answer_eval/questions.toml`` that retrieve an entry (the
held-out split is not read). The LLM is built by the registry as the node builds it (one
thread), its system prompt warmed first as the node does; greedy decoding, so runs repeat.
Prints per question each model's first-piece time, pieces and whole answer's time, then the
medians, the decode rate after the first piece, and the resident memory each model added.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path

from bot.knowledge.index import KnowledgeIndex
from bot.pipeline.stages.responder import FACTS_INTRO
from bot.profile import DEFAULT_PROFILE, load_profile
from serve import LLM, ChatMessage, StageTimings
from serve.registry import ModelSpec, embedder_backends, llm_backends
from testkit.answer_eval.questions import load_cases


def rss_mb(field: str = "VmRSS") -> float:
    """This process's resident memory (or its peak, ``VmHWM``), MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no {field} in /proc/self/status")


@dataclass
class Run:
    """One backend's figures over the prompts."""

    llm: LLM
    added_mb: float
    load_s: float
    firsts: list[float] = field(default_factory=list)
    totals: list[float] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)

    def summary(self) -> str:
        firsts, totals = self.firsts, self.totals
        return (
            f"{self.llm.description} ({len(firsts)} grounded prompts, greedy, 1 thread): "
            f"load + warm-up {self.load_s:.1f} s, +{self.added_mb:.0f} MB resident; first "
            f"piece median {statistics.median(firsts):.0f} ms (P90 "
            f"{statistics.quantiles(firsts, n=10)[-1]:.0f}); decode median "
            f"{statistics.median(self.rates):.0f} pieces/s; answer median "
            f"{statistics.median(self.lengths)} pieces, whole answer median "
            f"{statistics.median(totals):.0f} ms"
        )


async def answer(run: Run, prompt: list[ChatMessage], max_tokens: int) -> str:
    timings = StageTimings()
    stream = run.llm.stream(prompt, max_tokens=max_tokens, temperature=0.0, timings=timings)
    async with aclosing(stream) as it:
        pieces = [p async for p in it]
    first, total = timings.durations_ms["llm_first_token"], timings.durations_ms["llm_total"]
    run.firsts.append(first)
    run.totals.append(total)
    run.lengths.append(len(pieces))
    if len(pieces) > 1 and total > first:
        run.rates.append((len(pieces) - 1) / ((total - first) / 1000.0))
    text = "".join(pieces).strip().replace("\n", " ")
    return f"{first:5.0f} ms first, {len(pieces):3d} pieces, {total:5.0f} ms: {text}"


async def main(backends: list[str], count: int, max_tokens: int) -> None:
    print(f"load average at start: {os.getloadavg()}")
    profile = load_profile(DEFAULT_PROFILE)
    embedder = embedder_backends.create("minilm", ModelSpec())
    await embedder.load()
    knowledge = await KnowledgeIndex.build(profile.knowledge, embedder, profile.knowledge_matching)
    questions = [
        ask.text
        for case in load_cases(profile)
        if case.split == "tuning" and case.kind == "covered" and len(case.asks) == 1
        for ask in case.asks
    ]
    system = ChatMessage("system", profile.system_prompt)
    runs: list[Run] = []
    for backend in backends:
        before = rss_mb()
        llm = llm_backends.create(backend, ModelSpec(llm=backend))
        llm.timeout_s = 300.0  # figures, not the node's limit
        started = time.monotonic()
        await llm.load()
        await llm.warm()
        load_s = time.monotonic() - started
        warm = [system, ChatMessage("user", "Hello")]  # as the node: the system prompt cached
        async with aclosing(llm.stream(warm, max_tokens=1)) as it:
            _ = [p async for p in it]
        runs.append(Run(llm, rss_mb() - before, load_s))
    asked = 0
    for question in questions:
        found = await knowledge.retrieve(question)
        if not found:
            continue
        facts = "\n".join(f"- {r.entry.answer}" for r in found)
        prompt = [system, ChatMessage("user", f"{question}\n\n{FACTS_INTRO}\n{facts}")]
        print(f"\n{question}")
        for run in runs:  # interleaved: the machine's load falls on every model alike
            print(f"  {run.llm.description}: {await answer(run, prompt, max_tokens)}")
        asked += 1
        if asked >= count:
            break
    print()
    for run in runs:
        print(run.summary())
    print(
        f"RSS {rss_mb():.0f} MB, peak {rss_mb('VmHWM'):.0f} MB; load average at the end: "
        f"{os.getloadavg()}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="The packaged LLMs on grounded prompts.")
    parser.add_argument(
        "--llm", nargs="+", default=["llama-cpp", "llama-cpp-qwen"], help="LLM backend names"
    )
    parser.add_argument("--count", type=int, default=20, help="grounded prompts to time")
    parser.add_argument("--max-tokens", type=int, default=60, help="the profile's own")
    args = parser.parse_args()
    asyncio.run(main(args.llm, args.count, args.max_tokens))
