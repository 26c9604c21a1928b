"""What happens to the call itself after an answer: hang up, or transfer to a person."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from bot.callflow import TransferTarget
from bot.calllog.calllog import CallLog
from bot.intents.confirm import KEY_ANSWERS, read_answer
from bot.pipeline.call_port import CallPort
from bot.pipeline.clock import MONOTONIC, Clock, wait_for
from bot.pipeline.frames import Bridged, CallAction, DataFrame, PlayAudio
from bot.pipeline.processor import Processor
from bot.profile import BotProfile
from bot.tasks import cancel_and_wait
from telephony.events import AudioIn, DtmfIn, TransferResult

if TYPE_CHECKING:
    from bot.pipeline.context import CallContext

log = logging.getLogger(__name__)

#: After the answer's last frame has left, before the BYE or the REFER: the caller's
#: jitter buffer still holds the last syllable.
TAIL_S = 0.3

#: The post-call question: how long its prompt may take to start playing, looked at this
#: often.
POLL_S = 0.05
PROMPT_START_S = 2.0
#: The longest the prompt is waited for to play out (a bound should the playout stall).
PROMPT_MAX_S = 30.0
#: A 20 ms frame of the caller's at this RMS or more (16-bit PCM; about -40 dBFS) is
#: voiced; a spoken answer is this many voiced frames, ended by this many quiet ones.
VOICED_RMS = 330.0
ANSWER_VOICED_FRAMES = 8
ANSWER_QUIET_FRAMES = 30
#: Frames kept from before the answer's first voiced frame, and the most kept in all.
ANSWER_PREROLL_FRAMES = 10
ANSWER_MAX_FRAMES = 500

Say = Callable[[DataFrame], Awaitable[None]]
#: The warm handoff's summary for the agent: PCM at the call's rate (empty: none).
Summarize = Callable[[], Awaitable[bytes]]


@dataclass(frozen=True)
class PostCallQuestion:
    """The optional question after the caller's goodbye ("Did we answer your question?"),
    from the call log's settings (``post_call_question``): the prompt, how long its answer
    is waited for once it has played, and how a spoken answer is heard (PCM at the call's
    rate in, words out)."""

    prompt: DataFrame
    wait_s: float
    hear: Callable[[bytes], Awaitable[str]]


def post_call_question(ctx: CallContext) -> PostCallQuestion | None:
    """The call's post-call question, when the call log is on and its setting asks it."""
    call_log = ctx.call_log
    if call_log is None or not call_log.options.post_call_question:
        return None
    rate = ctx.call.sample_rate

    async def hear(pcm: bytes) -> str:
        return (await ctx.models.asr.transcribe(pcm, rate)).text

    options = call_log.options
    return PostCallQuestion(
        prompt=ctx.say(None, options.post_call_prompt), wait_s=options.post_call_wait_s, hear=hear
    )


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

    With ``post_call`` (off by default), a goodbye's hang-up after an answer first asks the
    caller whether their question was answered: key 1 or 2, or a spoken yes or no, within
    ``wait_s`` after the prompt has played. Meanwhile the caller's keys and audio come here
    (``hears``), not to the conversation. The answer (``yes``, ``no``, or ``none``) is a
    ``post_call_answer`` event, stored with the call.
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
        post_call: PostCallQuestion | None = None,
        clock: Clock = MONOTONIC,
    ) -> None:
        super().__init__()
        #: The call's clock: the tail, the post-call question's waits, event times.
        self._clock = clock
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
        self._post_call = post_call
        #: The post-call question was asked: the conversation is over.
        self.closing = False
        self._key: str | None = None
        #: Set when a key or a spoken answer (ended by quiet) came in.
        self._answer = asyncio.Event()
        self._recent: collections.deque[bytes] = collections.deque(maxlen=ANSWER_PREROLL_FRAMES)
        self._speech: list[bytes] = []
        self._voiced = 0
        self._quiet = 0

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
            post_call=post_call_question(ctx),
            clock=ctx.clock,
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

    async def _tell_line(self) -> None:
        """The call control has the line (``LineHeld``, upstream) while the caller is on
        hold for a bridged transfer or with the agent, or asked the post-call question."""
        await self.hold_line(self.holding or self.closing)

    def hears(self, event: object) -> bool:
        """Takes the caller's keys and audio that are not for the conversation: everything
        while the caller is on hold for, or with, an agent (dropped), and once the
        post-call question is asked, its answer (after it, nothing is for the conversation
        any more). False: not taken, the conversation's."""
        if not isinstance(event, AudioIn | DtmfIn):
            return False
        if self.holding:
            return True
        if not self.closing:
            return False
        if isinstance(event, DtmfIn):
            if self._key is None and event.digit in KEY_ANSWERS:
                self._key = event.digit
                self._answer.set()
        else:
            self._listen(event.pcm)
            if self._spoken():
                self._answer.set()
        return True

    def _listen(self, pcm: bytes) -> None:
        """One frame of the caller's while the answer is awaited: the spoken answer is kept
        from a little before its first voiced frame."""
        samples = np.frombuffer(pcm, dtype="<i2").astype(np.float32)
        voiced = samples.size > 0 and float(np.sqrt(np.mean(samples**2))) >= VOICED_RMS
        if voiced:
            self._voiced += 1
            self._quiet = 0
        elif self._voiced:
            self._quiet += 1
        if self._speech:
            if len(self._speech) < ANSWER_MAX_FRAMES:
                self._speech.append(pcm)
        elif voiced:
            self._speech = [*self._recent, pcm]
        self._recent.append(pcm)

    def _spoken(self) -> bool:
        return self._voiced >= ANSWER_VOICED_FRAMES and self._quiet >= ANSWER_QUIET_FRAMES

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
        await self._clock.sleep(self._tail_s)
        if not self.enabled:
            log.info("call %s: %s skipped (actions are off)", self._call.call_id, frame.action)
            self._event("action_skipped", frame.action)
            return
        if frame.action == "hangup":
            self._ended_by = frame.reason or "bot_hangup"
            post_call = self._post_call
            if post_call is not None and frame.reason is None and self._answered(frame.turn.index):
                await self._ask_after_call(post_call)
            log.info("call %s: hanging up after turn %d", self._call.call_id, frame.turn.index)
            await self._call.hangup()
        elif frame.target is not None and not self.transferring and not self.bridged:
            self._transfer = asyncio.create_task(
                self._run_transfer(frame.target), name=f"transfer-{self._call.call_id}"
            )

    async def stop(self) -> None:
        await super().stop()
        task, self._transfer = self._transfer, None
        if task is not None and not task.done():
            await cancel_and_wait(task)

    def _answered(self, turn_index: int) -> bool:
        """Whether a request of the caller's was answered before the goodbye's turn."""
        log_ = self._call_log
        return log_ is not None and log_.answered(self._call.call_id, besides=turn_index)

    async def _ask_after_call(self, question: PostCallQuestion) -> None:
        """Ask the post-call question, wait for its answer, record it (``none`` when
        nothing came in time, or the caller hung up)."""
        answer = "none"
        self.closing = True
        await self._tell_line()
        try:
            await self._say(question.prompt)
            # Until the prompt has played (a key over it answers at once), then the wait.
            for _ in range(round(PROMPT_START_S / POLL_S)):
                if self._call.queued_frames or self._answer.is_set():
                    break
                await self._clock.sleep(POLL_S)
            with contextlib.suppress(TimeoutError):
                await wait_for(
                    self._clock,
                    self._first(self._call.wait_playout_drained(), self._answer.wait()),
                    PROMPT_MAX_S,
                )
            with contextlib.suppress(TimeoutError):
                await wait_for(self._clock, self._answer.wait(), question.wait_s)
            if self._key is not None:
                self._call.clear_playout()
                answer = KEY_ANSWERS[self._key] or "none"
            elif self._voiced >= ANSWER_VOICED_FRAMES:
                words = await question.hear(b"".join(self._speech))
                answer = read_answer(words) or "none"
        finally:
            log.info("call %s: post-call answer %s", self._call.call_id, answer)
            self._event("post_call_answer", answer)

    @staticmethod
    async def _first(*waits: Coroutine[Any, Any, Any]) -> None:
        """Until the first of ``waits`` is done (the others are cancelled)."""
        tasks = [asyncio.ensure_future(w) for w in waits]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _event(self, kind: str, detail: str) -> None:
        if self._call_log is not None:
            self._call_log.event(self._call.call_id, kind, detail, self._clock.now())

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
        await self._tell_line()
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
            await self._tell_line()
        await self._failure(result)

    async def _failure(self, result: TransferResult) -> None:
        log.warning(
            "call %s: transfer failed: %d %s", self._call.call_id, result.status, result.reason
        )
        self._event("transfer_failed", f"{result.status} {result.reason}")
        await self._say(self._failed)
