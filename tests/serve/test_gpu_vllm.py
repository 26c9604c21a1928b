"""VllmLLM's streaming over vLLM's async engine, against a stand-in for the ``vllm`` module
(the real one needs CUDA): deltas of the cumulative text, concurrent requests, abort on close.
"""

from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import pytest

from serve import ChatMessage
from serve.llm_vllm import VllmLLM

MESSAGES = [ChatMessage("system", "Be brief."), ChatMessage("user", "Hi")]


@dataclass
class _Completion:
    text: str


@dataclass
class _Output:
    outputs: list[_Completion]
    finished: bool


class _Engine:
    """What VllmLLM uses of ``AsyncLLMEngine``: ``generate`` (cumulative outputs), ``abort``."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.aborted: list[str] = []
        self.running = 0
        self.most_at_once = 0

    async def generate(self, prompt: str, params: Any, request_id: str) -> AsyncIterator[_Output]:
        self.prompts.append(prompt)
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            words = ["Hello", " there", ",", " caller", "."][: params.max_tokens]
            for i in range(len(words)):
                await asyncio.sleep(0.01)
                yield _Output([_Completion("".join(words[: i + 1]))], i == len(words) - 1)
        finally:
            self.running -= 1

    async def abort(self, request_id: str) -> None:
        self.aborted.append(request_id)


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Engine]:
    engine = _Engine()

    @dataclass
    class SamplingParams:
        max_tokens: int
        temperature: float

    class Tokenizer:
        def apply_chat_template(self, messages: list[dict[str, str]], **_: Any) -> str:
            return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    vllm = types.ModuleType("vllm")
    vllm.AsyncEngineArgs = lambda **kw: kw  # type: ignore[attr-defined]
    vllm.AsyncLLMEngine = types.SimpleNamespace(from_engine_args=lambda args: engine)  # type: ignore[attr-defined]
    vllm.SamplingParams = SamplingParams  # type: ignore[attr-defined]
    transformers = types.ModuleType("transformers")
    transformers.AutoTokenizer = types.SimpleNamespace(from_pretrained=lambda p: Tokenizer())  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "transformers", transformers)
    yield engine


async def answer(llm: VllmLLM, max_tokens: int = 8) -> list[str]:
    async with aclosing(llm.stream(MESSAGES, max_tokens=max_tokens)) as pieces:
        return [p async for p in pieces]


async def test_streams_the_new_text_of_each_output(engine: _Engine) -> None:
    llm = VllmLLM(model_path="/models/llm")
    await llm.load()
    assert await answer(llm) == ["Hello", " there", ",", " caller", "."]
    assert engine.prompts == ["<system>Be brief.<user>Hi<assistant>"]
    assert engine.aborted == []  # finished: nothing to abort


async def test_requests_run_together_and_a_closed_one_is_aborted(engine: _Engine) -> None:
    llm = VllmLLM(model_path="/models/llm")
    await llm.load()
    results = await asyncio.gather(*(answer(llm) for _ in range(4)))
    assert all("".join(r) == "Hello there, caller." for r in results)
    assert engine.most_at_once == 4  # not one at a time: the engine batches them
    async with aclosing(llm.stream(MESSAGES, max_tokens=8)) as pieces:
        async for _ in pieces:
            break  # barge-in
    assert len(engine.aborted) == 1
    assert llm.metrics()["errors"] == 0
