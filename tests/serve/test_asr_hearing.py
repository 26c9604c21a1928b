"""What the recognizer hears by (a vocabulary: ``serve.asr.Vocabulary``), what it gives
(other readings), and one copy of what was said: the interface with fakes, the prompt's
budget, and Whisper tiny.en on recorded turns."""

from __future__ import annotations

import dataclasses
import json
import pickle
import re
from pathlib import Path

import pytest
import pytest_asyncio

from serve.asr import ASR, NO_VOCABULARY, Transcription, Vocabulary
from serve.asr_whisper import (
    MAX_PROMPT_TOKENS,
    PROMPT_TOKENS,
    WhisperASR,
    prompt_text,
    without_repeats,
)
from serve.scale.batching import in_one_pass_each
from testkit.voices import read_wav
from tests.serve.fakes import FakeASR

CORPUS = Path(__file__).parent.parent / "corpus" / "asr"
RATE = 8000
VOCABULARY = Vocabulary(
    phrases=("Do you ship to Germany?", "Can I pay with PayPal?", "Where is my order?"),
    hotwords=("PayPal", "Germany", "voucher"),
)


class HearingASR(ASR):
    """Says which vocabulary and how many other readings each request came with."""

    def __init__(self) -> None:
        super().__init__(name="hearing")
        self.heard: list[tuple[Vocabulary, int]] = []

    def _load(self) -> None:
        pass

    def _transcribe_impl(self, pcm: bytes, sample_rate: int) -> Transcription:
        return self._transcribe_with_impl(pcm, sample_rate, NO_VOCABULARY, 0)

    def _transcribe_with_impl(
        self, pcm: bytes, sample_rate: int, vocabulary: Vocabulary, alternatives: int
    ) -> Transcription:
        self.heard.append((vocabulary, alternatives))
        return Transcription("ok", 1.0, 10.0, 0.0)


def test_a_vocabulary_is_plain_data() -> None:
    # What a node sends the Ray tier with each request: no state, pickled or as JSON.
    assert pickle.loads(pickle.dumps(VOCABULARY)) == VOCABULARY
    as_json = json.loads(json.dumps(dataclasses.asdict(VOCABULARY)))
    assert Vocabulary(**{k: tuple(v) for k, v in as_json.items()}) == VOCABULARY
    assert hash(VOCABULARY) == hash(Vocabulary(VOCABULARY.phrases, VOCABULARY.hotwords))
    assert not Vocabulary()
    assert VOCABULARY


async def test_the_vocabulary_reaches_the_recognizer() -> None:
    asr = HearingASR()
    await asr.load()
    pcm = bytes(2 * RATE // 10)
    await asr.transcribe(pcm, RATE, vocabulary=VOCABULARY)
    await asr.transcribe(pcm, RATE, alternatives=2)
    await asr.transcribe_batch([(pcm, RATE), (pcm, RATE)], vocabulary=VOCABULARY)
    assert asr.heard == [(VOCABULARY, 0), (NO_VOCABULARY, 2), (VOCABULARY, 0), (VOCABULARY, 0)]


async def test_a_recognizer_that_cannot_be_biased_hears_as_it_is() -> None:
    asr = FakeASR()
    await asr.load()
    heard = await asr.transcribe(bytes(1600), RATE, vocabulary=VOCABULARY, alternatives=3)
    assert heard.text == "ok"
    assert heard.alternatives == ()
    assert [t.text for t in await asr.transcribe_batch([(bytes(1600), RATE)])] == ["ok"]


async def test_a_batch_of_several_vocabularies_is_decoded_once_per_vocabulary() -> None:
    other = Vocabulary(phrases=("Is the dentist open on Saturday?",))
    requests = [("a", VOCABULARY), ("b", other), ("c", VOCABULARY)]
    passes: list[tuple[Vocabulary, list[str]]] = []

    async def run(vocabulary: Vocabulary, batch: list[tuple[str, Vocabulary]]) -> list[str]:
        passes.append((vocabulary, [name for name, _ in batch]))
        return [name.upper() for name, _ in batch]

    results = await in_one_pass_each(requests, lambda request: request[1], run)
    assert results == ["A", "B", "C"]
    assert passes == [(VOCABULARY, ["a", "c"]), (other, ["b"])]


def _tokens(text: str) -> int:
    """A stand-in tokenizer: a token per word."""
    return len(text.split())


def test_the_prompt_keeps_to_its_budget_in_whole_phrases() -> None:
    vocabulary = Vocabulary(
        phrases=(
            "Do you ship to Germany?",  # 5
            "Can I get it shipped to Hong Kong or somewhere further away?",  # 12
            "Where is my order?",  # 4
        ),
        hotwords=("PayPal", "Germany", "voucher", "Mastercard"),
    )
    # The phrases that fit, in order; one that does not fit is left for a shorter one
    # after it. No list of words before them: tiny.en heard worse with one.
    assert prompt_text(vocabulary, _tokens, 16) == "Do you ship to Germany? Where is my order?"
    # Given a share, the hotwords first, in at most that share of the budget.
    text = prompt_text(vocabulary, _tokens, 16, hotword_share=0.25)
    assert text == (
        "PayPal, Germany, voucher, Mastercard. Do you ship to Germany? Where is my order?"
    )
    assert _tokens(text) <= 16
    assert prompt_text(vocabulary, _tokens, 8, 0.25) == "PayPal, Germany. Do you ship to Germany?"
    assert prompt_text(Vocabulary(), _tokens, 100) == ""


@pytest.mark.parametrize(
    ("heard", "kept"),
    [
        # Said again with words heard otherwise, the pause's pass on the fitted window.
        ("Do you do free returns? DO YOU DO YOU do free return!", "Do you do free returns?"),
        ("What's your that number? What's you're that number. WHAT", "What's your that number?"),
        ("You you help missed cards. Do you help miss cards?", "You you help missed cards."),
        ("Thanks, that's everything... ... TH- ... ...", "Thanks, that's everything..."),
        ("Where do I find my order number? WHERE", "Where do I find my order number?"),
        # Misspelt the second time; and a turn of two sentences said twice.
        ("How much is shipping? How much is shiping", "How much is shipping?"),
        (
            "My lamp is broken. Can you help? My lamp is broken. Can you help?",
            "My lamp is broken. Can you help?",
        ),
    ],
)
def test_a_sentence_heard_again_is_kept_once(heard: str, kept: str) -> None:
    assert without_repeats(heard) == (kept, True)


@pytest.mark.parametrize(
    "said",
    [
        "I ordered a coat. I ordered a coat and a hat.",
        "Can I change my address? Can I change the delivery address?",
        "Where is my order? Where is my parcel?",
        "Thanks. Bye.",
        "Hello. Hello, is anyone there?",
        "My lamp is broken. Can you help? I bought it last week.",
        "Do you ship to Canada? Can I pay in dollars?",
    ],
)
def test_a_sentence_that_says_more_stays(said: str) -> None:
    assert without_repeats(said) == (said, False)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def tiny() -> WhisperASR:
    """tiny.en as the bot runs it: a window fitted to the turn, 4 to 10 s, greedy."""
    asr = WhisperASR(window_s=10.0, min_window_s=4.0, cpu_threads=1)
    await asr.load()
    return asr


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if re.search(r"\w", s)]


@pytest.mark.models
@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize(
    ("recording", "said"),
    [
        ("pause_pass_free_returns.wav", "do you do free returns"),
        ("pause_pass_vat_number.wav", "what's your that number"),
    ],
)
async def test_the_pause_s_pass_hears_a_turn_once(
    tiny: WhisperASR, recording: str, said: str
) -> None:
    # Recorded from the call's hearing path: a flite caller's question as the pause's
    # pass transcribed it, cut 100 ms into the pause (8 kHz). Greedy decoding on the
    # fitted window ran past the speech into the padding and said it again ("Do you do
    # free returns? DO YOU DO YOU do free return!"); the turn's transcript was that.
    pcm = read_wav(CORPUS / recording, RATE)
    raw = tiny._model.model.generate  # the decode as it was: its text, not cleaned
    from serve.audio import pcm16_to_float, resample  # noqa: PLC0415

    audio = resample(pcm16_to_float(pcm), RATE, 16000)
    ms = 1000.0 * audio.shape[0] / 16000
    prompt = tiny._model.get_prompt(tiny._tokenizer, [], without_timestamps=True)
    (before,) = raw(
        tiny._encode([audio], tiny._fit_window(ms)),
        [prompt],
        beam_size=1,
        **tiny._decoding(prompt, [ms], prompted=False),
    )
    looped = tiny._tokenizer.decode(before.sequences_ids[0])
    assert len(_sentences(looped)) >= 2, f"the recording no longer loops: {looped!r}"
    heard = await tiny.transcribe(pcm, RATE)
    assert len(_sentences(heard.text)) == 1, heard.text
    assert re.sub(r"[^a-z' ]", "", heard.text.lower()).strip() == said


@pytest.mark.models
@pytest.mark.asyncio(loop_scope="session")
async def test_a_vocabulary_is_read_within_whisper_s_prompt(tiny: WhisperASR) -> None:
    from bot.profile import DEFAULT_PROFILE, load_profile  # noqa: PLC0415
    from bot.vocabulary import vocabulary  # noqa: PLC0415

    words = vocabulary(load_profile(DEFAULT_PROFILE))
    tokens = tiny._prompt(words)
    assert PROMPT_TOKENS - 15 < len(tokens) <= PROMPT_TOKENS
    whole = WhisperASR(window_s=10.0, min_window_s=4.0, prompt_tokens=MAX_PROMPT_TOKENS)
    whole._tokenizer = tiny._tokenizer
    assert MAX_PROMPT_TOKENS - 20 < len(whole._prompt(words)) <= MAX_PROMPT_TOKENS
    text = tiny._tokenizer.decode(tokens)
    assert text.strip().startswith(words.phrases[0])
    # Heard by it, tiny.en decodes on its whole window; without, on one fitted to the turn.
    assert tiny._fit_window(1500.0, tokens) == 10.0
    assert tiny._fit_window(1500.0) == 4.0
    assert tiny._prompt(Vocabulary()) == []
    silent = WhisperASR(window_s=10.0, min_window_s=4.0, prompt_tokens=0)
    assert silent._prompt(words) == []


@pytest.mark.models
@pytest.mark.asyncio(loop_scope="session")
async def test_other_readings_come_scored_and_asked_for_per_request(tiny: WhisperASR) -> None:
    pcm = read_wav(CORPUS / "pause_pass_free_returns.wav", RATE)
    plain = await tiny.transcribe(pcm, RATE)
    assert plain.alternatives == ()
    heard = await tiny.transcribe(pcm, RATE, alternatives=4)
    assert heard.text == plain.text  # the best reading is the greedy one, as without
    # The beams' other words ("Do you do free return?"), each with its score.
    assert 1 <= len(heard.alternatives) <= 4
    assert len(heard.alternative_scores) == len(heard.alternatives)
    assert all(s < 0.0 for s in heard.alternative_scores)
    assert plain.text not in heard.alternatives


def test_the_setting_gives_tiny_en_its_prompt_and_base_none() -> None:
    from serve.asr_twopass import TwoPassASR  # noqa: PLC0415
    from serve.registry import ModelSpec, asr_backends  # noqa: PLC0415

    asr = asr_backends.create("whisper-window+base", ModelSpec())
    assert isinstance(asr, TwoPassASR)
    assert isinstance(asr.first, WhisperASR) and isinstance(asr.second, WhisperASR)
    assert (asr.first.prompt_tokens, asr.second.prompt_tokens) == (PROMPT_TOKENS, 0)
    off = asr_backends.create("whisper-window", ModelSpec(asr_prompt_tokens=0))
    assert isinstance(off, WhisperASR) and off.prompt_tokens == 0
    with pytest.raises(ValueError, match="prompt_tokens"):
        WhisperASR(prompt_tokens=MAX_PROMPT_TOKENS + 1)
