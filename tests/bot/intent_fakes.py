"""Boundary fakes for intent-cache tests: a bag-of-words embedder and a small profile."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import numpy.typing as npt

from bot.profile import BotProfile, IntentConfig, IntentMatchingConfig
from serve import Embedder

DIM = 64


class WordsEmbedder(Embedder):
    """Each word hashed to one of 64 dimensions: same words, same direction."""

    def __init__(self) -> None:
        super().__init__(timeout_s=2.0, retries=0, name="words")
        self.calls = 0

    @property
    def description(self) -> str:
        return "words-64"

    def _load(self) -> None:
        self.dim = DIM

    def _embed_impl(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        out = np.zeros((len(texts), DIM), np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z']+", text.lower()):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % DIM] += 1.0
        return out


def intents(order_answer: str = "Your order ships in three days.") -> list[IntentConfig]:
    return [
        IntentConfig(
            name="order_status",
            examples=["where is my order", "has my order shipped", "track my parcel"],
            negatives=["cancel my order"],
            answer=order_answer,
        ),
        IntentConfig(
            name="opening_hours",
            examples=["when are you open", "what are your opening hours"],
            answer="We are open nine to five.",
        ),
        IntentConfig(
            name="talk_to_person",
            examples=["talk to a person", "speak to an agent"],
            answer="I will put you through.",
            action="transfer",
            transfer_to="sip:agents@127.0.0.1:5070",
        ),
    ]


#: The rule these tests were written for: no background lines nor stock phrasings (the
#: bag-of-words embedder makes them noise), no confirmation questions and no stricter score
#: for actions.
MATCHING = IntentMatchingConfig(
    top_k=1,
    threshold=0.6,
    margin=0.1,
    negative_margin=0.0,
    action_threshold=0.0,
    background=False,
    stock_phrasings=False,
    confirm_threshold=0.0,
)


def profile(order_answer: str = "Your order ships in three days.") -> BotProfile:
    return BotProfile(
        name="t",
        greeting="Hello there caller",
        apology="Sorry about that",
        system_prompt="Be brief.",
        intents=intents(order_answer),
        intent_matching=MATCHING,
    )
