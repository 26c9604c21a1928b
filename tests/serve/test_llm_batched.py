"""llama.cpp with several conversations in one batched decode: same answers, fewer steps."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing

import pytest
import pytest_asyncio

from serve import ChatMessage, ModelSpec, llm_backends
from serve.llm import LLM
from serve.llm_llamacpp import LlamaCppLLM
from serve.llm_llamacpp_batched import BatchedLlamaCppLLM

pytestmark = [pytest.mark.models, pytest.mark.asyncio(loop_scope="session")]

SYSTEM = ChatMessage("system", "You are the phone assistant of Acme, an online shop. Be brief.")
QUESTIONS = ("Hello, how are you today?", "Are you a robot?", "Thanks for your help.")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def batched() -> AsyncIterator[BatchedLlamaCppLLM]:
    llm = BatchedLlamaCppLLM(sequences=3, n_ctx_per_sequence=512, timeout_s=60.0)
    await llm.load()
    yield llm
    llm.close()


async def answer(llm: LLM, question: str, tokens: int = 24) -> str:
    messages = [SYSTEM, ChatMessage("user", question)]
    async with aclosing(llm.stream(messages, max_tokens=tokens, temperature=0.0)) as pieces:
        return "".join([p async for p in pieces])


async def test_concurrent_answers_match_one_at_a_time(batched: BatchedLlamaCppLLM) -> None:
    # Greedy: each conversation gets the same tokens whether it is decoded alone or beside
    # others (no sequence reads another's cache). Against ``LlamaCppLLM`` only most match:
    # its context is sized differently, and a near-tie can tip the other way.
    expected = [await answer(batched, q) for q in QUESTIONS]
    single = LlamaCppLLM(n_threads=1, timeout_s=60.0)
    await single.load()
    assert await answer(single, QUESTIONS[0]) == expected[0]
    steps = batched.steps
    got = await asyncio.gather(*(answer(batched, q) for q in QUESTIONS))
    assert got == expected
    generated = sum(len(batched.tokens([ChatMessage("user", a)])) for a in got)
    # Three answers of up to 24 tokens took about as many steps as the longest one, not
    # the sum (each step decoded a token of every answer).
    assert batched.steps - steps <= 24 + 2 < generated


async def test_the_shared_system_prompt_is_read_once(batched: BatchedLlamaCppLLM) -> None:
    await answer(batched, "Hi", tokens=1)
    before = batched.batched_tokens
    await answer(batched, "Are you there?", tokens=1)
    read = batched.batched_tokens - before
    prompt = len(batched.tokens([SYSTEM, ChatMessage("user", "Are you there?")]))
    # Only the new user turn and the assistant's header were decoded: the system prompt's
    # KV was copied from the sequence that already held it.
    assert read < prompt - 10, (read, prompt)


async def test_more_requests_than_sequences_wait_and_a_closed_one_frees_its_slot(
    batched: BatchedLlamaCppLLM,
) -> None:
    stream = batched.stream([SYSTEM, ChatMessage("user", "Tell me a story.")], max_tokens=200)
    async with aclosing(stream) as pieces:
        async for _ in pieces:
            break  # the caller hung up: the sequence goes back to the pool
    answers = await asyncio.gather(*(answer(batched, q, 8) for q in QUESTIONS * 2))
    assert all(a.strip() for a in answers)
    assert batched.metrics()["errors"] == 0


async def test_the_backend_is_chosen_by_name() -> None:
    spec = ModelSpec(llm="llama-cpp-batched", llama_cpp={"sequences": 6})
    llm = llm_backends.create(spec.llm, spec)
    assert isinstance(llm, BatchedLlamaCppLLM)
    assert llm.sequences == 6
