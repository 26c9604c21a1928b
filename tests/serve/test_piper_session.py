"""Piper's ONNX Runtime session keeps no memory pattern per input shape (each sentence's
phonemes are a new shape: the node grew with every new sentence spoken), and speaks as
``PiperVoice.load``'s session does."""

import asyncio

import numpy as np
from piper import PiperVoice

from serve import PiperTTS


async def test_no_memory_pattern_per_shape_and_the_same_audio() -> None:
    tts = PiperTTS()
    await tts.load()
    session = tts._voice.session
    assert session.get_session_options().enable_mem_pattern is False
    text = "Your parcel is on its way and should arrive tomorrow morning."
    ours = b"".join([c async for c in tts.synthesize(text, sample_rate=8000)])
    tts._voice = await asyncio.to_thread(PiperVoice.load, tts._model_path())
    assert tts._voice.session.get_session_options().enable_mem_pattern is True
    theirs = b"".join([c async for c in tts.synthesize(text, sample_rate=8000)])
    a, b = np.frombuffer(ours, "<i2"), np.frombuffer(theirs, "<i2")
    assert len(a) == len(b)
    assert np.abs(a.astype(np.int32) - b.astype(np.int32)).max() <= 1
