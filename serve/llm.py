"""Language model: the LLM interface (streaming chat completion) and its message type."""

from __future__ import annotations

import abc
from collections.abc import AsyncGenerator, Iterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Literal

from serve.base import Provider
from serve.timing import StageTimings


@dataclass(frozen=True)
class ChatMessage:
    """One message of a chat prompt."""

    role: Literal["system", "user", "assistant"]
    content: str


class LLM(Provider):
    """Streaming chat completion; ``timeout_s`` bounds the wait for the first token."""

    name = "llm"

    def __init__(self, *, timeout_s: float = 10.0, retries: int = 1, name: str | None = None):
        super().__init__(timeout_s=timeout_s, retries=retries, name=name)

    def stream(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int = 96,
        temperature: float = 0.3,
        timings: StageTimings | None = None,
    ) -> AsyncGenerator[str, None]:
        """Yield text pieces as they are generated.

        Closing the iterator (``aclose()``, or cancelling the task that iterates it) stops
        generation after the token being computed. Use ``contextlib.aclosing`` when breaking
        out of the loop early, so that the stop does not wait for garbage collection.
        """
        if not messages:
            raise ValueError("messages must not be empty")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
        prompt = tuple(messages)
        return self._stream(
            "llm_first_token",
            "llm_total",
            lambda: self._stream_impl(prompt, max_tokens, temperature),
            timings,
        )

    async def warmup(self) -> None:
        """Generate one token for a tiny prompt."""
        prompt = [ChatMessage("system", "You are a helpful assistant."), ChatMessage("user", "Hi")]
        async with aclosing(self.stream(prompt, max_tokens=1)) as pieces:
            async for _ in pieces:
                pass
        self._reset_metrics()

    @abc.abstractmethod
    def _stream_impl(
        self, messages: Sequence[ChatMessage], max_tokens: int, temperature: float
    ) -> Iterator[str]:
        """Blocking generator of text pieces; runs on a worker thread and is closed on stop."""
