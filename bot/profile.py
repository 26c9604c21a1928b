"""The bot profile: greeting, prompts, intents, knowledge and endpointing, from a TOML file.

The synthesis voice is a model setting (``SWITCHBOARD_MODELS__TTS_VOICE_PATH``), since it is
loaded with the models.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from bot.answers.small_talk import SmallTalkReplies
from bot.callflow import (
    CallLimits,
    CollectorConfig,
    LookupConfig,
    MenuConfig,
    TransferTarget,
    placeholders,
)

# The [intent_matching] section is the matcher's own model, re-exported with the profile's.
from bot.intents.match import IntentMatchingConfig as IntentMatchingConfig  # noqa: PLC0414
from bot.intents.match import normalize

#: The profile a node runs when none is named.
DEFAULT_PROFILE = Path(__file__).parent / "profiles" / "default.toml"


class EndpointingConfig(BaseModel):
    """When the caller is speaking, and when their turn is over."""

    model_config = ConfigDict(extra="forbid")
    vad_threshold: float = Field(0.5, gt=0.0, lt=1.0)
    min_speech_ms: int = Field(120, ge=20)
    end_silence_ms: int = Field(500, ge=60)
    #: Audio kept from before the first frame the VAD called voiced (a word's first
    #: sounds, which the VAD hears late): the turn's audio starts there.
    preroll_ms: int = Field(200, ge=0)
    max_turn_s: float = Field(20.0, gt=1.0)
    barge_in_ms: int = Field(200, ge=20)
    #: Inside a turn, a frame quieter than this (dBFS) is silence whatever the VAD says:
    #: the VAD's own end of speech trails the audio by ~80-200 ms. ``None``: VAD only.
    #: On a noisy line the floor is never reached and the VAD alone decides.
    energy_floor_dbfs: float | None = Field(-50.0, le=0.0)
    #: Silence after which the turn so far is transcribed and looked up ahead of time
    #: (0: never). Shorter than ``end_silence_ms``; a pause this long inside a sentence
    #: costs one wasted transcription, nothing else.
    speculate_after_ms: int = Field(100, ge=0)
    #: End the turn early on what that pass found: at once on words that read as a
    #: finished sentence and that the operator's words answer (a cached intent, a knowledge
    #: entry as written), after ``sentence_end_silence_ms`` on either one.
    early_end: bool = True
    sentence_end_silence_ms: int = Field(300, ge=20)
    #: The early end on an answer in the operator's words waits for this much quiet (frames under
    #: ``energy_floor_dbfs``, not only frames the VAD does not call speech): the VAD takes
    #: a fricative for silence, and a caller saying "I've been waiting two weeks | for my
    #: parcel" was answered 200 ms into the "s f". Where the line is never that quiet,
    #: ``sentence_end_silence_ms``. 0: at once.
    hit_quiet_ms: int = Field(40, ge=0, le=1000)
    #: Silence the turn waits for when that pass heard an unfinished thought ("my order
    #: number is", "I'd like to change", digits still to come): callers pause mid-sentence
    #: to look something up. 0: no longer than ``end_silence_ms``.
    unfinished_silence_ms: int = Field(2500, ge=0, le=10_000)
    #: Silence the turn waits for when words that no cached intent answers were heard
    #: again in the pause (a two-pass recognizer) and the second recognizer heard no end to
    #: them either (no final punctuation, or no words), or another sentence than the first
    #: one: as often a misheard fragment ("Could you check if" heard as "Come you packet")
    #: as a whole request. Longer than the pauses of 0.5-1.5 s callers make mid-sentence.
    #: 0: no longer than ``end_silence_ms``.
    unsure_silence_ms: int = Field(2000, ge=0, le=10_000)
    #: Silence the turn waits for when both recognizers heard a finished sentence that
    #: leads nowhere: no intent answers or asks about it, the knowledge base has nothing
    #: for it, and it is not small talk or a follow-up, so the bot could only say it is
    #: not sure. As often half a request ("I think I was charged" ... "twice for my
    #: order") as a question the profile does not cover, whose "not sure" comes this much
    #: later. 0: such a sentence ends the turn as any finished one does.
    nowhere_silence_ms: int = Field(2000, ge=0, le=10_000)
    #: Silence the turn waits for when a finished sentence would only be asked about
    #: ("Just to check, do you want to talk to a person?"): the cache is not sure what the
    #: caller means, and half a request misheard as a sentence ("Can you send me" as "Can
    #: you friend me?") is one reason why. Longer than the pauses of up to 1.5 s callers
    #: make mid-sentence, by the time it takes to hear them go on: at 1500 ms, a caller
    #: who went on after a 1.5 s pause ("Can someone help me? | with a missing item ...")
    #: heard the question start over them. The question comes this much later. 0: such a
    #: sentence ends the turn as any finished one does.
    question_silence_ms: int = Field(1800, ge=0, le=10_000)
    #: Silence the turn waits for instead of the nowhere and question waits above (words
    #: that read as a finished sentence) when the caller's voice also fell at least
    #: ``fall_semitones`` below its own median on the last words: a finished statement's
    #: fall (a caller pausing mid-sentence holds the pitch up;
    #: ``bot.pipeline.language.intonation``). On the paused requests of the tuning and
    #: first three held-out sets (espeak-ng, which keeps the sentence's contour across the
    #: pause), no first half ended lower than 3.0 semitones under the voice's median; 84%
    #: of whole statements ended lower than 3.5. Not the unsure wait: the fall alone is one
    #: cue, and one held-out half fell 3.5 ("It's order number"). 0: the pitch is not read
    #: and those waits stay as they are.
    fallen_silence_ms: int = Field(900, ge=0, le=10_000)
    fall_semitones: float = Field(3.5, gt=0.0, le=24.0)
    #: Silence the turn waits for instead of the nowhere and question waits above when the
    #: words read as a finished sentence of at least ``long_sentence_words`` words, as
    #: each recognizer heard them: half a request heard as a finished sentence is short
    #: ("Can you help me?", "The path is one lift." for "The parcel was left"). On the six
    #: paused sets (252 first halves in espeak-ng, each with a 100 ms pause after it and
    #: G.711), one half the bot would ask about or say "not sure" to was heard as more than
    #: 6 words ("I bought a lamp from you and" as "I bought a ramp from your hand.", 7, with
    #: this install's recognizers: docs/benchmarks.md, "Whole questions"); 74 of the 81
    #: whole requests that waited so were heard as 7 or more. A
    #: caller who pauses after a long finished sentence and goes on ("I ordered a sofa
    #: three weeks ago | and it never came") hears the question or "not sure" start after
    #: this much silence instead. So do words each recognizer heard as a whole question of
    #: five words or more (``whole_question``: "Do you sell or gift card?"): on the same
    #: sets no half the bot would ask about or say "not sure" to was heard so; the halves
    #: heard as questions are shorter ("Can you help me?"). 0: those waits stay as they
    #: are.
    long_sentence_silence_ms: int = Field(1000, ge=0, le=10_000)
    long_sentence_words: int = Field(7, ge=1, le=100)
    #: Silence the turn waits for when the words match an intent that hangs up after its
    #: answer (a goodbye). A hang-up cannot be taken back, and a fragment misheard as a
    #: goodbye ("Where can I find" heard as "Bye bye.") would end the call of a caller who
    #: was only pausing; a goodbye said this much later costs nothing. A transfer keeps the
    #: usual wait: a person takes the call either way, and the transfer question is held to
    #: the cache route's latency. A yes that would transfer or hang up (to the offer of a
    #: colleague, to a question about such an intent) waits this long too: "Okay, okay."
    #: may start a request of its own. 0: such words end the turn as any finished sentence
    #: does.
    hangup_silence_ms: int = Field(1500, ge=0, le=10_000)
    #: Silence the turn waits for when the words are only a greeting ("Hello?", "Hi
    #: there."): a greeting opens a request as often as it is all of it, and a caller saying
    #: "Hello, | can you hear me?" (a ~300 ms comma pause in a flite voice) heard the bot's
    #: own greeting start over them at ``sentence_end_silence_ms``, then was heard as one
    #: request with what followed. A greeting's reply says nothing the caller waits for, so
    #: it can come this much later. 0: a greeting ends the turn as any finished sentence
    #: does.
    greeting_silence_ms: int = Field(700, ge=0, le=10_000)
    #: Silence the turn waits for when the words are only a yes, no or okay with nothing
    #: asked ("Yes.", "Okay."): its reply ("Is there anything else I can help with?", or
    #: the greeting's before any answer) says nothing the caller waits for, and a caller
    #: who says "Okay." after an answer often goes on with another request; half a request
    #: is heard so too ("Do you | sell gift cards?" heard as "Yes, yes, yes.": at the
    #: greeting's 700 ms, the greeting started in the 0.7 s pause). As long as a yes that
    #: would act waits (``hangup_silence_ms``). 0: such words end the turn as any finished
    #: sentence does.
    acknowledgement_silence_ms: int = Field(1500, ge=0, le=10_000)
    #: A caller who starts again this soon after the end of their last turn's voice, and
    #: speaks over the bot's answer to it, was pausing mid-request: the bot stops (as at
    #: any barge-in) and the new words are read together with that turn's as one request
    #: ("I'd like to change" ... "the delivery address on my order"). A caller replying to
    #: the bot's words first hears some of them, so starts later. 0: a turn is never
    #: joined to the one before.
    continuation_ms: int = Field(2000, ge=0, le=5000)
    #: Silence the turn waits for after "hold on", "just a second", "let me find it".
    hold_silence_ms: int = Field(10_000, ge=0, le=60_000)
    #: Said once a turn when the caller asks for time (None: nothing is said).
    hold_reply: str | None = Field("Take your time.", min_length=1, max_length=200)
    #: A number read out with fewer digits than this has more to come, when no number
    #: collector says how long it is (the shortest collector's ``min_length`` when the
    #: profile has collectors). 0: digits never keep a turn open.
    number_min_digits: int = Field(4, ge=0, le=32)


class LlmConfig(BaseModel):
    """How the language model is asked."""

    model_config = ConfigDict(extra="forbid")
    max_tokens: int = Field(60, ge=1, le=1024)
    temperature: float = Field(0.3, ge=0.0, le=2.0)
    history_turns: int = Field(6, ge=0)


#: A spoken topic ("your refund") is a phrase of at most this many words and characters.
MAX_TOPIC_WORDS = 6
MAX_TOPIC_CHARS = 80


def spoken_topic(value: str | None) -> str | None:
    """An operator's topic, checked: a short phrase said after "Is this about" (at most
    ``MAX_TOPIC_WORDS`` words, with letters, not a sentence of its own); spaces collapsed."""
    if value is None:
        return None
    phrase = " ".join(value.split())
    if not any(c.isalpha() for c in phrase):
        raise ValueError("a topic needs words (it is said after 'Is this about')")
    if len(phrase.split()) > MAX_TOPIC_WORDS:
        raise ValueError(
            f"a topic is a short phrase of at most {MAX_TOPIC_WORDS} words, said after "
            f"'Is this about' (such as 'your refund'); for a whole question, use confirm"
        )
    if phrase[-1] in ".?!;:" or "?" in phrase:
        raise ValueError(
            "a topic is a phrase said after 'Is this about', not a sentence: no end "
            "punctuation or question mark"
        )
    return phrase


class IntentConfig(BaseModel):
    """A frequent caller request answered from ready audio, without the LLM."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=128, pattern=r"^[a-z0-9_]+$")
    #: What callers say for this intent; several, spoken in different ways.
    examples: list[str] = Field(min_length=1)
    #: Near-misses that must not match this intent (a closer one vetoes a semantic match).
    negatives: list[str] = []
    answer: str = Field(min_length=1)
    #: What to do once the answer has played: ``transfer`` the caller to ``transfer_to``
    #: (a SIP REFER), or ``hangup``. A barge-in over the answer cancels it.
    action: Literal["transfer", "hangup"] | None = None
    #: Where ``transfer`` sends the caller: a SIP URI (``sip:agents@pbx.example.com``).
    transfer_to: str | None = Field(None, pattern=r"^(sips?|tel):[^\s<>]+$")
    #: The yes-or-no question asked when the caller's words are near this intent but not
    #: near enough to answer ("Do you want to know where your order is?"). Unset: "Is
    #: this about" and the topic (``bot.intents.confirm.confirm_question``).
    confirm: str | None = Field(None, min_length=1, max_length=300)
    #: What the intent is about, in a few words said after "Is this about" ("your refund",
    #: "opening hours", "booking an appointment"): the confirmation question when
    #: ``confirm`` is unset, and the question that offers two intents. Unset: derived from
    #: the name and the examples (``bot.intents.topic.topic_of``).
    topic: str | None = Field(None, min_length=1, max_length=MAX_TOPIC_CHARS)

    @field_validator("topic")
    @classmethod
    def _topic_is_a_phrase(cls, topic: str | None) -> str | None:
        return spoken_topic(topic)

    @model_validator(mode="after")
    def _transfer_has_a_target(self) -> IntentConfig:
        if self.action == "transfer" and self.transfer_to is None:
            raise ValueError(f"intent {self.name!r}: action 'transfer' needs transfer_to")
        if self.transfer_to is not None and self.action != "transfer":
            raise ValueError(f"intent {self.name!r}: transfer_to without action 'transfer'")
        return self


class KnowledgeEntry(BaseModel):
    """One fact the operator wrote for the bot to answer from (``bot.knowledge``).

    It is retrieved for the caller's question: spoken as written when it is close to the
    question, asked about ("Is this about gift cards?") and spoken on a yes when
    it is less close (extractive mode, the default), or given to the LLM to word, which
    may answer only from what it was given (``knowledge_matching.extractive = false``).
    """

    model_config = ConfigDict(extra="forbid")
    #: A short id, unique within the profile (logs, and the answer guard's reports).
    topic: str = Field(min_length=1, max_length=128, pattern=r"^[a-z0-9_]+$")
    #: Ways a caller asks for it; each is embedded and matched against the caller's words.
    questions: list[str] = Field(min_length=1)
    #: The fact, written to be spoken as is: one or two short sentences, no lists, markup or
    #: web addresses. Numbers in digits ("4.95 dollars"), as the answer guard compares them.
    answer: str = Field(min_length=1)
    #: Words or phrases (a brand, a product name) that retrieve the entry whenever the caller
    #: says them, however far the rest of their words are from its questions.
    keywords: list[str] = []
    #: The yes-or-no question asked when the caller's words are near this entry but may be
    #: about something else ("Do you want to know about our gift cards?"). Unset: "Is this
    #: about" and its ``about`` (``bot.knowledge.index.topic_question``).
    confirm: str | None = Field(None, min_length=1, max_length=300)
    #: What the entry is about, in a few words said after "Is this about" ("gift cards",
    #: "paying over the phone"): the spoken topic, where ``topic`` is the entry's id. Unset:
    #: derived from the id and the questions (``bot.intents.topic.topic_of_entry``).
    about: str | None = Field(None, min_length=1, max_length=MAX_TOPIC_CHARS)

    @field_validator("about")
    @classmethod
    def _about_is_a_phrase(cls, about: str | None) -> str | None:
        return spoken_topic(about)

    @field_validator("questions", "keywords")
    @classmethod
    def _no_empty_phrase(cls, phrases: list[str], info: ValidationInfo) -> list[str]:
        if any(not normalize(p) for p in phrases):
            what = "keyword" if info.field_name == "keywords" else "question"
            raise ValueError(f"knowledge topic {info.data.get('topic', '?')!r} has an empty {what}")
        return phrases

    @field_validator("answer")
    @classmethod
    def _answer_has_words(cls, answer: str, info: ValidationInfo) -> str:
        if not answer.strip():
            raise ValueError(f"knowledge topic {info.data.get('topic', '?')!r} has a blank answer")
        return answer


class KnowledgeConfig(BaseModel):
    """When knowledge entries are retrieved (``bot.knowledge.KnowledgeIndex``). Scores are the
    cosine similarity of the caller's words to an entry's nearest question; the defaults were
    measured with MiniLM on the default profile (tests/bot/test_knowledge.py)."""

    model_config = ConfigDict(extra="forbid")
    #: An entry scoring at least this is retrieved (asked about, or given to the LLM when
    #: not ``extractive``). Unrelated words ("tell me a joke", "do you have it in stock")
    #: scored at most 0.44; rewordings of an entry's questions at least 0.54 (one vague one
    #: 0.48), mostly over 0.6.
    min_score: float = Field(0.5, gt=0.0, le=1.0)
    #: At most this many entries, best first, are retrieved: a question between two
    #: entries ("what ways can I pay": payment methods, paying by phone) gets both.
    max_entries: int = Field(2, ge=1, le=10)
    #: At or above this the best entry's own answer may be spoken as is, without the LLM: no
    #: wrong entry scored over 0.57.
    direct_score: float = Field(0.65, gt=0.0, le=1.0)
    #: The model never words an answer about the business: an entry at ``direct_score`` is
    #: spoken as written, one between ``min_score`` and ``direct_score`` is asked about
    #: ("Do you want to know about our gift cards?") and spoken on a yes. The model is left
    #: the small talk. False gives entries below ``direct_score`` to the model to word
    #: (checked by the answer guard); extractive mode matched or beat that on every figure
    #: measured (docs/benchmarks.md, "What is not an answer, and extractive mode").
    extractive: bool = True

    @model_validator(mode="after")
    def _direct_is_stricter(self) -> KnowledgeConfig:
        if self.direct_score < self.min_score:
            raise ValueError("knowledge_matching: direct_score is below min_score")
        return self


class RecordingConfig(BaseModel):
    """Whether this bot records its calls (where and how long: ``SWITCHBOARD_RECORDINGS__*``)."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = False
    #: Said before the greeting of a recorded call ("This call is recorded...").
    announcement: str | None = Field(None, min_length=1)


class BotProfile(BaseModel):
    """Everything that makes one bot sound like itself."""

    model_config = ConfigDict(extra="forbid")
    name: str
    greeting: str = Field(min_length=1)
    apology: str = Field(min_length=1)
    #: Said to a caller who tries to change or read out the bot's instructions.
    decline: str = Field(
        "I can only help with questions about our shop and your orders. What can I do for you?",
        min_length=1,
    )
    #: Said instead of a generated answer the answer guard refuses (``bot.answers``) when
    #: no knowledge entry can stand in for it: honest, and offering what the bot can do.
    unsure: str = Field(
        "I am not sure about that, and I would rather not guess. "
        "I can put you through to a colleague if you like.",
        min_length=1,
    )
    system_prompt: str = Field(min_length=1)
    #: Greetings, thanks, goodbyes, "are you there": answered in these fixed words.
    small_talk: SmallTalkReplies = SmallTalkReplies()
    endpointing: EndpointingConfig = EndpointingConfig()
    llm: LlmConfig = LlmConfig()
    #: Said when a transfer fails (REFER refused, or no outcome in ``transfer_timeout_s``);
    #: the apology when unset.
    transfer_failed: str | None = Field(None, min_length=1)
    transfer_timeout_s: float = Field(30.0, gt=0.0, le=300.0)
    #: Where a caller may be put through, and how (``bot.callflow.TransferTarget``). Empty:
    #: the targets the intents and menus name, each by REFER. A target named anywhere else
    #: (an intent from another configuration) is refused and logged.
    transfer_targets: list[TransferTarget] = []
    #: Said to the caller as a bridged or warm transfer starts; heard until the calls join.
    transfer_hold: str | None = Field(
        "Please hold while I put you through to a colleague.", min_length=1
    )
    #: What the agent hears first in a warm transfer: ``{caller}`` (the caller's number or
    #: name from the SIP address) and ``{asked}`` (the caller's last few turns, as heard).
    handoff_summary: str = Field(
        "Call from {caller}. The caller said: {asked}", min_length=1, max_length=300
    )
    #: Short phrases synthesized ahead, to play while the bot works ("One moment."): one of
    #: them, in turn, when an LLM answer's first audio is not out ``filler_after_ms`` after
    #: the caller's turn ended, and another each ``filler_every_ms`` after the last one
    #: ended while the answer is still silent (0: one filler a turn).
    fillers: list[str] = []
    filler_after_ms: int = Field(1000, ge=0)
    filler_every_ms: int = Field(0, ge=0)
    intents: list[IntentConfig] = []
    intent_matching: IntentMatchingConfig = IntentMatchingConfig()
    #: Facts for the LLM's answers to what no intent covers (``bot.knowledge``).
    knowledge: list[KnowledgeEntry] = []
    knowledge_matching: KnowledgeConfig = KnowledgeConfig()
    #: Keypad menus; the first is the main one (``bot.callflow``, docs/call-flows.md).
    menus: list[MenuConfig] = []
    #: Numbers the caller keys in or says.
    collectors: list[CollectorConfig] = []
    #: Business lookups: the operator's HTTP webhooks.
    lookups: list[LookupConfig] = []
    #: A quiet caller re-prompted then hung up on; the longest call (``bot.callflow``).
    call_limits: CallLimits = CallLimits()
    #: Call recordings (``bot.recording``).
    recording: RecordingConfig = RecordingConfig()

    @model_validator(mode="before")
    @classmethod
    def _no_voice_section(cls, data: object) -> object:
        if isinstance(data, dict) and "voice" in data:
            raise ValueError(
                "[voice] is no longer read from the profile: the voice is chosen with "
                "SWITCHBOARD_MODELS__TTS_VOICE_PATH (and SWITCHBOARD_MODELS__TTS); remove it"
            )
        return data

    @model_validator(mode="after")
    def _intents_are_distinct(self) -> BotProfile:
        owner: dict[str, str] = {}
        for intent in self.intents:
            if intent.name in {i.name for i in self.intents if i is not intent}:
                raise ValueError(f"intent {intent.name!r} is defined twice")
            for example in intent.examples:
                key = normalize(example)
                if not key:
                    raise ValueError(f"intent {intent.name!r} has an empty example")
                other = owner.setdefault(key, intent.name)
                if other != intent.name:
                    raise ValueError(
                        f"example {example!r} belongs to both {other!r} and {intent.name!r}"
                    )
            for negative in intent.negatives:
                if normalize(negative) in owner and owner[normalize(negative)] == intent.name:
                    raise ValueError(
                        f"intent {intent.name!r}: {negative!r} is both example and negative"
                    )
        return self

    @model_validator(mode="after")
    def _topics_are_distinct(self) -> BotProfile:
        seen: set[str] = set()
        for entry in self.knowledge:
            if entry.topic in seen:
                raise ValueError(f"knowledge topic {entry.topic!r} is defined twice")
            seen.add(entry.topic)
        return self

    @field_validator("handoff_summary")
    @classmethod
    def _summary_fields(cls, value: str) -> str:
        unknown = placeholders(value) - {"caller", "asked"}
        if unknown:
            raise ValueError(f"handoff_summary: unknown field(s) {sorted(unknown)}")
        return value

    @model_validator(mode="after")
    def _targets_are_distinct(self) -> BotProfile:
        uris = [t.uri for t in self.transfer_targets]
        if len(uris) != len(set(uris)):
            raise ValueError("a transfer target is listed twice")
        return self

    def transfer_target(self, uri: str) -> TransferTarget | None:
        """How to put a caller through to ``uri``; None when it is no configured target."""
        if self.transfer_targets:
            return next((t for t in self.transfer_targets if t.uri == uri), None)
        return TransferTarget(uri=uri) if uri in self.transfer_uris() else None

    @model_validator(mode="after")
    def _call_flows_refer_to_what_exists(self) -> BotProfile:
        intents = {i.name for i in self.intents}
        topics = {k.topic for k in self.knowledge}
        menus = {m.name for m in self.menus}
        collectors = {c.name for c in self.collectors}
        lookups = {lk.name: lk for lk in self.lookups}
        for kind, listed in (
            ("menu", [m.name for m in self.menus]),
            ("collector", [c.name for c in self.collectors]),
            ("lookup", [lk.name for lk in self.lookups]),
        ):
            if len(listed) != len(set(listed)):
                raise ValueError(f"a {kind} name is defined twice")
        for menu in self.menus:
            for opt in menu.options:
                where = f"menu {menu.name!r} key {opt.key!r}"
                if opt.intent is not None and opt.intent not in intents:
                    raise ValueError(f"{where}: no intent {opt.intent!r}")
                if opt.knowledge is not None and opt.knowledge not in topics:
                    raise ValueError(f"{where}: no knowledge topic {opt.knowledge!r}")
                if opt.collect is not None and opt.collect not in collectors:
                    raise ValueError(f"{where}: no collector {opt.collect!r}")
                if opt.menu is not None and opt.menu not in menus:
                    raise ValueError(f"{where}: no menu {opt.menu!r}")
        fed = {c.lookup for c in self.collectors}
        for lk in self.lookups:
            if lk.purpose and lk.name not in fed:
                raise ValueError(
                    f"lookup {lk.name!r}: a purpose needs a collector with lookup = "
                    f"{lk.name!r} (to ask for the number)"
                )
            if any(not normalize(p) for p in lk.purpose):
                raise ValueError(f"lookup {lk.name!r}: an empty purpose phrase")
        for col in self.collectors:
            for intent in col.after_intents:
                if intent not in intents:
                    raise ValueError(f"collector {col.name!r}: no intent {intent!r}")
            if col.lookup is None:
                continue
            lookup = lookups.get(col.lookup)
            if lookup is None:
                raise ValueError(f"collector {col.name!r}: no lookup {col.lookup!r}")
            if col.lookup_param not in lookup.params or len(lookup.params) != 1:
                raise ValueError(
                    f"collector {col.name!r}: lookup {col.lookup!r} must take exactly the "
                    f"one param {col.lookup_param!r}"
                )
        return self

    def transfer_uris(self) -> frozenset[str]:
        """Every target the profile may transfer a caller to: its ``[[transfer_targets]]``,
        or, with none listed, the intents' and menus' own targets."""
        if self.transfer_targets:
            return frozenset(t.uri for t in self.transfer_targets)
        targets = {i.transfer_to for i in self.intents}
        targets |= {o.transfer_to for m in self.menus for o in m.options}
        return frozenset(t for t in targets if t is not None)


class ProfileError(ValueError):
    """A profile file that cannot be read or does not validate."""


def load_profile(path: Path) -> BotProfile:
    """Read and validate a profile file, with an error that names the file and the field."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ProfileError(
            f"bot profile {path} is not UTF-8 text (byte {exc.start}: {exc.reason})"
        ) from None
    except OSError as exc:
        raise ProfileError(f"cannot read bot profile {path}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"bot profile {path} is not valid TOML: {exc}") from exc
    try:
        return BotProfile.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            where = ".".join(str(p) for p in err["loc"]) or "profile"
            problems.append(
                f"bot profile {path}: {where}: {err['msg'].removeprefix('Value error, ')}"
            )
        raise ProfileError("\n".join(problems)) from None
