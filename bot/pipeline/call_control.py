"""What happens to the call itself after an answer: hang up, or transfer to a person."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from bot.calllog.calllog import CallLog
from bot.pipeline.call_port import CallPort
from bot.pipeline.frames import CallAction, DataFrame, PlayAudio
from bot.pipeline.processor import Processor
from bot.profile import BotProfile

log = logging.getLogger(__name__)

#: After the answer's last frame has left, before the BYE or the REFER: the caller's
#: jitter buffer still holds the last syllable.
TAIL_S = 0.3

Say = Callable[[PlayAudio], Awaitable[None]]


def allowed_targets(profile: BotProfile, operator: frozenset[str] | None) -> frozenset[str]:
    """Where a call may be transferred: the profile's targets, within the operator's list."""
    targets = profile.transfer_targets()
    return targets if not operator else targets & operator


class CallControl(Processor):
    """Carries out an answer's ``CallAction`` once the caller has heard the answer.

    Linked after the ``Speaker``, which passes a frame on only once the frames before it
    are done: the action arrives after the answer's ``ResponseDone``, i.e. after its audio
    has played out. A barge-in over the answer drops the action on the way (and cancels
    it during the short tail here).

    - ``hangup``: BYE; the call ends as ``bot_hangup``.
    - ``transfer``: REFER to the target (a ``transfer`` event in the call log). Success
      ends the bot's leg (``transferred``); a refused or unanswered REFER makes the bot
      say ``failed`` and the conversation goes on (a ``transfer_failed`` event). The
      transfer runs on its own task: a barge-in after the REFER has gone does not undo it.

    A transfer target is checked here, just before the REFER: one outside
    ``allowed_targets`` (a shared cache entry rewritten by someone, a configuration
    mistake) is not sent; the call gets a ``transfer_refused`` event, a warning, and the
    ``failed`` prompt, and goes on. ``None`` allows any target (unit tests).
    """

    name = "call-control"

    def __init__(
        self,
        call: CallPort,
        *,
        say: Say,
        failed: PlayAudio,
        transfer_timeout_s: float,
        call_log: CallLog | None = None,
        tail_s: float = TAIL_S,
        enabled: bool = True,
        allowed_targets: frozenset[str] | None = None,
    ) -> None:
        super().__init__()
        self.allowed_targets = allowed_targets
        #: Transfers not sent because their target is not allowed.
        self.refused = 0
        #: False: an action is recorded (``action_skipped``) and not carried out.
        self.enabled = enabled
        self._call = call
        self._say = say
        self._failed = failed
        self._timeout_s = transfer_timeout_s
        self._call_log = call_log
        self._tail_s = tail_s
        self._ended_by: str | None = None
        self._transfer: asyncio.Task[None] | None = None

    @property
    def transferring(self) -> bool:
        """True while a REFER is out and its outcome unknown."""
        return self._transfer is not None and not self._transfer.done()

    def end_reason(self, reason: str) -> str:
        """Why the call ended, given the telephony's ``reason``: the bot's own doing first.

        A call that ends while a transfer is under way counts as ``transferred``: the
        caller's phone usually ends the bot's leg itself once it has reached the target.
        """
        if self._ended_by is not None:
            return self._ended_by
        return "transferred" if self.transferring else reason

    async def process(self, frame: DataFrame) -> None:
        if not isinstance(frame, CallAction):
            return  # the end of the pipeline
        await asyncio.sleep(self._tail_s)
        if not self.enabled:
            log.info("call %s: %s skipped (actions are off)", self._call.call_id, frame.action)
            if self._call_log is not None:
                self._call_log.event(self._call.call_id, "action_skipped", frame.action)
            return
        if frame.action == "hangup":
            log.info("call %s: hanging up after turn %d", self._call.call_id, frame.turn.index)
            self._ended_by = frame.reason or "bot_hangup"
            await self._call.hangup()
        elif frame.target is not None and not self.transferring:
            self._transfer = asyncio.create_task(
                self._run_transfer(frame.target), name=f"transfer-{self._call.call_id}"
            )

    async def stop(self) -> None:
        await super().stop()
        task, self._transfer = self._transfer, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run_transfer(self, target: str) -> None:
        call_id = self._call.call_id
        if self.allowed_targets is not None and target not in self.allowed_targets:
            self.refused += 1
            log.warning(
                "call %s: transfer refused: target %r is not among the allowed targets",
                call_id,
                target,
            )
            if self._call_log is not None:
                self._call_log.event(call_id, "transfer_refused", target)
            await self._say(self._failed)
            return
        log.info("call %s: transferring", call_id)
        if self._call_log is not None:
            self._call_log.event(call_id, "transfer", target)
        result = await self._call.transfer(target, timeout_s=self._timeout_s)
        if result.ok:
            log.info("call %s: transfer accepted (%d %s)", call_id, result.status, result.reason)
            self._ended_by = "transferred"
            await self._call.hangup()
            return
        log.warning("call %s: transfer failed: %d %s", call_id, result.status, result.reason)
        if self._call_log is not None:
            self._call_log.event(call_id, "transfer_failed", f"{result.status} {result.reason}")
        await self._say(self._failed)
