"""Language model: the LLM interface (streaming chat completion) and its message type."""

from __future__ import annotations

import abc
import logging
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Literal

from serve.base import Provider
from serve.timing import StageTimings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChatMessage:
    """One message of a chat prompt."""

    role: Literal["system", "user", "assistant"]
    content: str


class LLM(Provider):
    """Streaming chat completion; ``timeout_s`` bounds the wait for the first token."""

    name = "llm"

    @staticmethod
    def _checked(messages: list[ChatMessage], max_tokens: int) -> list[ChatMessage]:
        """The request's messages, once they and ``max_tokens`` are known to be usable."""
        if not messages:
            raise ValueError("messages must not be empty")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
        return list(messages)

    def __init__(self, *, timeout_s: float = 10.0, retries: int = 1, name: str | None = None):
        super().__init__(timeout_s=timeout_s, retries=retries, name=name)
        #: Answers asked for and not finished yet (any call's).
        self._outstanding = 0
        self._conversations = 0
        self.prefills = 0
        #: Called on the model's thread before each token and each prefill with
        #: ``yield_max_s``: a model on the same cores as speech recognition waits there
        #: while callers' speech is being transcribed (``PriorityPool.wait_idle``).
        self.yield_to: Callable[[float], object] | None = None
        self.yield_max_s = 0.25

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
        prompt = tuple(self._checked(messages, max_tokens))
        return self._counted(
            self._stream(
                "llm_first_token",
                "llm_total",
                lambda: self._yielding(self._stream_impl(prompt, max_tokens, temperature)),
                timings,
            )
        )

    async def _counted(self, pieces: AsyncGenerator[str, None]) -> AsyncGenerator[str, None]:
        self._outstanding += 1
        try:
            async with aclosing(pieces):
                async for piece in pieces:
                    yield piece
        finally:
            self._outstanding -= 1

    #: How many conversations' prompt state the model keeps at once (llama.cpp: its one
    #: context). None: no limit to plan for (a server with prefix caching).
    kv_slots: int | None = None

    def conversation_opened(self) -> None:
        """A call that may ask this model started (see ``prefill``)."""
        self._conversations += 1

    def conversation_closed(self) -> None:
        self._conversations = max(0, self._conversations - 1)

    async def prefill(self, messages: list[ChatMessage]) -> bool:
        """Evaluate ``messages`` ahead of the next question, so that a model which keeps the
        previous prompt's state (llama.cpp's KV cache) has only the new words to read then.
        Best effort: done only when no answer is being generated or waiting (never delays
        one), by models that implement it, and while no more conversations are open than
        the model keeps states (with one context and ten calls, each call's prefill threw
        away the one before, and cost most of a core); True when it ran. Errors are not
        raised."""
        if not messages or self._outstanding or not self.loaded or not self.can_prefill:
            return False
        if self.kv_slots is not None and self._conversations > self.kv_slots:
            return False
        prompt = tuple(messages)

        def prefill() -> None:
            self._yield()
            self._prefill_impl(prompt)

        try:
            await self._in_thread(prefill)
        except Exception as exc:
            log.debug("%s: prefill failed: %s", self.name, exc)
            return False
        self.prefills += 1
        return True

    def _yield(self) -> None:
        if self.yield_to is not None:
            self.yield_to(self.yield_max_s)

    def _yielding(self, pieces: Iterator[str]) -> Iterator[str]:
        """``pieces``, computing each one only after ``yield_to`` let it (at most
        ``yield_max_s`` later: a busy node slows answers down, never stops them)."""
        try:
            while True:
                self._yield()
                try:
                    piece = next(pieces)
                except StopIteration:
                    return
                yield piece
        finally:
            close = getattr(pieces, "close", None)
            if close is not None:
                close()

    #: Whether ``_prefill_impl`` does anything.
    can_prefill = False

    def _prefill_impl(self, messages: Sequence[ChatMessage]) -> None:
        """Blocking: evaluate ``messages`` into the model's state (runs on a worker thread)."""

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
