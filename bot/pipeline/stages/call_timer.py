"""Ends a call well: a quiet caller is asked if they are there, then hung up on; a call
that reaches its longest length is warned, then ended."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from bot.callflow import CallLimits
from bot.pipeline.clock import MONOTONIC, Clock
from bot.pipeline.frames import (
    CallAction,
    CallFinished,
    DtmfIn,
    ResponseDone,
    SystemFrame,
    UserStartedSpeaking,
    UserStoppedSpeaking,
)
from bot.pipeline.line_state import LineState
from bot.pipeline.processor import Processor
from bot.pipeline.stages.digit_collector import EventSink, Say
from bot.pipeline.turn import Turn
from bot.profile import BotProfile
from bot.tasks import cancel_and_wait

if TYPE_CHECKING:
    from bot.pipeline.context import CallContext

log = logging.getLogger(__name__)

_POLL_S = 0.2


class CallTimer(Processor):
    """Watches the call's quiet and its length (``[call_limits]`` of the profile).

    Quiet is neither party active: the caller not speaking or keying, the bot silent.
    After ``silence_reprompt_s`` of it the bot says ``silence_prompt``; after
    ``silence_hangup_s`` more, ``goodbye``, and hangs up once it has been heard (end reason
    ``silence``). Anything from the caller starts the count again. ``max_call_s`` after the
    answer the bot says ``max_call_goodbye`` and hangs up (``max_duration``), having said
    ``max_call_warning`` ``max_call_warning_s`` before. Each is a call event.

    Time is read from ``clock`` and waited with ``sleep`` (the monotonic clock and
    ``asyncio.sleep`` in a call; ``answered_at`` is on that clock), so that a test can run
    the timer on a clock it advances itself.
    """

    name = "call-timer"

    def __init__(
        self,
        call_id: str,
        limits: CallLimits,
        *,
        answered_at: float,
        say: Say,
        line: LineState | None = None,
        on_event: EventSink | None = None,
        clock: Clock = MONOTONIC,
    ) -> None:
        super().__init__()
        self._call_id = call_id
        self._limits = limits
        #: The call's clock: the last key or activity, and the waits between checks.
        self._clock = clock
        self._answered_at = answered_at
        self._say = say
        #: Whether the bot has the line, as the stages after this one tell (``LineHeld``).
        self.line: LineState = line if line is not None else LineState()
        self._on_event = on_event
        self._caller_speaking = False
        self._last_activity = self._clock.now()
        self._reprompted = False
        self._warned = False
        self._ending = False
        self._watch: asyncio.Task[None] | None = None

    @classmethod
    def build(cls, ctx: CallContext) -> CallTimer | None:
        limits = ctx.profile.call_limits
        if not (limits.silence_reprompt_s or limits.max_call_s):
            return None
        return cls(
            ctx.call_id,
            limits,
            answered_at=ctx.call.answered_at,
            say=ctx.say,
            on_event=ctx.event,
            clock=ctx.clock,
        )

    @classmethod
    def phrases(cls, profile: BotProfile) -> list[str]:
        return profile.call_limits.phrases()

    async def on_bridged(self) -> None:
        await self.stop()  # with an agent: no silence prompt, no longest-call limit now

    def start(self) -> None:
        super().start()
        if self._watch is None or self._watch.done():
            self._last_activity = self._clock.now()
            self._watch = asyncio.create_task(self._run_watch(), name="call-timer")

    async def stop(self) -> None:
        task, self._watch = self._watch, None
        await cancel_and_wait(task)
        await super().stop()

    async def process_system(self, frame: SystemFrame) -> None:
        if isinstance(frame, UserStartedSpeaking | DtmfIn):
            self._caller_speaking = isinstance(frame, UserStartedSpeaking)
            self._caller_active()
        elif isinstance(frame, UserStoppedSpeaking):
            self._caller_speaking = False
            self._caller_active()
        elif isinstance(frame, CallFinished):
            self._ending = True
        await super().process_system(frame)

    def _caller_active(self) -> None:
        self._last_activity = self._clock.now()
        self._reprompted = False

    async def _run_watch(self) -> None:
        lim = self._limits
        while not self._ending:
            await self._clock.sleep(_POLL_S)
            now = self._clock.now()
            if lim.max_call_s:
                into = now - self._answered_at
                if into >= lim.max_call_s:
                    await self._end(lim.max_call_goodbye, "max_duration")
                    return
                if not self._warned and into >= lim.max_call_s - lim.max_call_warning_s:
                    self._warned = True
                    self._event("max_call_warning", f"{lim.max_call_warning_s:.0f} s left")
                    await self.push(self._say(None, lim.max_call_warning))
            if self._caller_speaking or self.line.held:
                self._last_activity = now
                continue
            quiet = now - self._last_activity
            if not self._reprompted and lim.silence_reprompt_s and quiet >= lim.silence_reprompt_s:
                self._reprompted = True
                self._last_activity = now
                self._event("silence_prompt", f"{quiet:.0f} s quiet")
                await self.push(self._say(None, lim.silence_prompt))
            elif self._reprompted and lim.silence_hangup_s and quiet >= lim.silence_hangup_s:
                await self._end(lim.goodbye, "silence")
                return

    async def _end(self, text: str, reason: str) -> None:
        """Say ``text``, then hang up once it has been heard."""
        self._ending = True
        self._event("call_limit", reason)
        turn = Turn(call_id=self._call_id, route="fallback", answer=text, clock=self._clock.now)
        turn.mark("route_decided")
        await self.push(self._say(turn, text))
        await self.push(ResponseDone(turn=turn))
        await self.push(CallAction(turn=turn, action="hangup", reason=reason))

    def _event(self, kind: str, detail: str) -> None:
        log.info("call %s: %s (%s)", self._call_id, kind, detail)
        if self._on_event is not None:
            self._on_event(kind, detail)
