"""Fixed phrases synthesized ahead: a slow or failing synthesizer at start, and a
two-choice question played from its halves."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest

from bot.intents.choice import choice_halves, choice_question, choice_topics
from bot.pipeline.prompts import CLAUSE_PAUSE_MS, PromptAudio
from bot.pipeline.session import fixed_phrases
from bot.profile import DEFAULT_PROFILE, load_profile
from serve import ProviderError
from tests.bot.fakes import ToneTTS

PHRASE = "Thank you for calling."


class StallingTTS(ToneTTS):
    """Takes longer than its timeout for its first ``stalls`` tries (a busy machine)."""

    def __init__(self, stalls: int) -> None:
        super().__init__()
        self.timeout_s = 0.1
        self.stalls = stalls
        self.tries = 0

    def _synthesize_impl(self, text: str, sample_rate: int) -> Iterator[bytes]:
        self.tries += 1
        if self.tries <= self.stalls:
            time.sleep(0.15)  # no first chunk within the timeout
        yield from super()._synthesize_impl(text, sample_rate)


async def test_a_phrase_is_tried_again_when_the_synthesizer_times_out() -> None:
    tts = StallingTTS(stalls=1)
    await tts.load()
    prompts = PromptAudio(8000)
    audio = await prompts.add(tts, PHRASE)
    assert len(audio) == 4 * 100 * 8 * 2  # 4 words, 100 ms of tone each, 8 kHz 16-bit
    assert tts.tries == 2 and prompts.get(PHRASE) == audio


async def test_a_synthesizer_that_never_answers_fails_the_start() -> None:
    tts = StallingTTS(stalls=100)
    await tts.load()
    prompts = PromptAudio(8000)
    with pytest.raises(ProviderError):
        await prompts.add(tts, PHRASE)
    assert tts.tries >= 2 and prompts.find(PHRASE) is None


def silence(ms: int) -> bytes:
    return bytes(2 * 8 * ms)


class TailedTTS(ToneTTS):
    """Tone words followed by 200 ms of silence, as a synthesizer ends a phrase."""

    def _synthesize_impl(self, text: str, sample_rate: int) -> Iterator[bytes]:
        yield from super()._synthesize_impl(text, sample_rate)
        yield silence(200)


async def test_a_two_choice_question_is_played_from_its_halves() -> None:
    tts = TailedTTS()
    await tts.load()
    prompts = PromptAudio(8000)
    first, _ = choice_halves("your refund")
    _, second = choice_halves("opening hours, and holidays")  # a comma of its own
    for text in (first, second):
        await prompts.add(tts, text)
    question = choice_question("your refund", "opening hours, and holidays")
    assert question == "Is this about your refund, or about opening hours, and holidays?"
    # the first half's 200 ms tail cut to 10 ms, then a clause's pause
    pause = silence(10 + CLAUSE_PAUSE_MS)
    assert prompts.find(question) == prompts.get(first)[: -len(silence(200))] + pause + (
        prompts.get(second)
    )
    assert tts.texts == [first, second]  # nothing synthesized for the question itself


async def test_a_phrase_is_joined_only_from_two_ready_halves_and_its_own_audio_goes_first() -> None:
    tts = TailedTTS()
    await tts.load()
    prompts = PromptAudio(8000)
    first, second = choice_halves("returns")[0], choice_halves("gift cards")[1]
    question = choice_question("returns", "gift cards")
    await prompts.add(tts, first)
    assert prompts.find(question) is None  # its second half was never made
    assert prompts.find("Is this about returns, or not?") is None
    await prompts.add(tts, second)
    assert prompts.find(question) is not None
    whole = await prompts.add(tts, question)
    assert prompts.find(question) == whole


async def test_every_two_choice_question_of_the_default_profile_is_ready_at_start() -> None:
    profile = load_profile(DEFAULT_PROFILE)
    tts = ToneTTS()
    await tts.load()
    prompts = PromptAudio(8000)
    for text in fixed_phrases(profile):
        await prompts.add(tts, text)
    pairs = list(itertools.permutations(choice_topics(profile), 2))
    assert len(pairs) >= 400
    missing = [p for p in pairs if prompts.find(choice_question(*p)) is None]
    assert missing == []
