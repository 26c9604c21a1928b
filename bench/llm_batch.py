"""LLM answers to concurrent conversations: one at a time vs batched decoding.

``python -m bench.llm_batch [--conversations 1 4 8] [--tokens 32]``

Each conversation sends one question (the same system prompt, a different question) at
the same moment; the model answers up to ``--tokens`` tokens, greedy. For each level and
backend it prints the time to first token P50/P95 over the conversations, the time to the
last answer's end, and the aggregate tokens per second. ``llama-cpp`` is the in-process
default (one context, one request at a time); ``llama-cpp-batched`` decodes every answer
in one batch per step (serve/llm_llamacpp_batched.py). One thread each.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from contextlib import aclosing

from serve.llm import LLM, ChatMessage
from serve.llm_llamacpp import LlamaCppLLM
from serve.llm_llamacpp_batched import BatchedLlamaCppLLM

SYSTEM = (
    "You are the phone assistant of Acme, an online shop. Answer in one or two short "
    "sentences. Be polite and brief. Never invent order numbers, prices or dates."
)
QUESTIONS = (
    "Hello, how are you today?",
    "Hi, can you hear me?",
    "Good morning, who am I speaking to?",
    "Thanks for your help.",
    "Are you a robot?",
    "Hello, is anyone there?",
    "What is your name?",
    "Okay, great, thank you.",
)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def answer(llm: LLM, question: str, tokens: int) -> tuple[float, int]:
    """(seconds to first piece, pieces) of one answer."""
    started = time.monotonic()
    first = 0.0
    count = 0
    messages = [ChatMessage("system", SYSTEM), ChatMessage("user", question)]
    async with aclosing(llm.stream(messages, max_tokens=tokens, temperature=0.0)) as pieces:
        async for _ in pieces:
            if count == 0:
                first = time.monotonic() - started
            count += 1
    return first, count


async def level(llm: LLM, n: int, tokens: int) -> str:
    questions = [QUESTIONS[i % len(QUESTIONS)] for i in range(n)]
    started = time.monotonic()
    results = await asyncio.gather(*(answer(llm, q, tokens) for q in questions))
    wall = time.monotonic() - started
    firsts = [r[0] * 1000 for r in results]
    produced = sum(r[1] for r in results)
    return (
        f"{llm.name:18s} {n:3d} calls  first token P50 {statistics.median(firsts):6.0f} ms"
        f"  P95 {pct(firsts, 0.95):6.0f} ms  all done {wall:5.2f} s"
        f"  {produced / wall:6.1f} tok/s"
    )


async def main(levels: list[int], tokens: int) -> None:
    single = LlamaCppLLM(n_threads=1, retries=0, timeout_s=120.0)
    batched = BatchedLlamaCppLLM(sequences=max(levels), n_threads=1, timeout_s=120.0)
    for llm in (single, batched):
        await llm.load()
        await llm.warm()
        await answer(llm, QUESTIONS[0], 4)  # the system prompt in the cache, as in a call
    for n in levels:
        for llm in (single, batched):
            print(await level(llm, n, tokens), flush=True)
    batched.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args()
    asyncio.run(main(args.conversations, args.tokens))
