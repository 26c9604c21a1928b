"""A provider on its own thread takes its jobs by priority too: the synthesizer's one thread.

Piper runs on a thread of its own (``Provider.own_thread``). Every call's synthesis meets
there: the words of turns that have ended, and the questions synthesized in other callers'
pauses (``bot.pipeline.said_ahead``). Taken in the order they came, at 16 calls a question
decided at the end of its pause was heard 1.2 s after the decision, behind other calls'
phrases. The fake sits at the model boundary: a synthesizer whose blocking generator records
what it said and can hold the thread.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from bot.pipeline.said_ahead import SaidAhead
from serve import TTS
from serve.errors import WorkDropped
from serve.priority_pool import Priority, Urgency, priority

RATE = 8000


class GatedTTS(TTS):
    """Says each text as one chunk of its bytes, in the order it gets to them; "hold" keeps
    the thread until ``release`` is set. Its own thread, at ``thread_nice``."""

    own_thread = True

    def __init__(self, *, nice: int = 0, timeout_s: float = 10.0) -> None:
        super().__init__(timeout_s=timeout_s, retries=0, name="gated-tts")
        self.thread_nice = nice
        self.release = threading.Event()
        self.holding = threading.Event()
        self.said: list[str] = []
        self.niceness: list[int] = []

    def _load(self) -> None:
        pass

    def _synthesize_impl(self, text: str, sample_rate: int) -> Iterator[bytes]:
        self.niceness.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        if text == "hold":
            self.holding.set()
            self.release.wait(10.0)
        self.said.append(text)
        yield text.encode().ljust(160, b"\x01")


@pytest.fixture
async def tts() -> AsyncIterator[GatedTTS]:
    model = GatedTTS(nice=2)
    await model.load()
    yield model
    model.release.set()
    own = model._own_executor
    if own is not None:
        own.shutdown(wait=True, cancel_futures=True)


async def say(tts: TTS, text: str) -> bytes:
    return b"".join([chunk async for chunk in tts.synthesize(text, sample_rate=RATE)])


async def held(tts: GatedTTS) -> asyncio.Task[bytes]:
    """Start the text that holds the synthesizer's thread; returns once it runs."""
    busy = asyncio.create_task(say(tts, "hold"))
    assert await asyncio.to_thread(tts.holding.wait, 5.0)
    return busy


async def until_waiting(tts: GatedTTS, n: int) -> None:
    pool = tts._own_executor
    assert pool is not None
    for _ in range(500):
        if pool.waiting() >= n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never {n} jobs waiting")


async def in_a_pause(tts: TTS, text: str, pause: Priority) -> bytes:
    with priority(pause):
        return await say(tts, text)


async def test_an_ended_turn_s_words_go_before_a_phrase_asked_in_an_earlier_pause(
    tts: GatedTTS,
) -> None:
    busy = await held(tts)
    ahead = asyncio.create_task(in_a_pause(tts, "Did you mean A or B?", Priority(Urgency.AHEAD)))
    await until_waiting(tts, 1)
    ended = asyncio.create_task(say(tts, "Your order ships today."))  # NOW by default
    await until_waiting(tts, 2)
    tts.release.set()
    await asyncio.gather(busy, ahead, ended)
    assert tts.said == ["hold", "Your order ships today.", "Did you mean A or B?"]


async def test_a_phrase_raised_with_its_pass_goes_first(tts: GatedTTS) -> None:
    busy = await held(tts)
    other = asyncio.create_task(
        in_a_pause(tts, "Did you mean C or D?", Priority(Urgency.AHEAD, keeps_place=True))
    )
    await until_waiting(tts, 1)
    mine = Priority(Urgency.AHEAD, keeps_place=True)
    ahead = asyncio.create_task(in_a_pause(tts, "Did you mean A or B?", mine))
    await until_waiting(tts, 2)
    mine.raise_to(Urgency.NOW)  # its caller's turn ended: the caller waits for it
    tts.release.set()
    await asyncio.gather(busy, other, ahead)
    assert tts.said == ["hold", "Did you mean A or B?", "Did you mean C or D?"]


async def test_a_withdrawn_phrase_never_runs_and_its_stream_ends_at_once(
    tts: GatedTTS,
) -> None:
    busy = await held(tts)
    pause = Priority(Urgency.AHEAD)
    ahead = asyncio.create_task(in_a_pause(tts, "Did you mean A or B?", pause))
    await until_waiting(tts, 1)
    started = time.monotonic()
    pause.withdraw()  # the caller spoke again
    with pytest.raises(WorkDropped, match="withdrawn"):
        await ahead
    # Ended by the withdrawal, not by the first chunk's 10 s timeout.
    assert time.monotonic() - started < 5.0
    tts.release.set()
    await busy
    await say(tts, "Next.")
    assert tts.said == ["hold", "Next."]
    assert tts.metrics()["dropped"] == 1
    assert tts.metrics()["errors"] == 0


async def test_a_phrase_dropped_over_its_budget_ends_its_stream(tts: GatedTTS) -> None:
    busy = await held(tts)
    ahead = asyncio.create_task(
        in_a_pause(tts, "Did you mean A or B?", Priority(Urgency.AHEAD, budget_s=0.05))
    )
    with pytest.raises(WorkDropped, match="over its budget"):
        await asyncio.wait_for(ahead, 5.0)
    tts.release.set()
    await busy
    assert tts.said == ["hold"]


async def test_the_own_thread_keeps_its_niceness(tts: GatedTTS) -> None:
    await say(tts, "Hello.")
    base = os.getpriority(os.PRIO_PROCESS, os.getpid())
    assert tts.niceness == [min(19, base + 2)]


async def test_said_ahead_hears_of_a_withdrawn_phrase_at_once(tts: GatedTTS) -> None:
    """The pause's phrase store: a phrase whose pass was withdrawn is synthesized when its
    turn comes (``take`` answers None), without waiting out the synthesizer's timeout."""
    ahead = SaidAhead(RATE)
    busy = await held(tts)
    pause = Priority(Urgency.AHEAD, keeps_place=True)
    with priority(pause):
        ahead.start(tts, "Did you mean A or B?")
    await until_waiting(tts, 1)
    pause.withdraw()
    started = time.monotonic()
    assert await ahead.take("Did you mean A or B?") is None
    assert time.monotonic() - started < 5.0
    assert ahead.failed == 1
    tts.release.set()
    await busy
