"""The model tier on a real local Ray Serve: models through handles, a bot node calling them
during real SIP calls, the call-queue policy scaling the LLM up while a caller waits in the
node's call queue and down once the line drains, a replica killed during the calls.

Slow (a Ray of its own, four model deployments, two calls of ~45 s; about 3 minutes on
2 shared cores) but bounded, and part of the default run. Ray is started by the module's
fixture with 2 logical CPUs and stopped by it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import aclosing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray
from ray import serve

from serve.llm import ChatMessage
from serve.registry import ModelSpec
from serve.scale import cluster
from serve.scale.client import RayASR, RayEmbedder, RayLLM, RayTTS
from serve.scale.load import BOARD_NAME
from serve.scale.policy import CALL_QUEUE_DEPTH
from serve.scale.settings import DeploymentSettings, TierSettings
from testkit.botproc import run_bot
from testkit.voices import speak, write_wav
from testkit.wire import FRAME_MS, segments, voiced_frames
from tests.support.baresip import BaresipCall, baresip_call

pytestmark = [pytest.mark.sip, pytest.mark.models, pytest.mark.slow]

RATE = 8000
#: The LLM deployment: one replica per two calls (in flight or waiting), two at most; the
#: others stay at one. Two conversations alone need one: a caller in line tips it to two.
SINGLE = DeploymentSettings(min_replicas=1, max_replicas=1, calls_per_replica=100)
TIER = TierSettings(
    backend="ray",
    local_num_cpus=2,
    report_every_s=0.5,
    report_stale_s=3.0,
    upscale_delay_s=0.0,
    downscale_delay_s=1.0,
    look_back_s=10.5,
    deploy_timeout_s=240.0,
    llm=DeploymentSettings(
        min_replicas=1,
        max_replicas=2,
        calls_per_replica=2,
        max_ongoing_requests=4,
        max_queued_requests=8,
    ),
    asr=SINGLE,
    tts=SINGLE,
    embedder=SINGLE,
)


@pytest.fixture(scope="module")
def tier() -> Iterator[TierSettings]:
    """A local Ray with the application deployed; shut down after the module."""
    before = dict(os.environ)
    assert cluster.connect(TIER), "a Ray was already connected in this process"
    try:
        # The LLM deployment decodes the calls' answers in one batch.
        cluster.deploy(ModelSpec(llm="llama-cpp-batched"), TIER)
        yield TIER
    finally:
        serve.shutdown()  # type: ignore[no-untyped-call]
        ray.shutdown()
        os.environ.clear()
        os.environ.update(before)


def llm_replicas(tier: TierSettings) -> int:
    deployments = cluster.status(tier)
    assert deployments is not None
    return deployments["LLM"].running


async def test_each_model_kind_answers_through_its_deployment(tier: TierSettings) -> None:
    asr, llm = RayASR(app_name=tier.app_name), RayLLM(app_name=tier.app_name)
    tts, embedder = RayTTS(app_name=tier.app_name), RayEmbedder(app_name=tier.app_name)
    for provider in (asr, llm, tts, embedder):
        await provider.load()

    prompt = [ChatMessage("system", "You are a helpful assistant."), ChatMessage("user", "Hi")]
    async with aclosing(llm.stream(prompt, max_tokens=12)) as stream:
        pieces = [piece async for piece in stream]
    assert len(pieces) >= 2, pieces  # streamed token by token, not one reply
    assert "".join(pieces).strip()

    async with aclosing(tts.synthesize("Your parcel ships today.", sample_rate=RATE)) as out:
        chunks = [chunk async for chunk in out]
    pcm = b"".join(chunks)
    assert len(pcm) > RATE  # more than half a second of speech
    heard = await asr.transcribe(pcm, RATE)
    assert "parcel" in heard.text.lower() or "ships" in heard.text.lower(), heard

    vectors = await embedder.embed(["where is my order", "where's my package"])
    assert vectors.shape == (2, embedder.dim)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert float(vectors[0] @ vectors[1]) > 0.5

    # Closing a stream early cancels the request on the replica: the next one is served.
    async with aclosing(llm.stream(prompt, max_tokens=64)) as stream:
        async for _ in stream:
            break
    async with aclosing(llm.stream(prompt, max_tokens=2)) as stream:
        assert [piece async for piece in stream]
    assert llm.metrics()["errors"] == 0


def caller_wav(path: Path, voice: str) -> Path:
    """Three questions ~12 s apart (small talk goes to the LLM), then 12 s to listen."""
    pcm = bytes(int(4.5 * RATE) * 2)
    for text in ("Hello, how are you today?", "Where is my order?", "Hi, can you hear me?"):
        pcm += speak(text, voice=voice) + bytes(12 * RATE * 2)
    write_wav(path, pcm)
    return path


def heard_after_last_question(call: BaresipCall) -> float:
    """Seconds of voiced audio the caller heard after the end of its last question."""
    spoke = segments(voiced_frames(call.sent), max_gap_ms=600)
    assert len(spoke) == 3, spoke
    # Both recordings start when the call does: the same sample index is the same moment.
    end = (spoke[-1][1] + 1) * FRAME_MS * RATE // 1000
    return float(voiced_frames(call.received[end:]).sum() * FRAME_MS / 1000)


def test_calls_through_the_tier_scale_it_and_outlive_a_replica(
    tier: TierSettings, tmp_path: Path
) -> None:
    assert llm_replicas(tier) == 1
    gcs = ray.get_runtime_context().gcs_address
    env = {
        "SWITCHBOARD_TIER__BACKEND": "ray",
        "SWITCHBOARD_TIER__ADDRESS": gcs,
        "SWITCHBOARD_TIER__DEPLOY": "false",
        "SWITCHBOARD_TIER__REPORT_EVERY_S": "0.5",
        "SWITCHBOARD_CALL_ACTIONS": "false",
        # Two conversations at once; a third caller waits in line.
        "SWITCHBOARD_QUEUE__MAX_ACTIVE": "2",
        "SWITCHBOARD_QUEUE__MAX_WAITING": "2",
    }
    with run_bot(env=env, timeout_s=240) as bot:
        assert any("model tier: joined Ray" in line for line in bot.lines), bot.lines[-20:]
        wavs = [caller_wav(tmp_path / f"caller{i}.wav", v) for i, v in enumerate(("slt", "rms"))]
        # The third caller dials once the two are talking, hears nothing but the line
        # (its WAV is silence), and hangs up after 40 s in it: Serve takes ~25 s here to
        # have the second replica running.
        waiter = tmp_path / "waiter.wav"
        write_wav(waiter, bytes(40 * RATE * 2))
        board = ray.get_actor(BOARD_NAME, namespace=tier.namespace)
        seen: list[int] = []
        #: (queue depth the node reported, LLM replicas running) at each look.
        looks: list[tuple[float, int]] = []
        killed: list[str] = []
        killed_at: list[int] = []
        done = threading.Event()

        def watch() -> None:
            # Replica counts as Serve reports them, next to the queue depth the policy
            # reads; one of the two LLM replicas is killed while the caller still waits,
            # as a crash would (Serve replaces it).
            started = time.monotonic()
            while not done.is_set():
                seen.append(llm_replicas(tier))
                report: Any = board.totals.remote(tier.report_stale_s)
                totals: dict[str, float] = ray.get(report, timeout=10)
                looks.append((totals[CALL_QUEUE_DEPTH], seen[-1]))
                waited_up = looks[-1] == (1.0, 2)
                if not killed and (waited_up or time.monotonic() - started > 50):
                    killed.append(cluster.kill_replica(tier, "llm"))
                    killed_at.append(len(looks))
                time.sleep(0.5)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        with ThreadPoolExecutor(3) as pool:
            futures = [
                pool.submit(baresip_call, bot.uri, wav, tmp_path / f"b{i}", 75)
                for i, wav in enumerate(wavs)
            ]
            deadline = time.monotonic() + 30
            while sum("greeting queued" in line for line in bot.lines) < 2:
                assert time.monotonic() < deadline, bot.lines[-20:]
                time.sleep(0.2)
            waiting = pool.submit(baresip_call, bot.uri, waiter, tmp_path / "b-wait", 60)
            calls = [f.result(timeout=120) for f in futures]
            waiting.result(timeout=90)
        done.set()
        watcher.join(timeout=10)

        assert any("queued at position 1" in line for line in bot.lines), bot.lines[-30:]
        queued = [i for i, (depth, _) in enumerate(looks) if depth > 0]
        assert queued, f"the node never reported a caller in line: {looks}"
        up = [i for i, (_, n) in enumerate(looks) if n == 2 and i >= queued[0]]
        assert up, f"the LLM never scaled to 2 replicas while a caller waited: {looks}"
        assert killed_at and killed_at[0] > up[0], f"killed before scaling up: {looks}"
        # Serve replaced the killed replica (two again), then went back to one after the
        # line drained.
        back = [i for i, (_, n) in enumerate(looks) if n == 2 and i > killed_at[0]]
        assert back, f"the killed replica was not replaced: {looks}"
        down = [i for i, (d, n) in enumerate(looks) if n == 1 and i > back[-1] and d == 0]
        assert down, f"the LLM did not scale back down once the line drained: {looks}"
        assert killed, "no replica was killed"
        for call in calls:
            # Asked after the replica was killed, the third question was still answered.
            assert heard_after_last_question(call) >= 0.5, "no answer after the replica died"
        ended = [line for line in bot.lines if " ended: " in line]
        assert len(ended) == 2, ended
        # The caller in line hung up there: it left the queue, no conversation ended.
        assert any("left the queue after" in line for line in bot.lines), bot.lines[-30:]
        assert all("error" not in line for line in ended), ended

        # Drained: no call in flight, the policy goes back to one replica.
        deadline = time.monotonic() + 60
        while llm_replicas(tier) != 1 or len(cluster.replica_actor_names(tier, "llm")) != 1:
            assert time.monotonic() < deadline, f"still {llm_replicas(tier)} LLM replicas"
            time.sleep(1)
