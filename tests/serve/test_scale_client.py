"""The ``ray`` backends' error handling: what the tier refuses or loses becomes the
``ProviderError`` the pipeline turns into a filler and a retry, or the apology."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import pytest
from ray.exceptions import ActorDiedError, RayTaskError
from ray.serve.exceptions import BackPressureError

from serve import ChatMessage, ProviderError, ProviderTimeout
from serve.base import WARMUP_TIMEOUT_S
from serve.scale import deployments
from serve.scale.client import RayLLM, tier_error
from serve.scale.settings import TierSettings
from tests.serve.fakes import FakeASR


def test_refused_and_lost_requests_are_retryable() -> None:
    full = tier_error("llm", BackPressureError(num_queued_requests=8, max_queued_requests=8))
    assert full.retryable and "queue is full" in str(full)
    lost = tier_error("llm", ActorDiedError())
    assert lost.retryable and "replica was lost" in str(lost)


@pytest.mark.parametrize("instance_of_cause", [False, True])
def test_a_replicas_model_error_keeps_its_retry_advice(instance_of_cause: bool) -> None:
    def remote(cause: Exception) -> Exception:
        err = RayTaskError("stream", "Traceback ...", cause)
        return err.as_instanceof_cause() if instance_of_cause else err

    late = tier_error("llm", remote(ProviderTimeout("llama-cpp timed out after 10s")))
    assert isinstance(late, ProviderError) and late.retryable
    assert "timed out" in str(late)
    broken = tier_error("llm", remote(ProviderError("bad weights")))
    assert not broken.retryable
    crashed = tier_error("llm", remote(ValueError("boom")))
    assert not crashed.retryable and "boom" in str(crashed)


class _Handle:
    """A deployment handle whose first streaming request is refused (the tier is full)."""

    def __init__(self) -> None:
        self.requests = 0

    def options(self, **_: Any) -> _Handle:
        return self

    @property
    def stream(self) -> _Handle:
        return self

    def remote(self, *args: Any) -> _Response:
        self.requests += 1
        return _Response(refuse=self.requests == 1)


class _Response:
    def __init__(self, *, refuse: bool, stall: bool = False) -> None:
        self.refuse = refuse
        self.stall = stall
        self.cancelled = False

    def __aiter__(self) -> AsyncIterator[str]:
        return self._items()

    async def _items(self) -> AsyncIterator[str]:
        if self.refuse:
            raise BackPressureError(num_queued_requests=8, max_queued_requests=8)
        for piece in ("Hello", " there."):
            yield piece
            if self.stall:  # a replica gone without word: nothing more, no error
                await asyncio.Event().wait()

    def cancel(self) -> None:
        self.cancelled = True


async def test_a_refused_stream_is_retried_once() -> None:
    llm = RayLLM(app_name="switchboard", retries=1)
    llm.handle, llm.loaded = _Handle(), True
    prompt = [ChatMessage("user", "Hi")]
    async with aclosing(llm.stream(prompt, max_tokens=8)) as pieces:
        assert [p async for p in pieces] == ["Hello", " there."]
    assert llm.metrics()["retries"] == 1
    assert llm.metrics()["errors"] == 0
    llm.retries = 0
    llm.handle = _Handle()
    with pytest.raises(ProviderError, match="queue is full"):
        async with aclosing(llm.stream(prompt, max_tokens=8)) as pieces:
            async for _ in pieces:
                pass


async def test_a_replica_leaves_the_caller_s_deadline_to_the_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The node's client holds a turn's timeout and cancels the request when it passes; a
    # replica held to the same limit failed a node's start-up (under ``unhurried``) on a
    # loaded machine. Its model's own limit is the warm-up's.
    monkeypatch.setattr(deployments, "load_board", lambda tier: None)
    asr = FakeASR(delays_s=[0.0, 0.3], timeout_s=0.1, retries=0)
    replica = deployments._Replica()
    await replica._start(asr, TierSettings().model_dump())
    assert asr.timeout_s == WARMUP_TIMEOUT_S
    heard = await asr.transcribe(b"\x00\x00" * 160, 8000)  # past 0.1 s: not cut
    assert heard.text == "ok"


class _StallingHandle(_Handle):
    def remote(self, *args: Any) -> _Response:
        self.requests += 1
        self.response = _Response(refuse=False, stall=True)
        return self.response


async def test_a_stream_that_stops_mid_answer_fails_within_the_timeout() -> None:
    """The replica sent the first words, then nothing, and no error yet (Ray can learn of a
    lost replica late): the stream fails after ``timeout_s`` without an item, not retried,
    and the request is cancelled."""
    llm = RayLLM(app_name="switchboard", timeout_s=0.2, retries=1)
    handle = _StallingHandle()
    llm.handle, llm.loaded = handle, True
    seen: list[str] = []
    with pytest.raises(ProviderTimeout, match="stalled"):
        async with aclosing(llm.stream([ChatMessage("user", "Hi")], max_tokens=8)) as pieces:
            async for piece in pieces:
                seen.append(piece)
    assert seen == ["Hello"]
    assert handle.requests == 1 and handle.response.cancelled
    m = llm.metrics()
    assert (m["timeouts"], m["errors"], m["retries"]) == (1, 1, 0)
