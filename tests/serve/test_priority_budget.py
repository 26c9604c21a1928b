"""Work for the call nearest to answering first, and speculative work dropped over its budget:
the shared pool's budgets, the ``priority=`` keyword of the model interfaces, and the
pool's counters in the Prometheus format.

The fakes sit at the executor boundary: a one-worker pool the test holds busy, and models
whose blocking ``_..._impl`` records what ran and in what order.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from serve import ASR, Transcription, TwoPassASR
from serve.errors import WorkDropped
from serve.pool_metrics import PoolCollector
from serve.priority_pool import (
    DEFAULT_BUDGET_S,
    Priority,
    PriorityPool,
    Urgency,
    as_priority,
    priority,
)
from tests.serve.fakes import FakeEmbedder

RATE = 16000


class FakeClock:
    """The pool's clock, moved by the test: a budget runs out when the test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def pool(clock: FakeClock) -> Iterator[PriorityPool]:
    # The budget thread waits in real seconds for the fake clock's deadlines: budgets here
    # are a few hundredths of a second, so it looks at the clock again that often.
    workers = PriorityPool(1, thread_name_prefix="test-budget", clock=clock)
    yield workers
    workers.shutdown(wait=True, cancel_futures=True)


def block(pool: PriorityPool) -> threading.Event:
    """Occupy the pool's one worker until the returned event is set."""
    release, started = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        release.wait(10.0)

    pool.submit(hold)
    assert started.wait(5.0)
    return release


# --------------------------------------------------------------------------- the pool


def test_a_pass_over_its_budget_is_dropped_at_the_deadline_while_the_worker_is_busy(
    pool: PriorityPool, clock: FakeClock
) -> None:
    release = block(pool)
    ran: list[str] = []
    with priority(Priority(Urgency.AHEAD, budget_s=0.02)):
        late = pool.submit(ran.append, "stale guess")
    clock.now = 0.03
    # Dropped by the budget thread: the one worker is still held.
    error = late.exception(timeout=5.0)
    assert isinstance(error, WorkDropped)
    assert error.waited_s == pytest.approx(0.03)
    assert not error.retryable
    assert "budget of 20 ms" in str(error)
    assert pool.waiting() == 0
    release.set()
    assert pool.wait_idle(5.0)
    assert ran == []
    counts = pool.counts()
    assert counts["ahead"]["dropped"] == 1
    assert counts["ahead"]["started"] == 0
    assert counts["now"]["dropped"] == 0


def test_a_pass_within_its_budget_runs(pool: PriorityPool, clock: FakeClock) -> None:
    release = block(pool)
    with priority(Priority(Urgency.AHEAD, budget_s=0.02)):
        guess = pool.submit(lambda: "heard")
    clock.now = 0.01
    release.set()
    assert guess.result(5.0) == "heard"
    assert pool.counts()["ahead"]["dropped"] == 0


def test_a_pass_raised_to_now_before_its_deadline_runs_whatever_it_waited(
    pool: PriorityPool, clock: FakeClock
) -> None:
    release = block(pool)
    turn = Priority(Urgency.AHEAD, budget_s=0.02)
    with priority(turn):
        waiting = pool.submit(lambda: "the turn's transcript")
    turn.raise_to(Urgency.NOW)  # the turn ended: a caller waits for it
    clock.now = 5.0
    release.set()
    assert waiting.result(5.0) == "the turn's transcript"
    counts = pool.counts()
    assert counts["now"]["started"] == 2  # the blocking job and the raised one
    assert counts["ahead"]["dropped"] == counts["now"]["dropped"] == 0


def test_spare_work_runs_after_every_other_level_and_only_while_a_worker_is_free(
    pool: PriorityPool, clock: FakeClock
) -> None:
    # A second hearing begun beside the first: on a worker free at once, else dropped.
    assert DEFAULT_BUDGET_S[Urgency.SPARE] == 0.05
    release = block(pool)
    ran: list[str] = []
    with priority(Priority.of(Urgency.SPARE)):
        spare = pool.submit(ran.append, "spare")
    with priority(Priority(Urgency.AHEAD)):
        ahead = pool.submit(ran.append, "ahead")
    clock.now = 0.06
    assert isinstance(spare.exception(timeout=5.0), WorkDropped)
    release.set()
    ahead.result(5.0)
    assert ran == ["ahead"]
    assert pool.counts()["spare"]["dropped"] == 1


def test_spare_work_raised_when_needed_takes_the_budget_it_is_given(
    pool: PriorityPool, clock: FakeClock
) -> None:
    release = block(pool)
    spare = Priority.of(Urgency.SPARE)
    with priority(spare):
        needed = pool.submit(lambda: "second hearing")
    # The first hearing led nowhere: the second is the pass's work now, at its level and
    # budget (none: a pass is never dropped once its turn may be waiting on it).
    spare.raise_to(Urgency.AHEAD, budget_s=None)
    assert (spare.level, spare.budget_s) == (Urgency.AHEAD, None)
    clock.now = 5.0
    release.set()
    assert needed.result(5.0) == "second hearing"
    spare.raise_to(Urgency.AHEAD, budget_s=0.01)  # the same level: nothing changes
    assert spare.budget_s is None


def test_an_ended_turn_is_never_dropped(pool: PriorityPool, clock: FakeClock) -> None:
    release = block(pool)
    with priority(Priority(Urgency.NOW, budget_s=0.02)):
        ended = pool.submit(lambda: "answer")
    clock.now = 5.0
    release.set()
    assert ended.result(5.0) == "answer"


def test_a_priority_without_a_budget_waits_as_before(pool: PriorityPool, clock: FakeClock) -> None:
    release = block(pool)
    with priority(Priority(Urgency.AHEAD)):
        guess = pool.submit(lambda: "heard")
    clock.now = 60.0
    release.set()
    assert guess.result(5.0) == "heard"


def test_the_ended_turn_overtakes_and_the_stale_pass_is_dropped(
    pool: PriorityPool, clock: FakeClock
) -> None:
    release = block(pool)
    ran: list[str] = []
    with priority(Priority(Urgency.AHEAD, budget_s=0.02)):
        guess = pool.submit(ran.append, "other call's pause")
    ended = pool.submit(ran.append, "ended turn")
    clock.now = 0.05
    assert isinstance(guess.exception(timeout=5.0), WorkDropped)
    release.set()
    ended.result(5.0)
    assert ran == ["ended turn"]


def test_counts_say_what_waited(pool: PriorityPool, clock: FakeClock) -> None:
    release = block(pool)  # submitted to an idle worker: not queued
    with priority(Priority(Urgency.AHEAD)):
        guess = pool.submit(lambda: None)
    ended = pool.submit(lambda: None)
    assert pool.waiting_by_level() == {"now": 1, "ahead": 1, "spare": 0}
    clock.now = 0.25
    release.set()
    guess.result(5.0), ended.result(5.0)
    counts = pool.counts()
    assert counts["now"]["submitted"] == 2
    assert counts["now"]["queued"] == 1
    assert counts["ahead"]["queued"] == 1
    assert counts["now"]["wait_seconds"] == pytest.approx(0.25)
    assert pool.waiting_by_level() == {"now": 0, "ahead": 0, "spare": 0}


def test_a_withdrawn_pass_is_counted_as_withdrawn_not_dropped(
    pool: PriorityPool, clock: FakeClock
) -> None:
    release = block(pool)
    guess = Priority(Urgency.AHEAD, budget_s=0.02)
    with priority(guess):
        waiting = pool.submit(lambda: None)
    guess.withdraw()
    clock.now = 1.0
    release.set()
    assert pool.wait_idle(5.0)
    assert waiting.cancelled()
    counts = pool.counts()["ahead"]
    assert (counts["withdrawn"], counts["dropped"]) == (1, 0)


def test_a_budget_is_a_positive_duration() -> None:
    with pytest.raises(ValueError, match="more than 0"):
        Priority(Urgency.AHEAD, budget_s=0.0)


def test_a_level_alone_gets_its_default_budget() -> None:
    ahead = as_priority(Urgency.AHEAD)
    assert ahead is not None and ahead.budget_s == DEFAULT_BUDGET_S[Urgency.AHEAD]
    now = as_priority(Urgency.NOW)
    assert now is not None and now.budget_s is None
    own = Priority(Urgency.AHEAD, budget_s=1.0)
    assert as_priority(own) is own
    assert as_priority(None) is None


# --------------------------------------------------------------------------- the models


class GatedASR(ASR):
    """Records each utterance's first byte in the order transcribed; the utterance whose
    first byte is 0 holds the worker until ``release`` is set."""

    def __init__(self, pool: PriorityPool) -> None:
        super().__init__(timeout_s=10.0, name="gated-asr")
        self.pool = pool
        self.release = threading.Event()
        self.holding = threading.Event()
        self.order: list[int] = []

    def _load(self) -> None:
        pass

    def _executor(self) -> PriorityPool:
        return self.pool

    def _transcribe_impl(self, pcm: bytes, sample_rate: int) -> Transcription:
        if pcm[0] == 0:
            self.holding.set()
            self.release.wait(10.0)
        self.order.append(pcm[0])
        return Transcription(f"utterance {pcm[0]}", 1.0, 100.0, 0.0)


def utterance(tag: int) -> bytes:
    return bytes([tag]) + bytes(3199)  # 100 ms at 16 kHz


@pytest.fixture
async def asr() -> GatedASR:
    model = GatedASR(PriorityPool(1, thread_name_prefix="test-asr"))
    await model.load()
    return model


async def holding(asr: GatedASR) -> asyncio.Task[Transcription]:
    """Start the utterance that holds the pool's one worker; returns once it runs."""
    busy = asyncio.create_task(asr.transcribe(utterance(0), RATE))
    assert await asyncio.to_thread(asr.holding.wait, 5.0)
    return busy


async def until_waiting(pool: PriorityPool, n: int) -> None:
    for _ in range(500):
        if pool.waiting() >= n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never {n} jobs waiting")


async def test_an_ended_turn_is_transcribed_before_a_pause_asked_earlier(asr: GatedASR) -> None:
    try:
        busy = await holding(asr)
        pause = asyncio.create_task(
            asr.transcribe(utterance(1), RATE, priority=Priority(Urgency.AHEAD))
        )
        await until_waiting(asr.pool, 1)
        ended = asyncio.create_task(asr.transcribe(utterance(2), RATE, priority=Urgency.NOW))
        await until_waiting(asr.pool, 2)
        asr.release.set()
        await asyncio.gather(busy, pause, ended)
        assert asr.order == [0, 2, 1]
    finally:
        asr.release.set()
        asr.pool.shutdown(wait=True, cancel_futures=True)


async def test_without_the_keyword_a_call_keeps_its_context_s_priority(asr: GatedASR) -> None:
    try:
        busy = await holding(asr)

        async def in_a_pause() -> Transcription:
            with priority(Priority(Urgency.AHEAD)):
                return await asr.transcribe(utterance(1), RATE)

        pause = asyncio.create_task(in_a_pause())
        await until_waiting(asr.pool, 1)
        ended = asyncio.create_task(asr.transcribe(utterance(2), RATE))  # NOW by default
        await until_waiting(asr.pool, 2)
        asr.release.set()
        await asyncio.gather(busy, pause, ended)
        assert asr.order == [0, 2, 1]
    finally:
        asr.release.set()
        asr.pool.shutdown(wait=True, cancel_futures=True)


async def test_a_pass_over_budget_raises_dropped_and_is_counted_not_failed(asr: GatedASR) -> None:
    try:
        busy = await holding(asr)
        with pytest.raises(WorkDropped):
            # The worker stays held: the drop comes from the budget, not from a free worker.
            await asr.transcribe(utterance(1), RATE, priority=Urgency.AHEAD)
        assert asr.order == []
        asr.release.set()
        await busy
        assert asr.order == [0]
        metrics = asr.metrics()
        assert metrics["dropped"] == 1
        assert metrics["errors"] == 0
        assert metrics["retries"] == 0
    finally:
        asr.release.set()
        asr.pool.shutdown(wait=True, cancel_futures=True)


async def test_the_second_hearing_takes_the_priority_too(asr: GatedASR) -> None:
    second = GatedASR(asr.pool)
    await second.load()
    both = TwoPassASR(asr, second)
    try:
        busy = await holding(asr)
        with pytest.raises(WorkDropped):
            await both.second_pass(
                utterance(1), RATE, priority=Priority(Urgency.AHEAD, budget_s=0.05)
            )
        assert second.metrics()["dropped"] == 1
        asr.release.set()
        await busy
        assert asr.order == [0] and second.order == []
    finally:
        asr.release.set()
        asr.pool.shutdown(wait=True, cancel_futures=True)


class PooledEmbedder(FakeEmbedder):
    def __init__(self, pool: PriorityPool) -> None:
        super().__init__()
        self.pool = pool
        self.embedded: list[str] = []

    def _executor(self) -> PriorityPool:
        return self.pool

    def _embed_impl(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.embedded += texts
        return super()._embed_impl(texts)


async def test_a_lookup_in_the_pause_is_dropped_over_budget() -> None:
    pool = PriorityPool(1, thread_name_prefix="test-embed")
    embedder = PooledEmbedder(pool)
    await embedder.load()
    release = block(pool)
    try:
        with pytest.raises(WorkDropped):
            await embedder.embed(
                ["where is my order"], priority=Priority(Urgency.AHEAD, budget_s=0.05)
            )
        release.set()
        vectors = await embedder.embed(["where is my order"], priority=Urgency.NOW)
        assert vectors.shape[0] == 1
        assert embedder.embedded == ["where is my order"]
    finally:
        release.set()
        pool.shutdown(wait=True, cancel_futures=True)


# --------------------------------------------------------------------------- the counters


def test_the_pool_s_counters_in_the_prometheus_format(pool: PriorityPool, clock: FakeClock) -> None:
    release = block(pool)
    with priority(Priority(Urgency.AHEAD, budget_s=0.02)):
        late = pool.submit(lambda: None)
    ended = pool.submit(lambda: None)
    clock.now = 0.5
    assert isinstance(late.exception(timeout=5.0), WorkDropped)
    registry = CollectorRegistry()
    registry.register(PoolCollector(lambda: pool))
    text = generate_latest(registry).decode()
    assert 'switchboard_model_pool_dropped_total{urgency="ahead"} 1.0' in text
    assert 'switchboard_model_pool_dropped_total{urgency="now"} 0.0' in text
    assert 'switchboard_model_pool_queued_total{urgency="now"} 1.0' in text
    assert 'switchboard_model_pool_submitted_total{urgency="now"} 2.0' in text
    assert 'switchboard_model_pool_waiting{urgency="now"} 1.0' in text
    release.set()
    ended.result(5.0)
    text = generate_latest(registry).decode()
    assert 'switchboard_model_pool_waiting{urgency="now"} 0.0' in text
    assert 'switchboard_model_pool_wait_seconds_total{urgency="now"} 0.5' in text
