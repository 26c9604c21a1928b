"""Backend selection by name and ``load_models`` (with fake backends: no model is loaded)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

from serve import (
    ModelSpec,
    ProviderUnavailable,
    VllmLLM,
    asr_backends,
    create_models,
    embedder_backends,
    llm_backends,
    load_models,
    tts_backends,
    vad_backends,
)
from serve.gpu import CoquiTTS, NemoASR
from tests.serve.fakes import FakeASR, FakeEmbedder, FakeLLM, FakeTTS, FakeVAD

FAKE = "fake"


@pytest.fixture
def fake_backends() -> Iterator[ModelSpec]:
    asr_backends.register(FAKE, lambda s: FakeASR())
    llm_backends.register(FAKE, lambda s: FakeLLM())
    tts_backends.register(FAKE, lambda s: FakeTTS())
    vad_backends.register(FAKE, lambda s: FakeVAD())
    embedder_backends.register(FAKE, lambda s: FakeEmbedder())
    yield ModelSpec(asr=FAKE, llm=FAKE, tts=FAKE, vad=FAKE, embedder=FAKE)
    for backends in (asr_backends, llm_backends, tts_backends, vad_backends, embedder_backends):
        backends.unregister(FAKE)


def test_default_names_are_registered() -> None:
    spec = ModelSpec()
    assert spec.asr in asr_backends.names()
    assert spec.llm in llm_backends.names()
    assert spec.tts in tts_backends.names()
    assert spec.vad in vad_backends.names()
    assert spec.embedder in embedder_backends.names()
    assert {"flite", "coqui"} <= set(tts_backends.names())
    assert "webrtc" in vad_backends.names()


def test_unknown_name_lists_known_ones() -> None:
    known = (
        r"unknown llm backend 'gpt'; known: llama-cpp, llama-cpp-batched, "
        r"llama-cpp-batched-qwen, llama-cpp-qwen, vllm"
    )
    with pytest.raises(ValueError, match=known):
        ModelSpec(llm="gpt")
    with pytest.raises(ValueError, match=known):
        llm_backends.create("gpt", ModelSpec())


def test_create_builds_unloaded_providers_from_spec() -> None:
    models = create_models(ModelSpec(asr_model_path="/models/whisper-large", threads=4))
    assert models.asr.description == "whisper whisper-large, 4-10 s window"
    assert not models.asr.loaded
    assert models.embedder is not None
    assert create_models(ModelSpec(embedder=None)).embedder is None


def test_the_cpu_llm_answers_late_once_not_twice() -> None:
    # Its timeout means a queue of other calls' answers: a retry would queue again.
    llm = create_models(ModelSpec()).llm
    assert llm.name == "llama-cpp"
    assert (llm.timeout_s, llm.retries) == (10.0, 0)


def test_gpu_backends_need_a_model_path() -> None:
    with pytest.raises(ValueError, match="llm backend 'vllm' needs llm_model_path"):
        ModelSpec(llm="vllm")
    models = create_models(
        ModelSpec(asr="nemo", asr_model_path="a.nemo", llm="vllm", llm_model_path="m")
    )
    assert isinstance(models.asr, NemoASR)
    assert isinstance(models.llm, VllmLLM)


@pytest.mark.skipif(
    any(importlib.util.find_spec(m) for m in ("vllm", "nemo", "TTS")),
    reason="a GPU library is installed",
)
async def test_gpu_backends_fail_clearly_without_their_library() -> None:
    for provider in (
        VllmLLM(model_path="m"),
        NemoASR(model_path="a.nemo"),
        CoquiTTS(model_path="c"),
    ):
        with pytest.raises(ProviderUnavailable, match="is not installed: install the 'gpu'"):
            await provider.load()


async def test_load_models_loads_warms_and_reports(fake_backends: ModelSpec) -> None:
    messages: list[str] = []
    models = await load_models(fake_backends, progress=messages.append)
    assert models.embedder is not None
    for provider in (models.asr, models.llm, models.tts, models.vad, models.embedder):
        assert provider.loaded
    assert isinstance(models.llm, FakeLLM)
    assert models.llm.calls == 1  # warmed with one real (fake) inference
    assert models.llm.metrics()["count"] == 0  # warm-up does not count as traffic
    assert [m.split(" (")[0] for m in messages] == [
        "loading vad",
        "loading asr",
        "loading embedder",
        "loading llm",
        "loading tts",
    ]
    assert messages[1].startswith("loading asr (fake-asr)... ")
    assert messages[1].endswith("s")
