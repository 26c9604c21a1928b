"""The knowledge base: profile entries, and retrieving them for a caller's words."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from pydantic import ValidationError

from bot.knowledge import KnowledgeIndex, Retrieved
from bot.profile import (
    DEFAULT_PROFILE,
    BotProfile,
    KnowledgeConfig,
    KnowledgeEntry,
    ProfileError,
    load_profile,
)
from serve import Embedder

#: Unit directions the table embedder gives its texts; any other text embeds as zeros.
TABLE: dict[str, list[float]] = {
    "when do refunds arrive": [1.0, 0.0, 0.0, 0.0],
    "how long is a refund": [0.0, 1.0, 0.0, 0.0],
    "can i pay with paypal": [0.0, 0.0, 1.0, 0.0],
    "do you price match": [0.0, 0.0, 0.0, 1.0],
    # Cosine ~0.80 to the second refund question, ~0.50 to paypal, ~0.10 to price match.
    "refund question": [0.3, 0.8, 0.5, 0.1],
}


class TableEmbedder(Embedder):
    """Embeds by looking the text up in ``TABLE`` (the base class normalises)."""

    def __init__(self) -> None:
        super().__init__(timeout_s=1.0, retries=0, name="table")
        self.calls: list[list[str]] = []

    def _load(self) -> None:
        self.dim = 4

    def _embed_impl(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.calls.append(texts)
        return np.array([TABLE.get(t, [0.0] * 4) for t in texts], dtype=np.float32)


def entries() -> list[KnowledgeEntry]:
    return [
        KnowledgeEntry(
            topic="refund_time",
            questions=["when do refunds arrive", "how long is a refund"],
            answer="Refunds take 5 to 7 working days.",
        ),
        KnowledgeEntry(
            topic="payment",
            questions=["can i pay with paypal"],
            answer="We take cards and PayPal.",
            keywords=["gift card"],
        ),
        KnowledgeEntry(topic="price_match", questions=["do you price match"], answer="We do not."),
    ]


async def index(**config: float) -> tuple[KnowledgeIndex, TableEmbedder]:
    embedder = TableEmbedder()
    await embedder.load()
    built = await KnowledgeIndex.build(entries(), embedder, KnowledgeConfig.model_validate(config))
    return built, embedder


def topics(found: list[Retrieved]) -> list[str]:
    return [r.entry.topic for r in found]


async def test_entries_come_best_first_scored_by_their_nearest_question() -> None:
    built, embedder = await index(min_score=0.45, max_entries=3)
    assert len(embedder.calls) == 1  # every question in one call
    found = await built.retrieve("refund question")
    assert topics(found) == ["refund_time", "payment"]
    assert found[0].score == pytest.approx(0.8 / np.sqrt(0.99), abs=1e-5)
    assert found[1].score == pytest.approx(0.5 / np.sqrt(0.99), abs=1e-5)
    assert embedder.calls[1:] == [["refund question"]]


async def test_min_score_and_max_entries_bound_what_is_retrieved() -> None:
    built, _ = await index(min_score=0.6, direct_score=0.9)
    assert topics(await built.retrieve("refund question")) == ["refund_time"]
    built, _ = await index(min_score=0.45, max_entries=1)
    assert topics(await built.retrieve("refund question")) == ["refund_time"]
    built, _ = await index(min_score=0.45)
    # A score at min_score is retrieved.
    at = (await built.retrieve("refund question"))[0].score
    built, _ = await index(min_score=at, direct_score=0.9)
    assert topics(await built.retrieve("refund question")) == ["refund_time"]


async def test_hesitations_are_dropped_before_embedding() -> None:
    built, embedder = await index(min_score=0.6)
    assert topics(await built.retrieve("Um, refund question")) == ["refund_time"]
    assert embedder.calls[-1] == ["refund question"]


async def test_no_words_or_no_entries_retrieve_nothing_without_embedding() -> None:
    built, embedder = await index()
    assert await built.retrieve("") == []
    assert await built.retrieve("  um... ") == []
    assert len(embedder.calls) == 1
    empty = await KnowledgeIndex.build([], embedder)
    assert len(empty) == 0
    assert await empty.retrieve("refund question") == []
    assert len(embedder.calls) == 1


async def test_unrelated_words_retrieve_nothing() -> None:
    built, _ = await index()
    assert await built.retrieve("tell me a joke") == []


async def test_a_keyword_said_lifts_its_entry_to_min_score() -> None:
    built, _ = await index(min_score=0.45)
    found = await built.retrieve("Do you sell gift cards?")
    assert topics(found) == ["payment"]
    assert found[0].score == pytest.approx(0.45)
    assert built.direct(found) is None
    assert await built.retrieve("Do you sell giftcards?") == []


async def test_the_answer_is_direct_only_from_direct_score() -> None:
    built, _ = await index(min_score=0.45, direct_score=0.8)
    found = await built.retrieve("refund question")
    entry = built.direct(found)
    assert entry is not None and entry.topic == "refund_time"
    built, _ = await index(min_score=0.45, direct_score=0.81)
    assert built.direct(await built.retrieve("refund question")) is None
    assert built.direct([]) is None


PROFILE = {"name": "t", "greeting": "Hi", "apology": "Sorry", "system_prompt": "Be brief."}

ENTRY = {"topic": "gift_cards", "questions": ["Do you sell gift cards?"], "answer": "Yes."}


def test_topics_must_be_unique() -> None:
    with pytest.raises(ValidationError, match="knowledge topic 'gift_cards' is defined twice"):
        BotProfile.model_validate({**PROFILE, "knowledge": [ENTRY, dict(ENTRY)]})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"questions": []}, "at least 1 item"),
        ({"questions": ["Do you sell gift cards?", " ? "]}, "'gift_cards' has an empty question"),
        ({"keywords": [""]}, "'gift_cards' has an empty keyword"),
        ({"answer": ""}, "at least 1 character"),
        ({"answer": "  "}, "'gift_cards' has a blank answer"),
        ({"topic": "Gift cards"}, "should match pattern"),
        ({"source": "faq"}, "Extra inputs are not permitted"),
    ],
)
def test_an_entry_is_checked(change: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        KnowledgeEntry.model_validate({**ENTRY, **change})


def test_knowledge_matching_is_bounded() -> None:
    with pytest.raises(ValidationError, match="direct_score is below min_score"):
        KnowledgeConfig(min_score=0.6, direct_score=0.5)
    with pytest.raises(ValidationError, match="max_entries"):
        KnowledgeConfig(max_entries=0)
    with pytest.raises(ValidationError, match="extra"):
        KnowledgeConfig.model_validate({"threshold": 0.5})


def test_a_profile_error_names_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        'name = "t"\ngreeting = "Hi"\napology = "Sorry"\nsystem_prompt = "s"\n'
        '[[knowledge]]\ntopic = "warranty"\nquestions = ["Is there a warranty?"]\n'
        'answer = "1 year."\nwhen = "always"\n',
        encoding="utf-8",
    )
    with pytest.raises(ProfileError, match=r"p\.toml: knowledge\.0\.when: Extra inputs"):
        load_profile(path)


def test_the_default_profile_has_spoken_answers() -> None:
    profile = load_profile(DEFAULT_PROFILE)
    assert 12 <= len(profile.knowledge) <= 15
    for entry in profile.knowledge:
        assert 3 <= len(entry.questions) <= 5, entry.topic
        assert not any(mark in entry.answer for mark in ("http", "www", "$", "*", "#", "\n"))
        assert entry.answer.endswith("."), entry.topic


#: Callers' wordings written for this test, not copied from the entries' questions.
PARAPHRASES = [
    ("delivery_time", "How many days does shipping take?"),
    ("po_boxes", "Will you send it to my post office box?"),
    ("refund_time", "How soon will my money come back?"),
    ("refund_time", "You got my return last week, where's my money?"),
    ("payment_methods", "Do you take PayPal?"),
    ("payment_methods", "Do you accept Mastercard?"),
    ("phone_payment", "Can I just read you my card number?"),
    ("gift_cards", "Do you do gift certificates?"),
    ("cancel_order", "I changed my mind, please cancel what I ordered."),
    ("change_order", "I want a different colour for something I ordered."),
    ("warranty", "How long are products guaranteed for?"),
    ("contact_email", "Can I contact you by email?"),
    ("live_chat", "Is there an online chat?"),
    ("price_match", "It's cheaper on Amazon, will you match that?"),
    ("order_confirmation", "I never got an email after ordering."),
]
UNRELATED = [
    "Tell me a joke.",
    "What's the weather like?",
    "Hello, how are you?",
    "What's your name?",
    "Can you sing a song?",
    "Are you a robot?",
    "Do you have the blue dress in stock?",
    "How much is this jacket?",
    "Do you have a store near me?",
    "Okay, thanks.",
]


@pytest.mark.models
async def test_minilm_retrieves_the_default_profiles_entries() -> None:
    from serve.embed_minilm import MiniLMEmbedder  # noqa: PLC0415 - loads torch

    profile = load_profile(DEFAULT_PROFILE)
    embedder = MiniLMEmbedder(timeout_s=30.0)
    await embedder.load()
    built = await KnowledgeIndex.build(profile.knowledge, embedder, profile.knowledge_matching)
    for topic, text in PARAPHRASES:
        found = await built.retrieve(text)
        assert topics(found)[:1] == [topic], (text, [(r.entry.topic, r.score) for r in found])
        direct = built.direct(found)
        assert direct is None or direct.topic == topic, text
    for text in UNRELATED:
        found = await built.retrieve(text)
        assert found == [], (text, [(r.entry.topic, r.score) for r in found])
