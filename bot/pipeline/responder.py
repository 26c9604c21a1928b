"""Answers each transcript with the language model, clause by clause."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from contextlib import aclosing

from bot.pipeline.clauses import ClauseSplitter
from bot.pipeline.frames import (
    AnswerPending,
    DataFrame,
    PlayAudio,
    ResponseDone,
    Speak,
    StageFailed,
    Transcript,
)
from bot.pipeline.processor import Processor
from bot.pipeline.turn import Turn
from bot.profile import BotProfile
from serve import LLM, ChatMessage, ProviderError, StageTimings

log = logging.getLogger(__name__)


class Responder(Processor):
    """Streams an LLM answer to each transcript and hands it on as clauses.

    A failing model, or one that says nothing, turns into the profile's spoken apology:
    the caller never meets silence. An answer given upstream (the intent cache's, whose
    ``ResponseDone`` passes through here) joins the conversation history like its own.
    """

    name = "responder"

    def __init__(self, llm: LLM, profile: BotProfile, *, apology_pcm: bytes) -> None:
        super().__init__()
        self._llm = llm
        self._profile = profile
        self._apology = apology_pcm
        self._history: list[ChatMessage] = []
        self._current: Turn | None = None
        self._partial: list[str] = []
        self._prefilling: asyncio.Task[bool] | None = None
        self._open = False  # counted among the model's conversations

    @property
    def busy(self) -> bool:
        """True while an answer is being generated."""
        return self._current is not None

    async def process(self, frame: DataFrame) -> None:
        if isinstance(frame, Transcript):
            await self._answer(frame.turn, frame.text)
        elif isinstance(frame, StageFailed):
            await self._apologise(frame.turn)
        elif isinstance(frame, ResponseDone):
            # Answered before it reached the model (a cached answer): the model must still
            # know what was said, or a follow-up question loses its context.
            self._remember(frame.turn.transcript, frame.turn.answer)
            self._prefill()
            await self.push(frame)
        else:
            await self.push(frame)

    def start(self) -> None:
        if not self._open:
            self._open = True
            self._llm.conversation_opened()
        super().start()

    async def stop(self) -> None:
        if self._open:
            self._open = False
            self._llm.conversation_closed()
        if self._prefilling is not None:
            self._prefilling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._prefilling
        await super().stop()

    def _prefill(self) -> None:
        """While the caller hears a cached answer, let the model read the conversation so
        far, so that an LLM answer to the next question starts from its new words only."""
        if self._prefilling is not None and not self._prefilling.done():
            return
        self._prefilling = asyncio.create_task(
            self._llm.prefill(self._prompt()), name="llm-prefill"
        )

    def _prompt(self, *new: ChatMessage) -> list[ChatMessage]:
        """The system prompt, the conversation so far, then ``new``."""
        system = ChatMessage(role="system", content=self._profile.system_prompt)
        return [system, *self._history, *new]

    async def on_interrupt(self) -> None:
        turn = self._current
        if turn is not None:
            turn.barged_in = True
            self._remember(turn.transcript, "".join(self._partial))
            self._current = None

    async def _answer(self, turn: Turn, text: str) -> None:
        self._current = turn
        self._partial = []
        turn.route = "llm"
        turn.mark("route_decided")
        await self.push(AnswerPending(turn=turn))  # the speaker fills a long wait
        messages = self._prompt(ChatMessage(role="user", content=text))
        splitter = ClauseSplitter()
        timings = StageTimings()
        spoke = False
        try:
            stream = self._llm.stream(
                messages,
                max_tokens=self._profile.llm.max_tokens,
                temperature=self._profile.llm.temperature,
                timings=timings,
            )
            async with aclosing(stream) as pieces:
                async for piece in pieces:
                    turn.mark("first_token")
                    self._partial.append(piece)
                    for clause in splitter.feed(piece):
                        spoke = True
                        await self.push(Speak(turn=turn, text=clause))
            tail = splitter.flush()
            if tail:
                spoke = True
                await self.push(Speak(turn=turn, text=tail))
        except ProviderError as exc:
            turn.error = f"llm: {exc}"
            log.warning("llm failed on turn %d of %s: %s", turn.index, turn.call_id, exc)
        finally:
            turn.model_ms.update(timings.durations_ms)
        answer = "".join(self._partial).strip()
        if not spoke:
            turn.route = "fallback"
            await self.push(PlayAudio(turn=turn, pcm=self._apology, text=self._profile.apology))
            answer = self._profile.apology
        turn.answer = answer
        self._remember(text, answer)
        self._current = None
        await self.push(ResponseDone(turn=turn))

    async def _apologise(self, turn: Turn) -> None:
        turn.route = "fallback"
        turn.mark("route_decided")
        turn.answer = self._profile.apology
        await self.push(PlayAudio(turn=turn, pcm=self._apology, text=self._profile.apology))
        await self.push(ResponseDone(turn=turn))

    def _remember(self, user: str, answer: str) -> None:
        if not user:
            return
        self._history += [
            ChatMessage(role="user", content=user),
            ChatMessage(role="assistant", content=answer or "..."),
        ]
        turns = self._profile.llm.history_turns
        if len(self._history) > 2 * turns:
            # Trim to half in one go rather than one turn per answer: the prompt's prefix
            # then stays the same for several turns, and llama.cpp reuses its KV cache for
            # it instead of evaluating the whole history again on every answer.
            keep = 2 * ((turns + 1) // 2)
            self._history = self._history[-keep:] if keep else []
