"""One call as every stage of its pipeline sees it: what a stage's ``build`` is given."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.calllog.calllog import CallLog
from bot.intents.cache import IntentCache
from bot.knowledge.index import KnowledgeIndex
from bot.lookups.webhook import Webhooks
from bot.pipeline.call_port import CallPort
from bot.pipeline.clock import MONOTONIC, Clock
from bot.pipeline.deciding.call_lookups import CallLookups
from bot.pipeline.deciding.conversation import Conversation
from bot.pipeline.deciding.decider import Decider
from bot.pipeline.frames import DataFrame, PlayAudio, Speak
from bot.pipeline.prompts import PromptAudio
from bot.pipeline.rehear import Rehearing
from bot.pipeline.speculation import Speculator
from bot.pipeline.turn import Turn
from bot.pipeline.turnlog import TurnSink
from bot.profile import BotProfile
from bot.vocabulary import vocabulary_of
from serve import ModelSet


class CallContext:
    """The call, its profile, models and node services, and what the stages share.

    A stage takes from here what it needs when it is built (``Processor.build``), instead
    of callbacks handed to it one by one: how to say a phrase (its ready audio when it was
    synthesized at start), where call events go, the call's clock, models and services.
    It holds no list of the stages: what one stage needs of another comes by frames
    (whether the bot has the line: ``LineHeld``, upstream).
    """

    def __init__(
        self,
        call: CallPort,
        models: ModelSet,
        profile: BotProfile,
        prompts: PromptAudio,
        *,
        on_turn: TurnSink,
        on_event: Callable[[str, str], None] | None = None,
        call_log: CallLog | None = None,
        intent_cache: IntentCache | None = None,
        call_actions: bool = True,
        knowledge: KnowledgeIndex | None = None,
        webhooks: Webhooks | None = None,
        transfer_targets: frozenset[str] | None = None,
        summarize: Callable[[], Awaitable[bytes]] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.call = call
        #: The call's time and waits (``MONOTONIC``; a test's own clock in tests): every
        #: stage reads the time and sleeps on it (bot/pipeline/clock.py).
        self.clock = clock or MONOTONIC
        self.call_id = call.call_id
        self.sample_rate = call.sample_rate
        self.models = models
        self.profile = profile
        self.prompts = prompts
        #: Every finished turn (the turn log, the call log, the metrics).
        self.on_turn = on_turn
        self._on_event = on_event
        self.call_log = call_log
        self.intent_cache = intent_cache
        #: False: a call action is recorded, not carried out (``SWITCHBOARD_CALL_ACTIONS``).
        self.call_actions = call_actions
        self.knowledge = knowledge
        self.webhooks = webhooks
        #: The operator's allowed transfer targets (``SWITCHBOARD_SIP__TRANSFER_TARGETS``).
        self.transfer_targets = transfer_targets
        #: The warm handoff's spoken summary for the agent (empty: a plain bridge).
        self.summarize = summarize
        #: The profile's words, which the recognizer hears every turn by (bot/vocabulary.py).
        self.vocabulary = vocabulary_of(profile)
        #: Transcription and intent lookup while the caller pauses (speculation.py).
        #: A second hearing of words that lead nowhere (None: a one-pass recognizer): in
        #: the caller's pause, for the end of turn, and in the router (rehear.py).
        self.rehearing = Rehearing.of(models.asr, sample_rate=self.sample_rate)
        #: The call's conversation, and the one place its turns are decided: in the
        #: caller's pause (the speculator) and at the end of the turn (the router, or the
        #: responder without an intent cache), each words looked up once (decider.py).
        self.conversation = Conversation()
        self.decider = Decider(CallLookups(intent_cache, knowledge), profile, self.conversation)
        self.speculator = Speculator(
            models.asr,
            sample_rate=self.sample_rate,
            decider=self.decider,
            call_id=self.call_id,
            rehearing=self.rehearing,
            vocabulary=self.vocabulary,
            clock=self.clock,
            say_ahead=self._say_ahead,
            read_intonation=profile.endpointing.fallen_silence_ms > 0,
        )

    def _say_ahead(self, text: str) -> None:
        """Synthesize ``text`` in the caller's pause, unless it is a ready phrase."""
        if self.prompts.find(text) is None:
            self.prompts.ahead.start(self.models.tts, text)

    def say(self, turn: Turn | None, text: str) -> DataFrame:
        """The frame that says ``text``: its ready audio when it was synthesized at start."""
        pcm = self.prompts.find(text)
        if pcm is None:
            return Speak(turn=turn, text=text)
        return PlayAudio(turn=turn, pcm=pcm, text=text)

    def event(self, kind: str, detail: str) -> None:
        """A call event (``lookup``, ``silence_prompt``...): to ``on_event`` when the call
        has one, else to the call log, if any."""
        if self._on_event is not None:
            self._on_event(kind, detail)
        elif self.call_log is not None:
            self.call_log.event(self.call_id, kind, detail, self.clock.now())

    def log_event(self, kind: str, detail: str, at: float | None = None) -> None:
        """A call event straight to the call log, if any, at ``at`` on the call's clock
        (now when not given): a filler heard, an answer refused."""
        if self.call_log is not None:
            self.call_log.event(self.call_id, kind, detail, self.clock.now() if at is None else at)
