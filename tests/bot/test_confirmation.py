"""The confirmation turn and the background lines: the matcher's ``confirm`` route, the fit
at load, reading a yes or a no, and the router asking, then answering on a yes."""

from __future__ import annotations

import asyncio

import numpy as np
import numpy.typing as npt
import pytest

from bot.intents.cache import IntentCache
from bot.intents.confirm import (
    asks_for_more,
    confirm_question,
    goes_on,
    read_answer,
    read_more,
    says_done,
)
from bot.intents.fit import fit
from bot.intents.match import IntentIndex, IntentMatchingConfig, IntentVectors
from bot.intents.store import MemoryStore
from bot.knowledge.index import KnowledgeIndex
from bot.pipeline.frames import (
    CallAction,
    DataFrame,
    DtmfIn,
    Frame,
    PlayAudio,
    ResponseDone,
    Transcript,
)
from bot.pipeline.processor import Collector
from bot.pipeline.stages.router import Router
from bot.pipeline.turn import Turn
from bot.profile import IntentConfig
from serve import Embedder
from tests.bot.deciding import router_for
from tests.bot.fakes import ToneTTS

E = np.eye(6, dtype=np.float32)


def unit(*weights: float) -> npt.NDArray[np.float32]:
    v = np.array(weights + (0.0,) * (6 - len(weights)), np.float32)
    return v / np.linalg.norm(v)


def no_negatives() -> npt.NDArray[np.float32]:
    return np.zeros((0, 6), np.float32)


ORDER = IntentVectors("order", ("where is my order",), (), E[[0]], no_negatives())
HOURS = IntentVectors("hours", ("when are you open",), (), E[[1]], no_negatives())
RULE = IntentMatchingConfig(
    threshold=0.8,
    margin=0.1,
    negative_margin=0.05,
    top_k=1,
    background_margin=0.1,
    confirm_threshold=0.5,
    confirm_background_margin=0.0,
)


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("Yes.", "yes"),
        ("Yeah, that's right.", "yes"),
        ("yes please", "yes"),
        ("Um, sure.", "yes"),
        ("No.", "no"),
        ("Nope, not that.", "no"),
        ("No thanks, that's not it.", "no"),
        ("Not really.", "no"),
        ("No, I want to know how much delivery costs.", None),  # a new request
        ("Yes and no.", None),
        ("Where is my order?", None),
        ("", None),
    ],
)
def test_reading_a_yes_or_a_no(text: str, answer: str | None) -> None:
    assert read_answer(text) == answer


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("No.", "no"),
        ("No thank you.", "no"),
        ("No, that's all, thanks.", "no"),
        ("Nope, that's everything.", "no"),
        ("I'm good, thank you.", "no"),
        ("That's it for now, thanks.", "no"),
        ("Yes.", "yes"),
        ("Yes please.", "yes"),
        ("Yeah, actually.", "yes"),
        ("Yes, one more thing.", "yes"),
        ("Yes, one more thing about delivery.", None),  # its request is decided as words
        ("Okay, bye.", None),  # a goodbye: small talk
        ("Yes, where is my order?", None),  # a request of its own
        ("No, I want to ask about returns.", None),
        ("No thanks, but where is my order?", None),
        ("Thanks.", None),  # thanks again, no answer to the question
        ("", None),
    ],
)
def test_reading_a_reply_to_anything_else(text: str, answer: str | None) -> None:
    assert read_more(text) == answer


@pytest.mark.parametrize(
    ("text", "more"),
    [
        ("Yes, one more thing.", True),
        ("Yes, I have something else.", True),
        ("No, I have another question.", True),
        ("Hold on.", True),
        ("No, wait.", True),
        ("Yes.", False),
        ("Yes please.", False),
        ("No.", False),
        ("No, nothing else.", False),
        # A request of its own is decided as one.
        ("Wait, what time do you open?", False),
        ("Yes, one more thing, where is my order?", False),
    ],
)
def test_words_of_a_caller_with_more_to_say(text: str, more: bool) -> None:
    assert goes_on(text) is more


@pytest.mark.parametrize(
    ("text", "done"),
    [
        ("That's it for now, thanks.", True),
        ("No, that's all.", True),
        ("Nothing else, thank you.", True),
        # As often the reply to "How are you?".
        ("I'm fine, thanks.", False),
        ("I'm good.", False),
        # A request of its own.
        ("That's it, where is my order?", False),
        ("No.", False),
    ],
)
def test_words_that_say_the_caller_is_done_with_nothing_asked(text: str, done: bool) -> None:
    assert says_done(text) is done


def test_an_answer_that_asks_for_more() -> None:
    assert asks_for_more("You're welcome. Is there anything else I can help with?")
    assert asks_for_more("Done. Can I help you with anything else today?")
    assert not asks_for_more("Is there anything else? We close at six.")  # not its end
    assert not asks_for_more("I can put you through to a colleague if you like.")


def test_the_question_is_the_operators_or_made_from_the_topic() -> None:
    written = IntentConfig(
        name="order", examples=["Track my order."], answer="a", confirm="Is it about an order?"
    )
    assert confirm_question(written) == "Is it about an order?"
    examples = ["Track my order.", "Where is my order?"]
    made = IntentConfig(name="order", examples=examples, answer="a")
    assert confirm_question(made) == "Is this about your order?"
    topic = made.model_copy(update={"topic": "where your parcel is"})
    assert confirm_question(topic) == "Is this about where your parcel is?"


def test_a_near_miss_is_asked_about_and_a_far_one_is_not() -> None:
    index = IntentIndex([ORDER, HOURS])
    sure = index.semantic(unit(1.0, 0.1), RULE)
    assert sure.route == "semantic" and sure.intent == "order"
    unsure = index.semantic(unit(1.0, 0.0, 1.2), RULE)  # similarity ~0.64: below 0.8
    assert unsure.route == "confirm" and unsure.intent is None and unsure.best == "order"
    assert unsure.reason == "below threshold"
    far = index.semantic(unit(1.0, 0.0, 3.0), RULE)  # ~0.32
    assert far.route == "none" and far.reason == "below threshold"
    never = RULE.model_copy(update={"confirm_threshold": 0.0})
    assert index.semantic(unit(1.0, 0.0, 1.2), never).route == "none"


def test_a_background_line_nearer_than_the_intent_vetoes_answer_and_question() -> None:
    background = np.stack([unit(1.0, 0.0, 0.0, 2.0)])  # a common request near "order"
    index = IntentIndex([ORDER, HOURS], background)
    # Nearer to the background line than to the intent: neither answered nor asked.
    vetoed = index.semantic(unit(1.0, 0.0, 0.0, 1.1), RULE)
    assert vetoed.route == "none" and vetoed.reason == "background closer"
    assert vetoed.background_score > vetoed.similarity
    # Sure of the intent, but leading the background line by less than 0.1: asked.
    close = index.semantic(unit(1.0, 0.0, 0.0, 0.6), RULE)
    assert close.score >= RULE.threshold
    assert close.route == "confirm" and close.reason == "background closer"


def test_a_negative_example_vetoes_the_question_too() -> None:
    order = IntentVectors("order", ("where is my order",), ("cancel my order",), E[[0]], E[[2]])
    index = IntentIndex([order, HOURS])
    found = index.semantic(unit(1.0, 0.0, 1.0), RULE)
    assert found.route == "none" and found.reason == "negative example closer"
    assert not found.ask_if_unanswered  # not sure enough for a hit either


def test_a_hit_vetoed_by_a_negative_is_worth_a_question_if_nothing_else_answers() -> None:
    order = IntentVectors("order", ("where is my order",), ("cancel my order",), E[[0]], E[[2]])
    index = IntentIndex([order, HOURS])
    found = index.semantic(unit(1.0, 0.0, 0.7), RULE)  # 0.82 to "order", 0.57 to its negative
    assert found.score >= RULE.threshold and found.negative_score > 0.5
    veto = RULE.model_copy(update={"negative_margin": 0.3})
    found = index.semantic(unit(1.0, 0.0, 0.7), veto)
    assert (found.route, found.reason) == ("none", "negative example closer")
    assert found.ask_if_unanswered and found.best == "order"


def test_fit_raises_the_threshold_above_a_background_line_it_would_answer() -> None:
    lines = ["tell me a joke", "where is my parcel", "is it raining"]
    raining_vector = unit(0.9, 0.0, 0.0, 0.0, 0.0, 1.0)
    vectors = np.stack([unit(0.0, 0.0, 0.0, 0.0, 1.0), unit(1.0, 0.2), raining_vector])
    loose = RULE.model_copy(
        update={"threshold": 0.5, "background_margin": 0.0, "confirm_threshold": 0.0}
    )
    # Two examples 0.96 alike (each one's score to the intent held out).
    order = IntentVectors(
        "order",
        ("where is my order", "track my order"),
        (),
        np.stack([E[0], unit(1.0, 0.0, 0.0, 0.0, 0.3)]),
        no_negatives(),
    )
    fitted = fit([order, HOURS], lines, vectors, loose)
    # "where is my parcel" scores 0.98 to "order", as near as its own examples are to each
    # other, and nearer to it than to any other line: in scope, left out.
    assert fitted.left_out == ("where is my parcel",)
    assert fitted.background_texts == ("tell me a joke", "is it raining")
    # "is it raining" (0.67 to "order", far from "tell me a joke") would be answered: that
    # intent's threshold goes just above it (not the other intent's, nor the rule's), and
    # the operator is told which line did it.
    raining = float(raining_vector @ E[0])
    assert fitted.thresholds == {"order": pytest.approx(raining + 0.02)}
    assert fitted.rule.threshold == 0.5
    raised = [w for w in fitted.warnings if w.kind == "raised"]
    assert len(raised) == 1 and "is it raining" in raised[0].message
    assert raised[0].intent == "order"
    # The line said by a caller, held to the other line as at load: below that threshold.
    index = IntentIndex([order, HOURS], fitted.background[:1], fitted.thresholds)
    said = index.semantic(raining_vector, loose)
    assert (said.best, said.route, said.reason) == ("order", "none", "below threshold")
    kept = fit([order, HOURS], lines, vectors, loose, raise_threshold=False)
    assert kept.rule.threshold == 0.5 and not kept.thresholds


def test_fit_warns_about_thin_intents_and_examples_nearer_to_another_intent() -> None:
    order = IntentVectors(
        "order",
        ("where is my order", "track my parcel", "opening times of the depot"),
        (),
        np.stack([E[0], unit(1.0, 0.3), unit(0.2, 1.0)]),
        no_negatives(),
    )
    hours = IntentVectors(
        "hours",
        tuple(f"hours {n}" for n in range(5)),
        (),
        np.stack([unit(0.0, 1.0, 0.1 * n) for n in range(5)]),
        no_negatives(),
    )
    fitted = fit([order, hours], [], np.zeros((0, 6), np.float32), RULE)
    kinds = {(w.intent, w.kind) for w in fitted.warnings}
    assert ("order", "thin") in kinds and ("hours", "thin") not in kinds
    close = [w for w in fitted.warnings if w.kind == "close"]
    assert len(close) == 1 and "opening times of the depot" in close[0].message


class TableEmbedder(Embedder):
    """Each known text to its unit vector; anything else far from every intent."""

    def __init__(self, table: dict[str, npt.NDArray[np.float32]]) -> None:
        super().__init__(timeout_s=2.0, retries=0, name="table")
        self.table = table

    @property
    def description(self) -> str:
        return "table-6"

    def _load(self) -> None:
        self.dim = 6

    def _embed_impl(self, texts: list[str]) -> npt.NDArray[np.float32]:
        return np.stack([self.table.get(t, E[5]) for t in texts])


OFFER = "I am not sure about that. I can put you through to a colleague if you like."


async def asking_router(*, knowledge: bool = False) -> tuple[Router, Collector]:
    """The router of a call whose intents are these two (and, with ``knowledge``, a
    knowledge base with no entry for these words)."""
    table = {
        "Where is my order?": E[0],
        "Talk to a person.": E[3],
        "Is my parcel somewhere?": unit(1.0, 0.0, 1.2),  # ~0.64 to "order"
        "Could a human help?": unit(0.0, 0.0, 1.2, 1.0),  # ~0.64 to "person"
        # 0.89 to "order", and 0.91 to its negative "Where do I send it back?".
        "Where is my order going back?": unit(1.0, 0.0, 0.0, 0.0, 0.5),
        "Where do I send it back?": unit(0.8, 0.0, 0.0, 0.0, 1.0),
    }
    embedder, tts = TableEmbedder(table), ToneTTS()
    await embedder.load()
    await tts.load()
    cache = IntentCache(MemoryStore(), embedder, tts, voice="tone")
    intents = [
        IntentConfig(
            name="order_status",
            examples=["Where is my order?"],
            negatives=["Where do I send it back?"],
            answer="It ships today.",
            confirm="Do you want to know where your order is?",
        ),
        IntentConfig(
            name="talk_to_person",
            examples=["Talk to a person."],
            answer="Putting you through.",
            action="transfer",
            transfer_to="sip:agents@127.0.0.1:5070",
        ),
    ]
    matching = IntentMatchingConfig(
        top_k=1, threshold=0.8, action_threshold=0.8, background=False, confirm_threshold=0.5
    )
    await cache.publish(intents, matching)
    index = await KnowledgeIndex.build([], embedder) if knowledge else None
    router, out = router_for(cache, offer=OFFER, knowledge=index), Collector()
    router.link(out)
    router.start()
    out.start()
    return router, out


async def say(router: Router, out: Collector, text: str) -> tuple[Turn, list[Frame]]:
    turn = Turn(call_id="c1", transcript=text)
    before = len(out.frames)
    await router.put(Transcript(turn=turn, text=text))
    for _ in range(200):
        got = out.frames[before:]
        if any(isinstance(f, ResponseDone | Transcript) for f in got):
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.02)  # an action follows its ResponseDone
    return turn, [f for f in out.frames[before:] if isinstance(f, DataFrame)]


async def press(router: Router, out: Collector, digit: str) -> list[Frame]:
    before = len(out.frames)
    await router.put(DtmfIn(digit=digit, duration_ms=100, at=0.0))
    for _ in range(200):
        if any(isinstance(f, ResponseDone | Transcript) for f in out.frames[before:]):
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.02)
    return out.frames[before:]


async def test_the_question_may_be_answered_on_the_keypad() -> None:
    router, out = await asking_router()
    await say(router, out, "Could a human help?")
    assert router.confirming()
    frames = await press(router, out, "1")
    assert [f.text for f in frames if isinstance(f, PlayAudio)] == ["Putting you through."]
    assert [f.action for f in frames if isinstance(f, CallAction)] == ["transfer"]
    done = [f for f in frames if isinstance(f, ResponseDone)]
    assert len(done) == 1 and done[0].turn.route == "confirmed"
    assert done[0].turn.intent == "talk_to_person" and not router.confirming()
    # 2 is a no: the first question goes on to be answered as said.
    await say(router, out, "Is my parcel somewhere?")
    frames = await press(router, out, "2")
    assert [f.text for f in frames if isinstance(f, Transcript)] == ["Is my parcel somewhere?"]
    assert not any(isinstance(f, PlayAudio) for f in frames)
    # With no question waiting, a key is passed on untouched.
    frames = await press(router, out, "1")
    assert [type(f) for f in frames] == [DtmfIn]


async def test_the_honest_fallbacks_offer_is_not_answered_by_a_key() -> None:
    router, out = await asking_router()
    unknown, _ = await say(router, out, "Do you sell bicycles?")
    unknown.answer = OFFER
    # The offer becomes a question only when the caller's next words are read.
    assert not router.confirming()


async def test_a_yes_plays_the_answer_the_question_was_about() -> None:
    router, out = await asking_router()
    turn, frames = await say(router, out, "Is my parcel somewhere?")
    assert turn.route == "confirm" and turn.intent == "order_status"
    played = [f.text for f in frames if isinstance(f, PlayAudio)]
    assert played == ["Do you want to know where your order is?"]
    turn, frames = await say(router, out, "Yes, please.")
    assert turn.route == "confirmed" and turn.intent == "order_status"
    assert [f.text for f in frames if isinstance(f, PlayAudio)] == ["It ships today."]


async def test_a_no_sends_the_first_question_on_and_a_new_request_is_matched_afresh() -> None:
    router, out = await asking_router()
    await say(router, out, "Is my parcel somewhere?")
    turn, frames = await say(router, out, "No.")
    assert turn.route == "none"  # for the Responder to answer
    assert [f.text for f in frames if isinstance(f, Transcript)] == ["Is my parcel somewhere?"]
    await say(router, out, "Is my parcel somewhere?")
    turn, frames = await say(router, out, "Where is my order?")
    assert turn.route == "exact" and turn.intent == "order_status"
    # Asked once only: a later "yes" is a new request, not an answer.
    turn, frames = await say(router, out, "Yes.")
    assert turn.route == "none"
    assert [f.text for f in frames if isinstance(f, Transcript)] == ["Yes."]


async def test_a_transfer_is_asked_about_and_carried_out_only_on_a_yes() -> None:
    router, out = await asking_router()
    turn, frames = await say(router, out, "Could a human help?")
    assert turn.route == "confirm" and not any(isinstance(f, CallAction) for f in frames)
    assert [f.text for f in frames if isinstance(f, PlayAudio)] == [
        "Is this about talking to a person?"
    ]
    turn, frames = await say(router, out, "Yes.")
    actions = [f for f in frames if isinstance(f, CallAction)]
    assert turn.route == "confirmed" and [a.action for a in actions] == ["transfer"]


async def test_a_yes_to_the_honest_fallbacks_offer_puts_the_caller_through() -> None:
    router, out = await asking_router()
    unknown, _ = await say(router, out, "Do you sell bicycles?")
    unknown.answer = OFFER  # what the Responder said, downstream
    turn, frames = await say(router, out, "Yes please.")
    assert turn.route == "confirmed" and turn.intent == "talk_to_person"
    assert [f.text for f in frames if isinstance(f, PlayAudio)] == ["Putting you through."]
    assert [f.action for f in frames if isinstance(f, CallAction)] == ["transfer"]


async def test_an_intent_held_back_by_its_negative_is_asked_about_when_nothing_answers() -> None:
    router, out = await asking_router(knowledge=True)
    turn, frames = await say(router, out, "Where is my order going back?")
    # The knowledge base has nothing for the words: the intent is asked about.
    assert (turn.route, turn.intent) == ("confirm", "order_status")
    assert [f.text for f in frames if isinstance(f, PlayAudio)] == [
        "Do you want to know where your order is?"
    ]
    assert turn.decision is not None and turn.decision.why.startswith("no_entry: held back")
    assert router.confirming()
    turn, frames = await say(router, out, "Yes.")
    assert turn.route == "confirmed" and turn.intent == "order_status"
    assert [f.text for f in frames if isinstance(f, PlayAudio)] == ["It ships today."]
    # Asked once in a call: the same words later get the honest "not sure".
    _, frames = await say(router, out, "Where is my order going back?")
    sent = [f for f in frames if isinstance(f, Transcript)]
    assert [f.text for f in sent] == ["Where is my order going back?"]
    assert sent[0].decision is not None and sent[0].decision.kind == "unsure"

    # A no sends the first words on again, decided without the intent: "not sure".
    router, out = await asking_router(knowledge=True)
    await say(router, out, "Where is my order going back?")
    turn, frames = await say(router, out, "No.")
    sent = [f for f in frames if isinstance(f, Transcript)]
    assert [f.text for f in sent] == ["Where is my order going back?"]
    assert sent[0].decision is not None and sent[0].decision.kind == "unsure"
    assert not router.confirming()

    # Without a knowledge base the model answers them: no question.
    router, out = await asking_router()
    turn, frames = await say(router, out, "Where is my order going back?")
    assert [f.text for f in frames if isinstance(f, Transcript)] == [
        "Where is my order going back?"
    ]
    assert turn.decision is not None and turn.decision.kind == "generate"
    assert not router.confirming()


async def test_a_question_is_asked_once_in_a_call() -> None:
    router, out = await asking_router()
    turn, _ = await say(router, out, "Is my parcel somewhere?")
    assert turn.route == "confirm"
    await say(router, out, "Yes.")
    turn, frames = await say(router, out, "Is my parcel somewhere?")
    assert turn.route == "none" and not any(isinstance(f, PlayAudio) for f in frames)
    assert [f.text for f in frames if isinstance(f, Transcript)] == ["Is my parcel somewhere?"]


async def test_a_no_to_the_offer_is_passed_on_as_said() -> None:
    router, out = await asking_router()
    unknown, _ = await say(router, out, "Do you sell bicycles?")
    unknown.answer = OFFER
    turn, frames = await say(router, out, "No.")
    assert turn.route == "none"
    assert [f.text for f in frames if isinstance(f, Transcript)] == ["No."]
