"""The call pipeline as a list of stages: built from the call's context, linked, started and
stopped in order; and the fixed phrases the stages declare for synthesis at start."""

from __future__ import annotations

import asyncio
import time

from bot.callflow import (
    CallLimits,
    CollectorConfig,
    LookupConfig,
    LookupParam,
    MenuConfig,
    MenuOption,
)
from bot.knowledge.index import topic_question
from bot.pipeline.context import CallContext
from bot.pipeline.frames import DataFrame, PlayAudio, Speak
from bot.pipeline.pipeline import Pipeline
from bot.pipeline.processor import Collector, Processor
from bot.pipeline.prompts import PromptAudio
from bot.pipeline.session import CALL_STAGES, CallSession, fixed_phrases
from bot.pipeline.stages.call_timer import CallTimer
from bot.pipeline.stages.digit_collector import DigitCollector
from bot.pipeline.stages.keypad_menu import KeypadMenu
from bot.pipeline.stages.speaker import Speaker
from bot.pipeline.stages.turn_detector import TurnDetector
from bot.profile import (
    DEFAULT_PROFILE,
    BotProfile,
    IntentConfig,
    KnowledgeEntry,
    RecordingConfig,
    load_profile,
)
from tests.bot.fakes import MemoryCall, ScriptedASR, ScriptedLLM, ToneTTS, fake_models

FULL = BotProfile(
    name="Acme",
    greeting="Hello there caller",
    apology="Sorry about that",
    system_prompt="Be brief.",
    fillers=["One moment please."],
    transfer_failed="I could not put you through.",
    transfer_hold="Please hold.",
    intents=[IntentConfig(name="hours", examples=["when are you open"], answer="Nine to five.")],
    knowledge=[
        KnowledgeEntry(
            topic="returns",
            questions=["can I return it"],
            answer="Returns are free within 30 days.",
        )
    ],
    menus=[
        MenuConfig(
            name="main",
            prompt="Press 1 for hours, 2 for your order",
            options=[
                MenuOption(key="1", intent="hours"),
                MenuOption(key="2", say="Your order, then.", collect="n"),
            ],
        )
    ],
    collectors=[
        CollectorConfig(name="n", prompt="Your number", min_length=3, max_length=3, lookup="o")
    ],
    lookups=[
        LookupConfig(
            name="o",
            url="http://orders.invalid/{n}",
            params={"n": LookupParam(type="digits", min_length=3, max_length=3)},
            answer="It is {status}",
        )
    ],
    recording=RecordingConfig(enabled=True, announcement="This call is recorded"),
    call_limits=CallLimits(silence_reprompt_s=10, silence_hangup_s=10, max_call_s=600),
)


#: A profile with nothing but what a profile must have.
BARE = BotProfile(name="t", greeting="Hello", apology="Sorry", system_prompt="Be brief.")


def hand_list(prof: BotProfile) -> list[str]:
    """What the node synthesized at start before the stages declared their phrases, as its
    own list made it (node/app.py's ``_fixed_phrases`` and ``call_flow_phrases``)."""
    fixed = [prof.greeting, prof.apology, prof.unsure, prof.decline, *prof.fillers]
    fixed += prof.small_talk.phrases(prof.name)
    if prof.endpointing.hold_reply:
        fixed.append(prof.endpointing.hold_reply)
    fixed += [entry.answer for entry in prof.knowledge]
    if prof.transfer_failed is not None:
        fixed.append(prof.transfer_failed)
    if prof.transfer_hold is not None:
        fixed.append(prof.transfer_hold)
    intents = {i.name: i.answer for i in prof.intents}
    for menu in prof.menus:
        fixed += [menu.prompt, menu.invalid]
        for opt in menu.options:
            fixed += [opt.say] if opt.say else []
            fixed += [intents[opt.intent]] if opt.intent else []
    for col in prof.collectors:
        fixed += [col.prompt, col.reprompt, col.give_up]
    for lookup in prof.lookups:
        fixed += [lookup.preamble, lookup.not_found, lookup.failed]
    if prof.recording.enabled and prof.recording.announcement:
        fixed.append(prof.recording.announcement)
    return fixed + prof.call_limits.phrases()


def test_the_stages_declare_every_phrase_the_hand_list_had() -> None:
    for prof in (FULL, load_profile(DEFAULT_PROFILE), BARE):
        declared = fixed_phrases(prof)
        assert set(hand_list(prof)) <= set(declared)
        assert len(declared) == len(set(declared))  # each phrase once
        assert declared[0] == prof.greeting  # the first a caller hears, synthesized first


def test_the_phrases_of_each_feature_are_declared() -> None:
    declared = set(fixed_phrases(FULL))
    for text in (
        "Take your time.",  # the end of turn's hold reply (the turn detector)
        "I'm Acme's automated assistant. I can answer questions, or put you through to a "
        "colleague. How can I help?",  # small talk (the responder)
        "Thank you for calling. Goodbye.",
        "Returns are free within 30 days.",  # a knowledge answer
        *(topic_question(entry) for entry in FULL.knowledge),  # asked before an entry
        "Nine to five.",  # an intent a menu key answers
        "Your order, then.",
        "Your number",
        "Let me look that up for you.",  # the lookup's preamble (its default)
        "Are you still there?",  # the call timer
        "I will end the call now. Goodbye.",
        FULL.call_limits.max_call_warning,
        "I could not put you through.",
        "Please hold.",
        "This call is recorded",
        "One moment please.",
    ):
        assert text in declared, text
    assert "Are you still there?" not in fixed_phrases(BARE)  # no limits, no timer


class Tagger(Processor):
    """Passes data frames on with its tag added to the text."""

    def __init__(self, tag: str) -> None:
        super().__init__()
        self.tag = tag

    async def process(self, frame: DataFrame) -> None:
        assert isinstance(frame, Speak)
        await self.push(Speak(turn=None, text=frame.text + self.tag))


async def test_a_pipeline_links_starts_and_stops_its_stages_in_order() -> None:
    stages = [Tagger("a"), Tagger("b"), Tagger("c")]
    out = Collector()
    pipeline = Pipeline([*stages, out])
    pipeline.start()
    await pipeline.put(Speak(turn=None, text=">"))
    for _ in range(10):
        await asyncio.sleep(0)
    assert [f.text for f in out.frames if isinstance(f, Speak)] == [">abc"]
    assert all(s._worker is not None for s in stages)
    await pipeline.stop()
    assert all(s._worker is None for s in stages)


class AnsweredCall(MemoryCall):
    def __init__(self) -> None:
        super().__init__()
        self.answered_at = time.monotonic()


async def test_a_stage_whose_feature_is_off_is_left_out_of_the_call() -> None:
    models = await fake_models(ScriptedASR(), ScriptedLLM([]), ToneTTS())
    prompts = PromptAudio(8000)
    for prof, timer in ((BARE, False), (FULL, True)):
        for text in fixed_phrases(prof):
            await prompts.add(models.tts, text)
        session = CallSession(AnsweredCall(), models, prof, prompts)
        kinds = [type(s) for s in session.pipeline.stages]
        assert (CallTimer in kinds) is timer
        assert kinds == [k for k in CALL_STAGES if k in kinds]  # the list's order


async def test_the_stages_before_the_speaker_are_told_while_it_has_the_line() -> None:
    models = await fake_models(ScriptedASR(), ScriptedLLM([]), ToneTTS())
    prompts = PromptAudio(8000)
    for text in fixed_phrases(FULL):
        await prompts.add(models.tts, text)
    call = MemoryCall()
    ctx = CallContext(call, models, FULL, prompts, on_turn=lambda t: None)
    pipeline = Pipeline.build(ctx, CALL_STAGES)
    # The stages whose rules wait while the bot talks keep what they are told.
    lines = [s.line for s in pipeline.stages if s.line is not None]
    kinds = {type(s) for s in pipeline.stages if s.line is not None}
    assert kinds == {TurnDetector, CallTimer, DigitCollector, KeypadMenu}
    pipeline.start()
    try:
        assert not any(line.held for line in lines)
        speaker = pipeline.stage(Speaker)
        await speaker.put(PlayAudio(turn=None, pcm=b"\0" * 640, text="Hello"))  # two frames
        for _ in range(10):
            await asyncio.sleep(0)
        # Said: the speaker is idle, its audio waits to be played: not quiet.
        assert speaker.busy is False and call.queued_frames == 2
        assert all(line.held for line in lines)
        await call.tick(b"\0" * 320)
        assert all(line.held for line in lines)
        await call.tick(b"\0" * 320)  # played out, nothing more to say: quiet
        for _ in range(10):
            await asyncio.sleep(0)
        assert not any(line.held for line in lines)
    finally:
        await pipeline.stop()
