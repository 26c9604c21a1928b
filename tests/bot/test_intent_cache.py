"""The intent cache on a real Redis: the suite's own, or one a test starts and kills."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import numpy as np
import pytest

from bot.intents.cache import IntentCache
from bot.intents.match import IntentIndex, IntentMatchingConfig, IntentVectors, normalize
from bot.intents.store import CacheStore, MemoryStore, RedisStore
from bot.pipeline.prompts import PromptAudio
from bot.pipeline.session import CallSession
from bot.pipeline.turn import Turn
from tests.bot.fakes import (
    MemoryCall,
    ScriptedASR,
    ScriptedLLM,
    ToneTTS,
    fake_models,
    silence,
    tone,
)
from tests.bot.intent_fakes import MATCHING, WordsEmbedder, intents, profile
from tests.support.clock import FakeClock
from tests.support.services import RedisServer, run_redis

ROOT = Path(__file__).resolve().parents[2]
#: The key the tests' nodes sign their Redis entries with.
KEY = b"test-signing-key-of-the-suite"


@pytest.fixture
async def store(redis_server: RedisServer) -> AsyncIterator[RedisStore]:
    s = RedisStore(redis_server.url(), f"test:intents:{uuid.uuid4().hex[:12]}", signing_key=KEY)
    yield s
    await s.delete_all()
    await s.close()


async def make_cache(store: CacheStore, **kw: float) -> tuple[IntentCache, ToneTTS, WordsEmbedder]:
    embedder, tts = WordsEmbedder(), ToneTTS()
    await embedder.load()
    await tts.load()
    return IntentCache(store, embedder, tts, voice="tone", **kw), tts, embedder


def test_normalize_and_the_matching_rule() -> None:
    assert normalize("  Where’s my ORDER?! ") == "where's my order"
    e = np.eye(4, dtype=np.float32)
    index = IntentIndex(
        [
            IntentVectors("a", ("x",), ("nope",), e[[0]], e[[2]]),
            IntentVectors("b", ("y",), (), e[[1]], np.zeros((0, 4), np.float32)),
        ]
    )
    rule = IntentMatchingConfig(
        threshold=0.6,
        margin=0.2,
        negative_margin=0.0,
        top_k=1,
        action_threshold=0.0,
        background_margin=0.0,
        confirm_threshold=0.0,
    )
    assert index.exact("X!").intent == "a"  # type: ignore[union-attr]
    assert index.exact("Nope").reason == "exact negative"  # type: ignore[union-attr]
    assert index.semantic(e[0], rule).intent == "a"
    near_tie = np.array([0.7, 0.6, 0, 0], np.float32)
    assert index.semantic(near_tie, rule).reason == "margin too small"
    assert index.semantic(np.array([0.5, 0, 0, 0], np.float32), rule).reason == "below threshold"
    negative = np.array([0.7, 0, 0.71, 0], np.float32)
    assert index.semantic(negative, rule).reason == "negative example closer"


async def run_session(
    cache: IntentCache, tts: ToneTTS, asr_text: str, llm: ScriptedLLM
) -> tuple[MemoryCall, list[Turn]]:
    """A call on a clock of the test's: the caller's words, then silence until answered."""
    prof, clock = profile(), FakeClock()
    models = await fake_models(ScriptedASR(asr_text), llm, tts, clock)
    prompts = PromptAudio(8000)
    await prompts.add(tts, prof.greeting)
    await prompts.add(tts, prof.apology)
    call, turns = MemoryCall(clock=clock), []
    session = CallSession(
        call, models, prof, prompts, on_turn=turns.append, intent_cache=cache, clock=clock
    )
    task = asyncio.create_task(session.run())
    await call.play(silence(400) + tone(600) + silence(2500))
    await call.end()
    await asyncio.wait_for(task, 5)
    return call, turns


async def test_a_hit_plays_the_stored_audio_without_tts_or_llm(
    store: RedisStore, redis_server: RedisServer
) -> None:
    cache, tts, _ = await make_cache(store)
    await cache.publish(intents(), MATCHING)
    # Each intent's answer and its confirmation question.
    assert cache.built == 3 and len(tts.texts) == 6
    # A second node builds nothing: it reads entries and audio from Redis.
    other, other_tts, other_emb = await make_cache(
        RedisStore(redis_server.url(), store.prefix, signing_key=KEY)
    )
    assert await other.reload()
    assert other.built == 0 and other_tts.texts == [] and other_emb.calls == 0
    stored = other.entry("order_status")
    assert stored is not None and stored.audio == cache.entry("order_status").audio  # type: ignore[union-attr]

    llm = ScriptedLLM(["should not be asked."])
    call, turns = await run_session(other, other_tts, "where is my order please", llm)
    await other.stop()
    assert [t.route for t in turns] == ["semantic"]
    turn = turns[0]
    assert turn.intent == "order_status" and turn.intent_score is not None
    assert turn.intent_score >= MATCHING.threshold
    assert turn.answer == "Your order ships in three days."
    assert llm.prompts == []
    # Only the greeting and the apology were synthesized: the answer came from Redis.
    assert other_tts.texts == ["Hello there caller", "Sorry about that"]
    assert stored.audio in bytes(call.sent) or len(call.sent) >= len(stored.audio)
    assert "first_audio_out" in turn.since_speech_end_ms()


async def test_a_miss_and_a_negative_go_to_the_llm(store: RedisStore) -> None:
    cache, tts, _ = await make_cache(store)
    await cache.publish(intents(), MATCHING)
    for text in ("cancel my order", "tell me a joke"):
        llm = ScriptedLLM(["Sure."])
        _, turns = await run_session(cache, tts, text, llm)
        assert [(t.route, t.intent) for t in turns] == [("llm", None)], text
        assert len(llm.prompts) == 1


async def test_a_config_change_rebuilds_one_entry_and_reloads_another_node(
    store: RedisStore, redis_server: RedisServer
) -> None:
    cache, _, _ = await make_cache(store)
    first = await cache.publish(intents(), MATCHING)
    node = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.bot.intent_node",
        redis_server.url(),
        store.prefix,
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert node.stdout is not None and node.stdin is not None
    try:
        ready = await asyncio.wait_for(node.stdout.readline(), 30)
        assert ready.decode().split() == ["ready", first]
        second = await cache.publish(intents("It arrives tomorrow."), MATCHING)
        assert second != first
        assert cache.built == 4  # only the changed intent was synthesized and embedded again
        line = await asyncio.wait_for(node.stdout.readline(), 10)
        assert line.decode().split() == ["reload", second, "It", "arrives", "tomorrow.", "tts=0"]
    finally:
        node.stdin.close()
        await asyncio.wait_for(node.wait(), 10)


async def _put_signed_index(store: RedisStore, data: dict[str, object]) -> None:
    """Write an index as a node holding the signing key would, whatever its rule says."""
    signature = store._sign_index(json.dumps(data))
    await store._client.set(f"{store.prefix}:index", json.dumps({**data, "sig": signature}))


async def test_the_index_carries_the_matching_rule_as_validated_json(store: RedisStore) -> None:
    cache, _, _ = await make_cache(store)
    version = await cache.publish(intents(), MATCHING)
    read = await store.get_index()
    assert read is not None and read.version == version
    assert read.matching == MATCHING  # the profile's typed rule, every field, back
    raw = json.loads(await store._client.get(f"{store.prefix}:index"))
    raw.pop("sig")
    assert raw["matching"] == MATCHING.model_dump(mode="json")
    # A field a newer node knows and this one does not: the rest is used.
    await _put_signed_index(store, {**raw, "matching": {**raw["matching"], "new_knob": 2}})
    newer = await store.get_index()
    assert newer is not None and newer.matching == MATCHING and store.refused == 0
    # A rule outside its bounds, though signed, is refused as an unreadable index.
    for bad in ({"threshold": 1.5}, {"top_k": 0}, {"confirm_threshold": 0.9}):
        await _put_signed_index(store, {**raw, "matching": {**raw["matching"], **bad}})
        assert await store.get_index() is None, bad
    assert store.refused == 3


async def until_real(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Wait in real time until ``cond()``: the cache watches its store in real time."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


async def test_redis_lost_mid_call_falls_back_to_the_llm_then_recovers() -> None:
    # A Redis of this test's own: it is killed mid-call, so never the suite's shared one.
    # The call is on a clock of the test's; the cache sees its store go and come back in
    # real time, which the test waits for between the caller's turns.
    with run_redis() as server:
        url = server.url()
        cache, tts, _ = await make_cache(
            RedisStore(url, "t", timeout_s=0.3, signing_key=KEY),
            stale_after_s=0.5,
            heartbeat_s=0.1,
            retry_max_s=0.2,
        )
        await cache.publish(intents(), MATCHING)
        cache.start()
        prof, clock = profile(), FakeClock()
        llm = ScriptedLLM(["The model answers."])
        models = await fake_models(ScriptedASR("where is my order"), llm, tts, clock)
        prompts = PromptAudio(8000)
        await prompts.add(tts, prof.greeting)
        await prompts.add(tts, prof.apology)
        call, turns = MemoryCall(clock=clock), []
        session = CallSession(
            call, models, prof, prompts, on_turn=turns.append, intent_cache=cache, clock=clock
        )
        task = asyncio.create_task(session.run())
        await call.play(silence(400) + tone(600) + silence(2000))
        assert [t.route for t in turns] == ["exact"]

        server.kill()  # Redis goes away mid-call
        await until_real(lambda: not cache.fresh, 5, "the cache did not see its store go")
        await call.play(silence(800) + tone(600) + silence(2000))
        assert [t.route for t in turns] == ["exact", "llm"]
        assert not cache.fresh

        with run_redis(server.port):  # back, empty: the node puts its copy back and trusts it again
            await until_real(lambda: cache.fresh, 10, "cache did not recover")
            await call.play(silence(100))
            check = RedisStore(url, "t", signing_key=KEY)
            assert await check.get_index() is not None
            await check.close()
            await call.play(tone(600) + silence(2000))
            await call.end()
            await asyncio.wait_for(task, 5)
            await cache.stop()
    assert [t.route for t in turns] == ["exact", "llm", "exact"]
    assert not task.exception()


async def test_without_redis_the_cache_runs_in_process() -> None:
    cache, tts, _ = await make_cache(MemoryStore())
    await cache.publish(intents(), MATCHING)
    again = await cache.publish(intents(), MATCHING)
    assert cache.built == 3 and cache.version == again
    _, turns = await run_session(cache, tts, "when are you open", ScriptedLLM(["x"]))
    assert [(t.route, t.intent) for t in turns] == [("exact", "opening_hours")]
