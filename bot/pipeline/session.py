"""One call's conversation: the pipeline from caller audio to the bot's speech."""

from __future__ import annotations

import logging
import re

from bot.calllog.calllog import CallLog
from bot.intents.cache import IntentCache
from bot.knowledge.index import KnowledgeIndex
from bot.lookups.webhook import Webhooks
from bot.pipeline.call_port import CallPort
from bot.pipeline.clock import Clock
from bot.pipeline.context import CallContext
from bot.pipeline.frames import CallFinished, DataFrame, PlayAudio
from bot.pipeline.pipeline import Pipeline, Stage
from bot.pipeline.prompts import PromptAudio
from bot.pipeline.speculation import Speculator
from bot.pipeline.stages.answer_guard import AnswerGuard
from bot.pipeline.stages.call_control import CallControl
from bot.pipeline.stages.call_timer import CallTimer
from bot.pipeline.stages.calllog_tap import EventTap
from bot.pipeline.stages.digit_collector import MASK, DigitCollector
from bot.pipeline.stages.keypad_menu import KeypadMenu
from bot.pipeline.stages.lookup_runner import LookupRunner
from bot.pipeline.stages.responder import Responder
from bot.pipeline.stages.router import Router
from bot.pipeline.stages.speaker import Speaker
from bot.pipeline.stages.transcriber import Transcriber
from bot.pipeline.stages.turn_detector import TurnDetector
from bot.pipeline.turn import Turn
from bot.pipeline.turnlog import TurnSink, log_turn
from bot.profile import BotProfile
from serve import ModelSet
from telephony.events import AudioIn, CallEnded, DtmfIn

log = logging.getLogger(__name__)

#: The caller's turns a warm handoff's summary repeats (the last ones).
SUMMARY_TURNS = 3


def handoff_summary(template: str, remote_uri: str, heard: list[str]) -> str:
    """``template`` filled with who called (the SIP address's user part, or "an unknown
    number") and the caller's last ``SUMMARY_TURNS`` turns, as transcribed."""
    match = re.search(r"sips?:([^@;>]+)@", remote_uri)
    user = match.group(1) if match else ""
    digits = user.removeprefix("+")
    if digits.isdigit():  # a number is read digit by digit
        caller = ("plus " if user.startswith("+") else "") + " ".join(digits)
    else:
        caller = user or "an unknown number"
    turns = [t.strip().rstrip(".?!") for t in heard[-SUMMARY_TURNS:] if t.strip()]
    asked = ". ".join(turns) + "." if turns else "nothing yet."
    return template.format(caller=caller, asked=asked)


#: A call's pipeline, in the order frames pass through it. Each stage is built for the
#: call from its ``CallContext`` (``Processor.build``; None: the call has its feature off)
#: and names the fixed words it may say (``Processor.phrases``). A new stage is its file
#: and one line here.
CALL_STAGES: tuple[Stage, ...] = (
    TurnDetector,  # the caller's turns from the audio: VAD, end of turn, barge-in
    EventTap,  # barge-ins to the call log
    CallTimer,  # a quiet caller, the longest call: it sees the caller's speech and keys first
    Transcriber,
    DigitCollector,  # keys and numbers first: a number being asked for is not a question
    LookupRunner,  # a collected number's lookup
    KeypadMenu,
    # The turn's one decision (bot/pipeline/deciding/decider.py) is carried out by:
    Router,  # an intent's ready audio (its answer and action, its question, a number after)
    Responder,  # the operator's words, a lookup's number asked for, or the model's answer
    AnswerGuard,
    Speaker,
    CallControl,  # after the speaker: an action once its answer has been heard
)


def fixed_phrases(profile: BotProfile) -> list[str]:
    """What a call with ``profile`` may say in fixed words, each once: the greeting and the
    recording announcement, then what each stage declares. The node synthesizes them at
    start (and for each new configuration)."""
    ahead = [profile.greeting]
    if profile.recording.enabled and profile.recording.announcement:
        ahead.append(profile.recording.announcement)
    return list(dict.fromkeys(ahead + Pipeline.phrases(CALL_STAGES, profile)))


class CallSession:
    """Runs the conversation on one answered call until it ends: the greeting played on
    answer, then the call's events through the pipeline of ``CALL_STAGES``."""

    def __init__(
        self,
        call: CallPort,
        models: ModelSet,
        profile: BotProfile,
        prompts: PromptAudio,
        *,
        on_turn: TurnSink = log_turn,
        call_log: CallLog | None = None,
        intent_cache: IntentCache | None = None,
        call_actions: bool = True,
        knowledge: KnowledgeIndex | None = None,
        webhooks: Webhooks | None = None,
        recording: str | None = None,
        transfer_targets: frozenset[str] | None = None,
        clock: Clock | None = None,
    ) -> None:
        """``recording``: the file this call is recorded in (``bot.recording``), if it is.

        ``clock``: the call's time and waits (None: the monotonic clock; a test may run the
        call on a clock of its own, ``bot.pipeline.clock``).

        A transfer may go only to a target the profile names, and, when the operator gave
        ``transfer_targets`` (``SWITCHBOARD_SIP__TRANSFER_TARGETS``), only to one of those.
        """
        self.call = call
        self._call_log = call_log
        self._profile = profile
        self._prompts = prompts
        self._recording = recording
        self._tts = models.tts
        #: What the caller said, turn by turn (the warm handoff's summary is made of it).
        self._heard: list[str] = []
        self.context = CallContext(
            call,
            models,
            profile,
            prompts,
            on_turn=self._turn_sink(on_turn),
            on_event=self._event,
            call_log=call_log,
            intent_cache=intent_cache,
            call_actions=call_actions,
            knowledge=knowledge,
            webhooks=webhooks,
            transfer_targets=transfer_targets,
            summarize=self._handoff_summary,
            clock=clock,
        )
        self.pipeline = Pipeline.build(self.context, CALL_STAGES)

    @property
    def turn_detector(self) -> TurnDetector:
        return self.pipeline.stage(TurnDetector)

    @property
    def transcriber(self) -> Transcriber:
        return self.pipeline.stage(Transcriber)

    @property
    def menu(self) -> KeypadMenu:
        return self.pipeline.stage(KeypadMenu)

    @property
    def responder(self) -> Responder:
        return self.pipeline.stage(Responder)

    @property
    def guard(self) -> AnswerGuard:
        return self.pipeline.stage(AnswerGuard)

    @property
    def speaker(self) -> Speaker:
        return self.pipeline.stage(Speaker)

    @property
    def control(self) -> CallControl:
        return self.pipeline.stage(CallControl)

    @property
    def speculator(self) -> Speculator:
        return self.context.speculator

    def _event(self, kind: str, detail: str) -> None:
        """Where the stages' call events go (``CallContext.event``): the call log."""
        if self._call_log is not None:
            self._call_log.event(self.call.call_id, kind, detail, self.context.clock.now())

    def _turn_sink(self, on_turn: TurnSink) -> TurnSink:
        def sink(turn: Turn) -> None:
            if turn.transcript and turn.transcript != MASK and turn.route != "keypad":
                self._heard.append(turn.transcript)
            on_turn(turn)

        return sink

    def summary_text(self) -> str:
        """The warm handoff's words: who called and what they said (last turns first cut)."""
        return handoff_summary(self._profile.handoff_summary, self.call.remote_uri, self._heard)

    async def _handoff_summary(self) -> bytes:
        """The summary, synthesized for the agent; empty (a plain bridge) if that fails."""
        text = self.summary_text()
        try:
            chunks = [
                c async for c in self._tts.synthesize(text, sample_rate=self.call.sample_rate)
            ]
        except Exception as exc:  # the caller is still put through, without the summary
            log.warning("call %s: handoff summary not synthesized: %s", self.call.call_id, exc)
            self._event("summary_failed", type(exc).__name__)
            return b""
        self._event("handoff_summary", text)
        return b"".join(chunks)

    def _opening(self) -> list[DataFrame]:
        """What the call says on answer, in order: the recording announcement (before
        anything else), the greeting, the first menu's prompt when it is announced."""
        ctx, profile = self.context, self._profile
        frames: list[DataFrame] = []
        announcement = profile.recording.announcement
        if self._recording is not None and announcement is not None:
            frames.append(ctx.say(None, announcement))
        greeting = self._prompts.get(profile.greeting)
        frames.append(PlayAudio(turn=None, pcm=greeting, text=profile.greeting))
        if profile.menus and profile.menus[0].announce:
            frames.append(ctx.say(None, profile.menus[0].prompt))
        return frames

    async def run(self) -> None:
        """Greet the caller, then converse until the call ends."""
        if self._call_log is not None:
            self._call_log.call_answered(
                self.call.call_id,
                caller=self.call.remote_uri,
                callee=self.call.local_uri,
                answered_at=self.call.answered_at,
                recording=self._recording,
            )
        pipeline, ctx, control = self.pipeline, self.context, self.control
        pipeline.start()
        for frame in self._opening():
            await pipeline.put(frame)  # through every stage to the speaker, ahead of the caller
        log.info("call %s: greeting queued", self.call.call_id)
        reason = "ended"
        try:
            async for event in self.call.receive():
                if control.hears(event):
                    continue  # on hold, with an agent, or the post-call question's answer
                if isinstance(event, AudioIn | DtmfIn):
                    await pipeline.put(event)
                elif isinstance(event, CallEnded):
                    reason = event.reason
                    if control.bridged:
                        who = "agent" if reason == "agent hung up" else "caller"
                        self._event("bridge_ended", f"{who} hung up")
                    break
        finally:
            reason = control.end_reason(reason)  # before CallFinished stops the control
            await pipeline.put(CallFinished(reason=reason, at=ctx.clock.now()))
            await pipeline.stop()
            await ctx.speculator.close()
            log.info("call %s ended: %s", self.call.call_id, reason)
            if self._call_log is not None:
                self._call_log.call_ended(self.call.call_id, reason, ctx.clock.now())
