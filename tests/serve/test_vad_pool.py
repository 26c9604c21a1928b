"""Silero VAD models go back to their pool when a call ends, not when its objects are
collected: a node's calls end between rare full collections, and each new call would
otherwise build a model of its own (about 10 MB each, kept in the pool for good)."""

import gc

import numpy as np
import pytest

from serve import SileroVAD

RATE = 8000


@pytest.fixture
def no_collector():
    """The node between two full collections: cycles stay in memory."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


class CallObjects:
    """A call's objects as the node has them: a reference cycle that holds the stream."""

    def __init__(self, stream: object) -> None:
        self.stream = stream
        self.me = self


@pytest.mark.usefixtures("no_collector")
async def test_calls_that_end_give_their_model_back_before_they_are_collected() -> None:
    vad = SileroVAD(pool_size=1)
    await vad.load()
    built = 0
    factory = vad._factory

    def counting(rate: int) -> object:
        nonlocal built
        built += 1
        return factory(rate)

    vad._factory = counting
    window = bytes(4 * RATE // 50)  # two frames: past one 32 ms window
    for _ in range(20):  # two calls at a time, each ended and left to the collector
        calls = [CallObjects(vad.create_stream(RATE)) for _ in range(2)]
        for call in calls:
            call.stream.push(window)
            call.stream.close()
        del calls
    assert built == 1  # the second call's model; the first came from the pool
    assert vad.pooled(RATE) == 2


async def test_a_stream_closed_twice_or_collected_after_close_gives_back_once() -> None:
    vad = SileroVAD(pool_size=1)
    await vad.load()
    stream = vad.create_stream(RATE)
    assert vad.pooled(RATE) == 0
    stream.close()
    stream.close()
    del stream
    gc.collect()
    assert vad.pooled(RATE) == 1


async def test_a_closed_stream_refuses_audio() -> None:
    vad = SileroVAD(pool_size=1)
    await vad.load()
    stream = vad.create_stream(RATE)
    stream.close()
    with pytest.raises(RuntimeError, match="closed"):
        stream.push(np.zeros(2 * RATE // 50, "<i2").tobytes())  # past one 32 ms window
