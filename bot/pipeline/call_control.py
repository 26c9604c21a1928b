"""What happens to the call itself after an answer: hang up, or transfer to a person."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from bot.callflow import TransferTarget
from bot.calllog.calllog import CallLog
from bot.pipeline.call_port import CallPort
from bot.pipeline.frames import Bridged, CallAction, DataFrame, PlayAudio
from bot.pipeline.processor import Processor
from bot.profile import BotProfile
from telephony.events import TransferResult

if TYPE_CHECKING:
    from bot.pipeline.context import CallContext

log = logging.getLogger(__name__)

#: After the answer's last frame has left, before the BYE or the REFER: the caller's
#: jitter buffer still holds the last syllable.
TAIL_S = 0.3

Say = Callable[[DataFrame], Awaitable[None]]
#: The warm handoff's summary for the agent: PCM at the call's rate (empty: none).
Summarize = Callable[[], Awaitable[bytes]]


def configured_targets(
    profile: BotProfile, operator: frozenset[str] | None
) -> Callable[[str], TransferTarget | None]:
    """Where a call may be transferred, and how: the profile's targets
    (``BotProfile.transfer_target``), narrowed to the operator's list
    (``SWITCHBOARD_SIP__TRANSFER_TARGETS``) when one is set."""

    def lookup(uri: str) -> TransferTarget | None:
        if operator and uri not in operator:
            return None
        return profile.transfer_target(uri)

    return lookup


def overflow_targets(
    profile: Callable[[], BotProfile], operator: frozenset[str] | None
) -> Callable[[str], TransferTarget | None]:
    """How the call queue's overflow target (an operator setting, not the profile's) is
    reached: refused when the operator's list (``SWITCHBOARD_SIP__TRANSFER_TARGETS``) is set
    and lacks it; else in the mode of the profile's ``[[transfer_targets]]`` entry for it
    (read at each transfer: a new configuration applies), a REFER when it has none."""

    def lookup(uri: str) -> TransferTarget | None:
        if operator and uri not in operator:
            return None
        return profile().transfer_target(uri) or TransferTarget(uri=uri)

    return lookup


class CallControl(Processor):
    """Carries out an answer's ``CallAction`` once the caller has heard the answer.

    Linked after the ``Speaker``, which passes a frame on only once the frames before it
    are done: the action arrives after the answer's ``ResponseDone``, i.e. after its audio
    has played out. A barge-in over the answer drops the action on the way (and cancels
    it during the short tail here).

    - ``hangup``: BYE; the call ends as ``bot_hangup``.
    - ``transfer``: only to a configured target (``targets``; any other is refused: a
      ``transfer_refused`` event and ``failed`` said), in the target's mode:
      ``refer`` (a REFER; success ends the bot's leg, ``transferred``), ``bridge`` (the
      worker calls the target and joins the calls; the bot's leg stays up with its media
      off until either side hangs up) or ``warm`` (``bridge``, the agent first hearing a
      spoken summary). Each attempt is a ``transfer`` event; a failed one a
      ``transfer_failed`` event, then ``failed`` is said and the conversation goes on. A
      refused REFER falls back to a bridge where the target says so. The transfer runs on
      its own task: a barge-in after it has started does not undo it.
    """

    name = "call-control"

    def __init__(
        self,
        call: CallPort,
        *,
        failed: PlayAudio,
        say: Say | None = None,
        transfer_timeout_s: float,
        targets: Callable[[str], TransferTarget | None],
        hold: DataFrame | None = None,
        summarize: Summarize | None = None,
        on_bridged: Callable[[], Awaitable[None]] | None = None,
        call_log: CallLog | None = None,
        tail_s: float = TAIL_S,
        enabled: bool = True,
    ) -> None:
        super().__init__()
        #: False: an action is recorded (``action_skipped``) and not carried out.
        self.enabled = enabled
        self._call = call
        #: What this stage says goes upstream to the speaker before it (default).
        self._say = say if say is not None else self.push_upstream
        self._failed = failed
        self._timeout_s = transfer_timeout_s
        self._targets = targets
        self._hold = hold
        self._summarize = summarize
        #: The caller is with an agent: by default every stage before this one leaves the
        #: call (a ``Bridged`` frame upstream) and the audio queued for the caller goes.
        self._on_bridged = on_bridged if on_bridged is not None else self._leave_call
        self._call_log = call_log
        self._tail_s = tail_s
        self._ended_by: str | None = None
        self._transfer: asyncio.Task[None] | None = None
        self._bridging = False
        #: The caller is with an agent on a bridged call: the bot is out of it.
        self.bridged = False

    @classmethod
    def build(cls, ctx: CallContext) -> CallControl:
        profile = ctx.profile
        failed = profile.transfer_failed or profile.apology
        hold = profile.transfer_hold
        return cls(
            ctx.call,
            failed=PlayAudio(turn=None, pcm=ctx.prompts.get(failed), text=failed),
            transfer_timeout_s=profile.transfer_timeout_s,
            targets=configured_targets(profile, ctx.transfer_targets),
            hold=None if hold is None else ctx.say(None, hold),
            summarize=ctx.summarize,
            call_log=ctx.call_log,
            enabled=ctx.call_actions,
        )

    async def _leave_call(self) -> None:
        await self.push_upstream(Bridged())
        await self.on_bridged()
        self._call.clear_playout()

    @classmethod
    def phrases(cls, profile: BotProfile) -> list[str]:
        failed = profile.transfer_failed or profile.apology
        return [failed] + ([] if profile.transfer_hold is None else [profile.transfer_hold])

    @property
    def transferring(self) -> bool:
        """True while a transfer is under way and its outcome unknown."""
        return self._transfer is not None and not self._transfer.done()

    @property
    def holding(self) -> bool:
        """True while a bridged transfer is being set up or is up: the caller is on hold
        or with the agent, and what they say is not for the bot."""
        return self._bridging or self.bridged

    def holds_line(self) -> bool:
        return self.holding  # on hold for a bridged transfer, or with the agent

    def end_reason(self, reason: str) -> str:
        """Why the call ended, given the telephony's ``reason``: the bot's own doing first.

        A call that ends while a transfer is under way, or once bridged to an agent, counts
        as ``transferred``: the caller's phone usually ends the bot's leg itself once it
        has reached a REFER's target.
        """
        if self._ended_by is not None:
            return self._ended_by
        return "transferred" if self.transferring or self.bridged else reason

    async def process(self, frame: DataFrame) -> None:
        if not isinstance(frame, CallAction):
            return  # the end of the pipeline
        await asyncio.sleep(self._tail_s)
        if not self.enabled:
            log.info("call %s: %s skipped (actions are off)", self._call.call_id, frame.action)
            self._event("action_skipped", frame.action)
            return
        if frame.action == "hangup":
            log.info("call %s: hanging up after turn %d", self._call.call_id, frame.turn.index)
            self._ended_by = frame.reason or "bot_hangup"
            await self._call.hangup()
        elif frame.target is not None and not self.transferring and not self.bridged:
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

    def _event(self, kind: str, detail: str) -> None:
        if self._call_log is not None:
            self._call_log.event(self._call.call_id, kind, detail)

    async def _run_transfer(self, target: str) -> None:
        call_id = self._call.call_id
        spec = self._targets(target)
        if spec is None:
            log.warning("call %s: transfer to a target not configured, refused", call_id)
            self._event("transfer_refused", target)
            await self._say(self._failed)
            return
        log.info("call %s: transferring (%s)", call_id, spec.mode)
        self._event("transfer", target)
        if spec.mode == "refer":
            result = await self._call.transfer(target, timeout_s=self._timeout_s)
            if result.ok:
                log.info(
                    "call %s: transfer accepted (%d %s)", call_id, result.status, result.reason
                )
                self._ended_by = "transferred"
                await self._call.hangup()
                return
            if not spec.bridge_on_refer_failure or result.reason == "call ended":
                await self._failure(result)
                return
            log.info("call %s: REFER failed (%d), bridging instead", call_id, result.status)
            self._event("transfer_failed", f"{result.status} {result.reason}; bridging")
        await self._bridge(target, mode="warm" if spec.mode == "warm" else "bridge")

    async def _bridge(self, target: str, *, mode: str) -> None:
        call_id = self._call.call_id
        self._bridging = True
        try:
            if self._hold is not None:
                await self._say(self._hold)
            summary = b""
            if mode == "warm" and self._summarize is not None:
                summary = await self._summarize()
            result = await self._call.bridge(target, timeout_s=self._timeout_s, summary=summary)
            if result.ok:
                log.info("call %s: bridged to the agent", call_id)
                self.bridged = True
                self._event("bridged", f"{mode} {target}")
                if self._on_bridged is not None:
                    await self._on_bridged()
                return
        finally:
            self._bridging = False
        await self._failure(result)

    async def _failure(self, result: TransferResult) -> None:
        log.warning(
            "call %s: transfer failed: %d %s", self._call.call_id, result.status, result.reason
        )
        self._event("transfer_failed", f"{result.status} {result.reason}")
        await self._say(self._failed)
