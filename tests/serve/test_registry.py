"""Backend selection by name and ``load_models`` (with fake backends: no model is loaded)."""

from __future__ import annotations

import importlib.util
import logging
import re
from collections.abc import Iterator

import pytest

from serve import (
    ModelSpec,
    ProviderUnavailable,
    TwoPassASR,
    VllmLLM,
    asr_backends,
    create_models,
    embedder_backends,
    llm_backends,
    load_models,
    tts_backends,
    vad_backends,
)
from serve.asr_nemo import NemoASR
from serve.llm_llamacpp import LlamaCppLLM
from serve.tts_coqui import CoquiTTS
from serve.tts_piper import PiperTTS
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
    # A tier connected earlier in this process adds its own name ("ray") to the list.
    assert {"llama-cpp", "llama-cpp-batched", "llama-cpp-batched-qwen", "llama-cpp-qwen"} <= set(
        llm_backends.names()
    )
    known = "unknown llm backend 'gpt'; known: " + re.escape(", ".join(llm_backends.names()))
    with pytest.raises(ValueError, match=known):
        ModelSpec(llm="gpt")
    with pytest.raises(ValueError, match=known):
        llm_backends.create("gpt", ModelSpec())


def test_create_builds_unloaded_providers_from_spec() -> None:
    models = create_models(ModelSpec(asr_model_path="/models/whisper-large", threads=4))
    # The model path is the first recognizer's; the second pass stays the packaged base.
    assert models.asr.description == (
        "whisper whisper-large, 4-10 s window; second pass whisper base, 4-10 s window"
    )
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


def test_each_backend_reads_its_own_options() -> None:
    spec = ModelSpec.model_validate(
        {
            "llama_cpp": {"nice": 3, "yield_ms": 0},
            "piper": {"nice": 7},
            "llm_model_path": "m",
            "tts_voice_path": "c",
        }
    )
    llm = llm_backends.create("llama-cpp", spec)
    assert isinstance(llm, LlamaCppLLM)
    assert (llm.thread_nice, llm.yield_to) == (3, None)
    tts = tts_backends.create("piper", spec)
    assert isinstance(tts, PiperTTS)
    assert tts.thread_nice == 7
    gpu = ModelSpec.model_validate(
        {
            "vllm": {"gpu_memory_utilization": 0.5, "max_model_len": 1024},
            "coqui": {"config_path": "config.json", "device": "cuda:1"},
        }
    )
    vllm = llm_backends.create("vllm", gpu.model_copy(update={"llm_model_path": "m"}))
    assert isinstance(vllm, VllmLLM)
    assert (vllm.gpu_memory_utilization, vllm.max_model_len) == (0.5, 1024)
    coqui = tts_backends.create("coqui", gpu.model_copy(update={"tts_voice_path": "c"}))
    assert isinstance(coqui, CoquiTTS)
    assert (coqui.config_path, coqui.device) == ("config.json", "cuda:1")


def test_options_are_checked_under_their_backend() -> None:
    with pytest.raises(ValueError, match=r"llama_cpp\.nice"):
        ModelSpec.model_validate({"llama_cpp": {"nice": 40}})
    with pytest.raises(ValueError, match=r"piper\.volume"):
        ModelSpec.model_validate({"piper": {"volume": 2}})


def test_the_earlier_flat_option_names_still_work(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="serve.registry"):
        spec = ModelSpec.model_validate({"llm_nice": 12, "llm_sequences": 8, "tts_nice": 2})
    assert (spec.llama_cpp.nice, spec.llama_cpp.sequences, spec.piper.nice) == (12, 8, 2)
    assert "model setting 'llm_nice' is now llama_cpp.nice" in caplog.text
    # The nested name wins where both are given.
    both = ModelSpec.model_validate({"llm_yield_ms": 0, "llama_cpp": {"yield_ms": 100}})
    assert both.llama_cpp.yield_ms == 100


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


class BrokenEmbedder(FakeEmbedder):
    def _load(self) -> None:
        raise OSError("weights missing")


async def test_a_model_that_fails_to_load_fails_the_load_after_the_others_end(
    fake_backends: ModelSpec,
) -> None:
    embedder_backends.unregister(FAKE)
    embedder_backends.register(FAKE, lambda s: BrokenEmbedder())
    messages: list[str] = []
    with pytest.raises(ProviderUnavailable, match="weights missing"):
        await load_models(fake_backends, progress=messages.append)
    # the others were loaded side by side and reported; none is left loading
    assert sorted(m.split(" (")[0] for m in messages) == [
        "loading asr",
        "loading llm",
        "loading tts",
        "loading vad",
    ]


async def test_load_models_loads_warms_and_reports(fake_backends: ModelSpec) -> None:
    messages: list[str] = []
    models = await load_models(fake_backends, progress=messages.append)
    assert models.embedder is not None
    for provider in (models.asr, models.llm, models.tts, models.vad, models.embedder):
        assert provider.loaded
    assert isinstance(models.llm, FakeLLM)
    assert models.llm.calls == 1  # warmed with one real (fake) inference
    assert models.llm.metrics()["count"] == 0  # warm-up does not count as traffic
    # side by side: each is reported as it is ready, in whatever order that is
    assert sorted(m.split(" (")[0] for m in messages) == [
        "loading asr",
        "loading embedder",
        "loading llm",
        "loading tts",
        "loading vad",
    ]
    [asr] = [m for m in messages if m.startswith("loading asr")]
    assert asr.startswith("loading asr (fake-asr)... ") and asr.endswith("s")


def test_the_two_pass_recognizers_begin_the_second_hearing_early_only_when_asked() -> None:
    for name in ("whisper-window+base", "whisper-window+beam"):
        plain = asr_backends.create(name, ModelSpec())
        assert isinstance(plain, TwoPassASR) and not plain.early
        early = asr_backends.create(name, ModelSpec(asr_second_early=True))
        assert isinstance(early, TwoPassASR) and early.early
