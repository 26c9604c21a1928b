"""One call's conversation: the pipeline from caller audio to the bot's speech."""

from __future__ import annotations

import contextlib
import logging
import re
import time

from bot.answers.guard import Refusal
from bot.calllog.calllog import CallLog
from bot.intents.cache import IntentCache
from bot.knowledge.index import KnowledgeIndex
from bot.lookups.webhook import Webhooks
from bot.pipeline.answer_guard import AnswerGuard
from bot.pipeline.call_control import CallControl, configured_targets
from bot.pipeline.call_port import CallPort
from bot.pipeline.call_timer import CallTimer
from bot.pipeline.calllog_tap import EventTap
from bot.pipeline.collect_trigger import CollectTrigger
from bot.pipeline.digit_collector import MASK, DigitCollector
from bot.pipeline.end_of_turn import ThoughtJudge, expected_digits
from bot.pipeline.frames import CallerAudio, CallFinished, DataFrame, Dtmf, PlayAudio, Speak
from bot.pipeline.keypad_menu import KeypadMenu
from bot.pipeline.lookup_ask import LookupAsk
from bot.pipeline.lookup_runner import LookupRunner
from bot.pipeline.processor import Processor
from bot.pipeline.prompts import PromptAudio
from bot.pipeline.responder import Responder
from bot.pipeline.router import Router
from bot.pipeline.speaker import Speaker
from bot.pipeline.speculation import Speculator
from bot.pipeline.transcriber import Transcriber
from bot.pipeline.turn import Turn
from bot.pipeline.turn_detector import TurnDetector
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


class CallSession:
    """Runs the conversation on one answered call until it ends.

    TurnDetector -> Transcriber -> DigitCollector -> (LookupRunner) -> KeypadMenu -> (Router
    -> CollectTrigger) -> Responder -> AnswerGuard -> Speaker -> CallControl, with the
    greeting played on answer.
    """

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
    ) -> None:
        """``recording``: the file this call is recorded in (``bot.recording``), if it is.

        A transfer may go only to a target the profile names, and, when the operator gave
        ``transfer_targets`` (``SWITCHBOARD_SIP__TRANSFER_TARGETS``), only to one of those.
        """
        self.call = call
        self._call_log = call_log
        self._profile = profile
        self._prompts = prompts
        self._recording = recording
        self._tts = models.tts
        self._timer: CallTimer | None = None
        #: What the caller said, turn by turn (the warm handoff's summary is made of it).
        self._heard: list[str] = []
        rate = call.sample_rate
        apology = prompts.get(profile.apology)
        self.speaker = Speaker(
            models.tts,
            call,
            sample_rate=rate,
            apology_pcm=apology,
            on_turn=self._turn_sink(on_turn),
            fillers=[(text, prompts.get(text)) for text in profile.fillers],
            filler_after_s=profile.filler_after_ms / 1000.0,
            filler_every_s=profile.filler_every_ms / 1000.0,
            on_filler=self._filler_played,
        )
        self.responder = Responder(models.llm, profile, apology_pcm=apology, knowledge=knowledge)
        self.guard = AnswerGuard(
            unsure=profile.unsure,
            unsure_pcm=prompts.find(profile.unsure),
            known_names=(profile.name,),
            private=(profile.system_prompt,),
            on_refusal=self._refused,
        )
        # Transcription and intent lookup start while the caller pauses (speculation.py).
        self.speculator = Speculator(models.asr, sample_rate=rate, cache=intent_cache)
        self.transcriber = Transcriber(models.asr, sample_rate=rate, speculator=self.speculator)
        self.turn_detector = TurnDetector(
            models.vad.create_stream(rate),
            profile.endpointing,
            call_id=call.call_id,
            bot_speaking=self._bot_speaking,
            speculator=self.speculator,
            # What the words so far say (end_of_turn.py), with the number being collected.
            thought=ThoughtJudge(
                lambda: expected_digits(
                    profile.collectors,
                    self.collector.collecting,
                    profile.endpointing.number_min_digits,
                )
            ),
            say=self._say,
        )
        first: Processor = self.turn_detector
        if call_log is not None:  # barge-ins (the endpointer's Interrupts) go to the log
            first = first.link(EventTap(call_log, call.call_id))
        self._processors: list[Processor] = [self.turn_detector]
        # A quiet caller and the longest call: it sees the caller's speech and keys first.
        limits = profile.call_limits
        if limits.silence_reprompt_s or limits.max_call_s:
            timer = CallTimer(
                call.call_id,
                limits,
                answered_at=call.answered_at,
                say=self._say,
                bot_speaking=self._bot_speaking,
                on_event=self._event,
            )
            first = first.link(timer)
            self._processors.append(timer)
            self._timer = timer
        last: Processor = first.link(self.transcriber)
        self._processors.append(self.transcriber)
        # The keypad and collected numbers first: a number being asked for is not a question.
        self.collector = DigitCollector(
            call.call_id,
            profile.collectors,
            say=self._say,
            bot_speaking=self._bot_speaking,
            on_event=self._event,
        )
        last = last.link(self.collector)
        self._processors.append(self.collector)
        if webhooks is not None and profile.lookups:
            last = last.link(LookupRunner(webhooks, say=self._say, on_event=self._event))
            self._processors.append(last)
        # Cached answers first; the LLM gets the rest.
        router = None if intent_cache is None else Router(intent_cache, offer=profile.unsure)
        self.menu = KeypadMenu(
            call.call_id,
            profile.menus,
            intents={i.name: i for i in profile.intents},
            knowledge={k.topic: k.answer for k in profile.knowledge},
            say=self._say,
            begin_collect=self.collector.begin,
            bot_speaking=self._bot_speaking,
            on_event=self._event,
            confirming=None if router is None else router.confirming,
        )
        last = last.link(self.menu)
        self._processors.append(self.menu)
        if router is not None:
            last = last.link(router)
            self._processors.append(last)
            if any(c.after_intents for c in profile.collectors):
                last = last.link(CollectTrigger(profile.collectors, self.collector.begin))
                self._processors.append(last)
        failed = profile.transfer_failed or profile.apology
        hold = profile.transfer_hold
        self.control = CallControl(
            call,
            say=self.speaker.put,
            failed=PlayAudio(turn=None, pcm=prompts.get(failed), text=failed),
            transfer_timeout_s=profile.transfer_timeout_s,
            targets=configured_targets(profile, transfer_targets),
            hold=None if hold is None else self._say(None, hold),
            summarize=self._handoff_summary,
            on_bridged=self._bridged,
            call_log=call_log,
            enabled=call_actions,
        )
        if any(lk.purpose for lk in profile.lookups):  # the lookup, not the model, answers
            asker = LookupAsk(
                profile.lookups, profile.collectors, self.collector.begin, on_event=self._event
            )
            last = last.link(asker)
            self._processors.append(asker)
        last.link(self.responder).link(self.guard).link(self.speaker).link(self.control)
        self._processors += [self.responder, self.guard, self.speaker, self.control]

    def _say(self, turn: Turn | None, text: str) -> DataFrame:
        """The frame that says ``text``: its ready audio when it was synthesized at start."""
        pcm = self._prompts.find(text)
        if pcm is None:
            return Speak(turn=turn, text=text)
        return PlayAudio(turn=turn, pcm=pcm, text=text)

    def _event(self, kind: str, detail: str) -> None:
        if self._call_log is not None:
            self._call_log.event(self.call.call_id, kind, detail)

    def _refused(self, turn: Turn, refusal: Refusal) -> None:
        if self._call_log is not None:
            self._call_log.event(self.call.call_id, "guard_refused", str(refusal))

    def _filler_played(self, turn: Turn, text: str, at: float) -> None:
        if self._call_log is not None:
            self._call_log.event(self.call.call_id, "filler", text, at)

    def _bot_speaking(self) -> bool:
        # On hold for a bridged transfer, or with the agent: the call is not quiet.
        if self.control.holding:
            return True
        return self.responder.busy or self.speaker.busy or self.call.queued_frames > 0

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

    async def _bridged(self) -> None:
        """The caller is with the agent: the bot leaves the call's clocks and audio."""
        if self._timer is not None:
            await self._timer.stop()  # no silence prompt, no longest-call limit now
        self.call.clear_playout()

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
        for proc in self._processors:
            proc.start()
        announcement = self._profile.recording.announcement
        if self._recording is not None and announcement is not None:
            await self.speaker.put(self._say(None, announcement))  # before anything else
        greeting = self._prompts.get(self._profile.greeting)
        await self.speaker.put(PlayAudio(turn=None, pcm=greeting, text=self._profile.greeting))
        menus = self._profile.menus
        if menus and menus[0].announce:
            await self.speaker.put(self._say(None, menus[0].prompt))
        log.info("call %s: greeting queued", self.call.call_id)
        reason = "ended"
        try:
            async for event in self.call.receive():
                if isinstance(event, AudioIn | DtmfIn) and self.control.holding:
                    continue  # on hold for, or with, an agent: not for the bot
                if isinstance(event, AudioIn):
                    await self.turn_detector.put(CallerAudio(pcm=event.pcm, at=event.at))
                elif isinstance(event, DtmfIn):
                    # The digit may be a PIN or a card number: only at DEBUG, and masked
                    # while a sensitive number is being collected.
                    digit = MASK if self.collector.masking else event.digit
                    log.info("call %s: dtmf received", self.call.call_id)
                    log.debug("call %s: dtmf %s", self.call.call_id, digit)
                    if self._call_log is not None:
                        self._call_log.event(self.call.call_id, "dtmf", digit, event.at)
                    await self.turn_detector.put(Dtmf(digit=event.digit, at=event.at))
                elif isinstance(event, CallEnded):
                    reason = event.reason
                    if self.control.bridged:
                        who = "agent" if reason == "agent hung up" else "caller"
                        self._event("bridge_ended", f"{who} hung up")
                    break
        finally:
            reason = self.control.end_reason(reason)  # before CallFinished stops the control
            await self.turn_detector.put(CallFinished(reason=reason, at=time.monotonic()))
            for proc in self._processors:
                with contextlib.suppress(Exception):
                    await proc.stop()
            await self.speculator.close()
            log.info("call %s ended: %s", self.call.call_id, reason)
            if self._call_log is not None:
                self._call_log.call_ended(self.call.call_id, reason)
