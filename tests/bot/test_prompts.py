"""Fixed phrases synthesized ahead: a slow or failing synthesizer at start."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from bot.pipeline.prompts import PromptAudio
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
