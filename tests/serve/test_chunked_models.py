"""The models joined from chunk packages, loaded through the registry as the node loads them:
Qwen2.5-Coder-0.5B on llama.cpp and Whisper base on faster-whisper."""

from __future__ import annotations

import re

import pytest

from serve import ChatMessage, ModelSpec, PiperTTS
from serve.registry import asr_backends, llm_backends

pytestmark = [pytest.mark.models, pytest.mark.asyncio(loop_scope="session")]

RATE = 8000
SYSTEM = (
    "You are the phone assistant of Acme. Answer in one short sentence, using only these "
    "entries.\nEntry: Standard delivery takes 3 to 5 working days and costs 4 pounds 95. "
    "Express delivery arrives the next working day and costs 9 pounds 95."
)


def words(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9' ]", " ", text.lower()).split())


async def test_qwen_is_a_registered_llm_that_answers_from_the_entry() -> None:
    spec = ModelSpec(llm="llama-cpp-qwen")
    llm = llm_backends.create(spec.llm, spec)
    assert llm.description == "llama-cpp qwen2.5-coder-0.5b-instruct-q4_k_m"
    await llm.load()
    prompt = [ChatMessage("system", SYSTEM), ChatMessage("user", "How much is express delivery?")]
    answer = "".join([p async for p in llm.stream(prompt, max_tokens=32, temperature=0.0)])
    # ChatML from the file's own template: no template tokens leak into the answer.
    assert "<|im_" not in answer
    assert "9" in answer and "95" in answer, answer


async def test_whisper_base_transcribes_telephone_speech() -> None:
    tts = PiperTTS()
    await tts.load()
    phrase = "I would like to change the delivery address for my order"
    speech = b"".join([c async for c in tts.synthesize(phrase, sample_rate=RATE)])
    for backend in ("whisper-base-window", "whisper-base"):
        spec = ModelSpec(asr=backend)
        asr = asr_backends.create(backend, spec)
        assert asr.description.startswith("whisper base")
        await asr.load()
        result = await asr.transcribe(speech, RATE)
        assert words(result.text) == words(phrase), (backend, result.text)
        assert result.confidence > 0.5
