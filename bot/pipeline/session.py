"""One call's conversation: the pipeline from caller audio to the bot's speech."""

from __future__ import annotations

import contextlib
import logging
import time

from bot.answers.guard import Refusal
from bot.calllog.calllog import CallLog
from bot.intents.cache import IntentCache
from bot.knowledge.index import KnowledgeIndex
from bot.pipeline.answer_guard import AnswerGuard
from bot.pipeline.call_control import CallControl
from bot.pipeline.call_port import CallPort
from bot.pipeline.calllog_tap import EventTap
from bot.pipeline.frames import CallerAudio, CallFinished, Dtmf, PlayAudio
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


class CallSession:
    """Runs the conversation on one answered call until it ends.

    TurnDetector -> Transcriber -> (Router) -> Responder -> Speaker -> CallControl, with the
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
    ) -> None:
        self.call = call
        self._call_log = call_log
        self._profile = profile
        self._prompts = prompts
        rate = call.sample_rate
        apology = prompts.get(profile.apology)
        self.speaker = Speaker(
            models.tts,
            call,
            sample_rate=rate,
            apology_pcm=apology,
            on_turn=on_turn,
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
        )
        first: Processor = self.turn_detector
        if call_log is not None:  # barge-ins (the endpointer's Interrupts) go to the log
            first = first.link(EventTap(call_log, call.call_id))
        last: Processor = first.link(self.transcriber)
        self._processors: list[Processor] = [self.turn_detector, self.transcriber]
        if intent_cache is not None:  # cached answers first; the LLM gets the rest
            last = last.link(Router(intent_cache, offer=profile.unsure))
            self._processors.append(last)
        failed = profile.transfer_failed or profile.apology
        self.control = CallControl(
            call,
            say=self.speaker.put,
            failed=PlayAudio(turn=None, pcm=prompts.get(failed), text=failed),
            transfer_timeout_s=profile.transfer_timeout_s,
            call_log=call_log,
            enabled=call_actions,
        )
        last.link(self.responder).link(self.guard).link(self.speaker).link(self.control)
        self._processors += [self.responder, self.guard, self.speaker, self.control]

    def _refused(self, turn: Turn, refusal: Refusal) -> None:
        if self._call_log is not None:
            self._call_log.event(self.call.call_id, "guard_refused", str(refusal))

    def _filler_played(self, turn: Turn, text: str, at: float) -> None:
        if self._call_log is not None:
            self._call_log.event(self.call.call_id, "filler", text, at)

    def _bot_speaking(self) -> bool:
        return self.responder.busy or self.speaker.busy or self.call.queued_frames > 0

    async def run(self) -> None:
        """Greet the caller, then converse until the call ends."""
        if self._call_log is not None:
            self._call_log.call_answered(
                self.call.call_id,
                caller=self.call.remote_uri,
                callee=self.call.local_uri,
                answered_at=self.call.answered_at,
            )
        for proc in self._processors:
            proc.start()
        greeting = self._prompts.get(self._profile.greeting)
        await self.speaker.put(PlayAudio(turn=None, pcm=greeting, text=self._profile.greeting))
        log.info("call %s: greeting queued", self.call.call_id)
        reason = "ended"
        try:
            async for event in self.call.receive():
                if isinstance(event, AudioIn):
                    await self.turn_detector.put(CallerAudio(pcm=event.pcm, at=event.at))
                elif isinstance(event, DtmfIn):
                    # The digit may be a PIN or a card number: only at DEBUG.
                    log.info("call %s: dtmf received", self.call.call_id)
                    log.debug("call %s: dtmf %s", self.call.call_id, event.digit)
                    await self.turn_detector.put(Dtmf(digit=event.digit, at=event.at))
                    if self._call_log is not None:
                        self._call_log.event(self.call.call_id, "dtmf", event.digit, event.at)
                elif isinstance(event, CallEnded):
                    reason = event.reason
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
