"""The provider base class: threads, timeouts, retries, error wrapping, timings, metrics."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from contextlib import aclosing
from typing import TypeVar

import numpy as np
import numpy.typing as npt
import pytest

from serve import (
    ChatMessage,
    Provider,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    StageTimings,
)
from serve.base import unhurried
from tests.serve.fakes import LOUD_10MS, FakeASR, FakeEmbedder, FakeLLM, FakeTTS, FakeVAD

PCM = bytes(3200)  # 100 ms at 16 kHz
PROMPT = [ChatMessage("system", "be brief"), ChatMessage("user", "hello")]


P = TypeVar("P", bound=Provider)


async def loaded(provider: P) -> P:
    await provider.load()
    return provider


async def settle(asr: FakeASR) -> None:
    """Wait for abandoned (timed-out) worker threads, so that later tests find the pool free."""
    assert await asyncio.to_thread(asr.idle.wait, 10.0)


async def test_call_before_load_is_unavailable() -> None:
    asr = FakeASR()
    with pytest.raises(ProviderUnavailable, match="not loaded"):
        await asr.transcribe(PCM, 16000)
    assert asr.calls == 0


async def test_load_logs_and_sets_loaded(caplog: pytest.LogCaptureFixture) -> None:
    asr = FakeASR()
    with caplog.at_level(logging.INFO, logger="serve.base"):
        await asr.load()
    assert asr.loaded
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == "loading fake-asr..."
    assert messages[1].startswith("loaded fake-asr in ") and messages[1].endswith("s")


async def test_load_failure_is_unavailable() -> None:
    class Broken(FakeASR):
        def _load(self) -> None:
            raise OSError("weights missing")

    asr = Broken()
    with pytest.raises(ProviderUnavailable, match="weights missing"):
        await asr.load()
    assert not asr.loaded


async def test_invalid_pcm_is_a_caller_error() -> None:
    asr = await loaded(FakeASR())
    with pytest.raises(ValueError, match="even number of bytes"):
        await asr.transcribe(b"\x00", 8000)
    assert asr.calls == 0


async def test_timeout_raises_provider_timeout() -> None:
    asr = await loaded(FakeASR(delays_s=[1.5], timeout_s=0.05, retries=0))
    started = time.monotonic()
    with pytest.raises(ProviderTimeout, match=r"timed out after 0\.05s") as caught:
        await asr.transcribe(PCM, 16000)
    assert time.monotonic() - started < 0.75  # the 1.5 s call was not waited for
    assert caught.value.retryable
    m = asr.metrics()
    assert (m["count"], m["timeouts"], m["errors"], m["retries"]) == (1, 1, 1, 0)
    await settle(asr)


async def test_timeout_is_retried_once() -> None:
    asr = await loaded(FakeASR(delays_s=[0.3, 0.0], timeout_s=0.1, retries=1))
    result = await asr.transcribe(PCM, 16000)
    assert result.text == "ok"
    assert asr.calls == 2
    m = asr.metrics()
    assert (m["count"], m["timeouts"], m["errors"], m["retries"]) == (1, 1, 0, 1)
    await settle(asr)


async def test_retryable_error_retried_once_then_succeeds() -> None:
    asr = await loaded(FakeASR(failures=[ProviderError("busy", retryable=True)]))
    result = await asr.transcribe(PCM, 16000)
    assert result.text == "ok"
    assert asr.calls == 2
    assert asr.metrics()["retries"] == 1
    assert asr.metrics()["errors"] == 0


async def test_retryable_error_gives_up_after_retries() -> None:
    busy = [ProviderError("busy", retryable=True), ProviderError("still busy", retryable=True)]
    asr = await loaded(FakeASR(failures=busy, retries=1))
    with pytest.raises(ProviderError, match="still busy"):
        await asr.transcribe(PCM, 16000)
    assert asr.calls == 2
    assert asr.metrics()["errors"] == 1


async def test_library_error_is_wrapped_and_not_retried() -> None:
    asr = await loaded(FakeASR(failures=[RuntimeError("bad tensor shape")]))
    with pytest.raises(ProviderError, match="fake-asr failed") as caught:
        await asr.transcribe(PCM, 16000)
    assert not caught.value.retryable
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert asr.calls == 1
    assert asr.metrics()["errors"] == 1


async def test_non_retryable_provider_error_not_retried() -> None:
    asr = await loaded(FakeASR(failures=[ProviderUnavailable("gone")]))
    with pytest.raises(ProviderUnavailable, match="gone"):
        await asr.transcribe(PCM, 16000)
    assert asr.calls == 1


async def test_timings_and_metrics_recorded() -> None:
    asr = await loaded(FakeASR(delays_s=[0.03, 0.0, 0.0]))
    timings = StageTimings()
    timings.mark("speech_end", at=1.5)
    result = await asr.transcribe(PCM, 16000, timings=timings)
    assert result.audio_ms == pytest.approx(100.0)
    assert timings.marks == {"speech_end": 1.5}
    assert 25.0 <= timings.durations_ms["asr"] < 1000.0
    await asr.transcribe(PCM, 16000)
    await asr.transcribe(PCM, 16000)
    m = asr.metrics()
    assert m["count"] == 3
    assert m["errors"] == 0
    assert 0.0 < m["last_ms"] < m["ewma_ms"]  # the first, slow call still weighs on the ewma


async def test_blocking_work_leaves_the_event_loop_free() -> None:
    asr = await loaded(FakeASR(delays_s=[0.2]))
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    await asr.transcribe(PCM, 16000)
    task.cancel()
    assert ticks >= 10


async def test_thread_unsafe_provider_runs_one_call_at_a_time() -> None:
    safe = await loaded(FakeASR(delays_s=[0.1, 0.1]))
    await asyncio.gather(safe.transcribe(PCM, 16000), safe.transcribe(PCM, 16000))
    assert safe.max_running == 2
    unsafe = await loaded(FakeASR(delays_s=[0.1, 0.1], thread_safe=False))
    await asyncio.gather(unsafe.transcribe(PCM, 16000), unsafe.transcribe(PCM, 16000))
    assert unsafe.max_running == 1


async def test_a_provider_thread_can_yield_the_cpu_to_speech_work() -> None:
    base = os.getpriority(os.PRIO_PROCESS, 0)
    polite = FakeASR(thread_safe=False)
    polite.thread_nice = 7
    await loaded(polite)
    await polite.transcribe(PCM, 16000)
    assert polite.niceness == min(19, base + 7)
    shared = await loaded(FakeASR())
    await shared.transcribe(PCM, 16000)
    assert shared.niceness == base  # the shared pool keeps the process's niceness


async def test_llm_stream_yields_pieces_and_records_timings() -> None:
    llm = await loaded(FakeLLM(tokens=4, first_token_s=0.03))
    timings = StageTimings()
    pieces = [p async for p in llm.stream(PROMPT, timings=timings)]
    assert pieces == ["t0", "t1", "t2", "t3"]
    assert llm.prompts == [tuple(PROMPT)]
    assert 25.0 <= timings.durations_ms["llm_first_token"] <= timings.durations_ms["llm_total"]
    assert llm.metrics()["count"] == 1


async def test_llm_stream_respects_max_tokens() -> None:
    llm = await loaded(FakeLLM(tokens=10))
    assert [p async for p in llm.stream(PROMPT, max_tokens=2)] == ["t0", "t1"]


async def test_llm_stream_validates_arguments_eagerly() -> None:
    llm = await loaded(FakeLLM())
    with pytest.raises(ValueError, match="empty"):
        llm.stream([])
    with pytest.raises(ValueError, match="max_tokens"):
        llm.stream(PROMPT, max_tokens=0)


async def test_llm_aclose_stops_generation_within_a_token() -> None:
    llm = await loaded(FakeLLM(tokens=1000, token_s=0.02))
    async with aclosing(llm.stream(PROMPT)) as stream:
        seen = [await anext(stream) for _ in range(3)]
    assert seen == ["t0", "t1", "t2"]
    assert await asyncio.to_thread(llm.stopped.wait, 0.2)
    # The worker may finish the token it was computing when told to stop, and no more.
    assert llm.produced <= len(seen) + 1


async def test_llm_task_cancel_stops_generation() -> None:
    llm = await loaded(FakeLLM(tokens=1000, token_s=0.02))
    seen: list[str] = []
    three = asyncio.Event()

    async def consume() -> None:
        async for piece in llm.stream(PROMPT):
            seen.append(piece)
            if len(seen) == 3:
                three.set()

    task = asyncio.create_task(consume())
    await three.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(llm.stopped.wait, 0.2)
    assert llm.produced <= len(seen) + 1


async def test_llm_first_token_timeout_retried_then_raises() -> None:
    llm = await loaded(FakeLLM(first_token_s=0.3, timeout_s=0.05, retries=1))
    with pytest.raises(ProviderTimeout):
        async for _ in llm.stream(PROMPT):
            pass
    m = llm.metrics()
    assert (m["timeouts"], m["retries"], m["errors"]) == (2, 1, 1)
    # The abandoned workers see the stop event after their first token and make no more.
    await asyncio.sleep(0.4)
    assert llm.produced <= 2


async def test_llm_error_before_first_token_is_retried() -> None:
    llm = await loaded(FakeLLM(tokens=2, failures=[ProviderError("overloaded", retryable=True)]))
    assert [p async for p in llm.stream(PROMPT)] == ["t0", "t1"]
    assert llm.calls == 2


async def test_llm_error_mid_stream_is_wrapped_and_not_retried() -> None:
    llm = await loaded(FakeLLM(tokens=5, fail_after=2))
    seen: list[str] = []
    with pytest.raises(ProviderError, match="generation broke"):
        async for piece in llm.stream(PROMPT):
            seen.append(piece)
    assert seen == ["t0", "t1"]
    assert llm.calls == 1
    assert llm.metrics()["errors"] == 1


async def test_llm_stream_that_stops_mid_answer_fails_within_the_timeout() -> None:
    # A token 0.5 s after the one before, where a try is bound to 0.1 s: the stream fails
    # after the first token instead of waiting on (the caller would hear a silence).
    llm = await loaded(FakeLLM(tokens=5, token_s=0.5, timeout_s=0.1, retries=1))
    seen: list[str] = []
    with pytest.raises(ProviderTimeout, match="stalled"):
        async for piece in llm.stream(PROMPT):
            seen.append(piece)
    assert seen == ["t0"]
    assert llm.calls == 1  # not retried: part of the answer was out
    m = llm.metrics()
    assert (m["timeouts"], m["errors"], m["retries"]) == (1, 1, 0)
    assert await asyncio.to_thread(llm.stopped.wait, 2.0)  # the worker was told to stop


async def test_llm_warmup_resets_metrics() -> None:
    llm = await loaded(FakeLLM())
    await llm.warmup()
    assert llm.calls == 1
    assert llm.metrics()["count"] == 0


async def test_tts_stream_and_empty_text() -> None:
    tts = await loaded(FakeTTS())
    timings = StageTimings()
    chunks = [c async for c in tts.synthesize("two words", sample_rate=8000, timings=timings)]
    assert chunks == [LOUD_10MS, LOUD_10MS]
    assert {"tts_first_chunk", "tts_total"} <= timings.durations_ms.keys()
    assert [c async for c in tts.synthesize("")] == []


async def test_embedder_normalises_rows() -> None:
    embedder = await loaded(FakeEmbedder())
    vectors = await embedder.embed(["a", "abcd"])
    assert vectors.dtype == np.float32
    assert vectors.shape == (2, 3)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    empty = await embedder.embed([])
    assert empty.shape == (0, 3)


async def test_vad_streams_are_independent_and_rates_checked() -> None:
    vad = FakeVAD()
    with pytest.raises(ProviderUnavailable):
        vad.create_stream(8000)
    await vad.load()
    with pytest.raises(ValueError, match="sample rates"):
        vad.create_stream(44100)
    a, b = vad.create_stream(8000), vad.create_stream(8000)
    a.push(bytes(320))
    assert a is not b


async def test_a_warm_up_is_not_held_to_a_call_s_timeout() -> None:
    # A first inference slowed down by a busy machine (another node loading beside it) is
    # no caller waiting: ``warm`` lets it finish; a call after it keeps its timeout.
    asr = await loaded(FakeASR(delays_s=[0.3, 0.3], timeout_s=0.1, retries=0))
    await asr.warm()
    assert asr.calls == 1
    with pytest.raises(ProviderTimeout, match=r"after 0\.1s"):
        await asr.transcribe(b"\x00\x00" * 160, 8000)


async def test_work_no_caller_waits_for_is_not_held_to_a_call_s_timeout() -> None:
    # A node's start-up (fixed phrases, the intents' answers) on a loaded machine: inside
    # ``unhurried`` a slow call finishes; outside it the call's timeout holds again.
    asr = await loaded(FakeASR(delays_s=[0.3, 0.3], timeout_s=0.1, retries=0))
    with unhurried():
        await asr.transcribe(b"\x00\x00" * 160, 8000)
    with pytest.raises(ProviderTimeout, match=r"after 0\.1s"):
        await asr.transcribe(b"\x00\x00" * 160, 8000)


class CountingEmbedder(FakeEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []

    def _embed_impl(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.batches.append(list(texts))
        return super()._embed_impl(texts)


async def test_a_single_text_embedded_lately_is_answered_from_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("serve.embed.MEMO_SIZE", 2)
    emb = CountingEmbedder()
    await emb.load()  # the warm-up's "hello" is not remembered
    emb.batches.clear()
    first = await emb.embed(["where is my order"])
    first[0, 0] = 99.0  # a caller's copy: changing it changes nothing remembered
    again = await emb.embed(["where is my order"])
    assert emb.batches == [["where is my order"]] and emb.memo_hits == 1
    assert again[0, 0] != 99.0 and np.isclose(np.linalg.norm(again[0]), 1.0)
    # batches are always embedded; the oldest single text is forgotten beyond the size
    await emb.embed(["a", "b"])
    await emb.embed(["a", "b"])
    await emb.embed(["hello"])
    await emb.embed(["open hours"])
    await emb.embed(["where is my order"])
    assert emb.batches[1:] == [
        ["a", "b"],
        ["a", "b"],
        ["hello"],
        ["open hours"],
        ["where is my order"],
    ]
