"""vLLM's async engine as an LLM backend (the ``gpu`` extra). Not verified on CPU machines.

Its library needs CUDA and cannot be installed where this was written: its streaming and abort
logic is unit-tested against a stand-in for vLLM's async engine (tests/serve/test_gpu_vllm.py).
It imports ``vllm`` in ``_load`` and raises ``ProviderUnavailable`` when it is missing, so
choosing it by name fails clearly at start.
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import AsyncGenerator, Iterator, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from serve.errors import ProviderUnavailable, missing_gpu_library
from serve.llm import LLM, ChatMessage
from serve.timing import StageTimings


class VllmOptions(BaseModel):
    """vLLM's engine options (``SWITCHBOARD_MODELS__VLLM__<FIELD>``)."""

    model_config = ConfigDict(extra="forbid")

    #: Share of the GPU's memory vLLM takes for weights and KV cache.
    gpu_memory_utilization: float = Field(0.85, gt=0.0, le=1.0)
    #: Longest prompt plus answer, in tokens.
    max_model_len: int = Field(4096, ge=256, le=1_048_576)


class VllmLLM(LLM):
    """vLLM's async engine: every request streams as vLLM batches it with the others
    (continuous batching, prefix caching for the shared system prompt). Not verified on a
    GPU here: its unit test drives it through a stand-in for the ``vllm`` module.

    The engine runs on the event loop that calls ``stream`` (vLLM's own background loop);
    closing a stream aborts its request in the engine.
    """

    name = "vllm"
    #: Many requests at once: vLLM batches them itself.
    kv_slots = None

    def __init__(
        self,
        *,
        model_path: str,
        timeout_s: float = 10.0,
        retries: int = 1,
        gpu_memory_utilization: float = 0.85,
        max_model_len: int = 4096,
    ) -> None:
        super().__init__(timeout_s=timeout_s, retries=retries)
        self.model_path = model_path
        self.gpu_memory_utilization = gpu_memory_utilization
        self.max_model_len = max_model_len
        self._engine: Any = None
        self._sampling_params: Any = None
        self._tokenizer: Any = None

    def _load(self) -> None:
        try:
            vllm = importlib.import_module("vllm")
        except ImportError as exc:
            raise missing_gpu_library("vllm") from exc
        args = vllm.AsyncEngineArgs(
            model=self.model_path,
            enable_prefix_caching=True,
            gpu_memory_utilization=self.gpu_memory_utilization,
            max_model_len=self.max_model_len,
        )
        self._engine = vllm.AsyncLLMEngine.from_engine_args(args)
        self._sampling_params = vllm.SamplingParams
        transformers = importlib.import_module("transformers")  # a dependency of vllm
        self._tokenizer = transformers.AutoTokenizer.from_pretrained(self.model_path)

    def prompt(self, messages: Sequence[ChatMessage]) -> str:
        """The model's chat template applied to ``messages``."""
        text: str = self._tokenizer.apply_chat_template(
            [{"role": m.role, "content": m.content} for m in messages],
            tokenize=False,
            add_generation_prompt=True,
        )
        return text

    def stream(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int = 96,
        temperature: float = 0.3,
        timings: StageTimings | None = None,
    ) -> AsyncGenerator[str, None]:
        prompt = self._checked(messages, max_tokens)
        return self._counted(
            self._stream_async(
                "llm_first_token",
                "llm_total",
                lambda: self._generate(prompt, max_tokens, temperature),
                timings,
            )
        )

    async def _generate(
        self, messages: Sequence[ChatMessage], max_tokens: int, temperature: float
    ) -> AsyncGenerator[str, None]:
        request_id = uuid.uuid4().hex
        params = self._sampling_params(max_tokens=max_tokens, temperature=temperature)
        outputs = self._engine.generate(self.prompt(messages), params, request_id)
        sent = 0
        finished = False
        try:
            async for output in outputs:
                text = output.outputs[0].text
                if len(text) > sent:
                    yield text[sent:]
                    sent = len(text)
                finished = bool(output.finished)
        finally:
            if not finished:
                await self._engine.abort(request_id)

    def _stream_impl(
        self, messages: Sequence[ChatMessage], max_tokens: int, temperature: float
    ) -> Iterator[str]:
        raise ProviderUnavailable("vllm streams on the event loop: stream() drives it")
