"""Model selection by name: ``ModelSpec`` in, a loaded and warmed ``ModelSet`` out.

Backends are registered by name per kind, one backend per module; the GPU backends
(``serve.llm_vllm``, ``serve.asr_nemo``, ``serve.tts_coqui``) register the same way, and the
Ray tier's remote backends register as ``ray`` when the tier connects
(``serve.scale.client``), so a deployment picks them with a name in its settings and ``bot/``
does not change. A backend's own knobs are its options model, nested in ``ModelSpec`` under
the backend's name.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from serve.asr import ASR
from serve.asr_nemo import NemoASR
from serve.asr_twopass import TwoPassASR
from serve.asr_whisper import BASE, MAX_PROMPT_TOKENS, PROMPT_TOKENS, TINY_EN, WhisperASR
from serve.base import SHARED_WORKERS, Provider, shared_executor
from serve.embed import Embedder
from serve.embed_e5 import E5Embedder, PairEmbedder
from serve.embed_minilm import MiniLMEmbedder
from serve.llm import LLM
from serve.llm_llamacpp import QWEN, SMOLLM2, LlamaCppLLM, LlamaCppOptions
from serve.llm_llamacpp_batched import BatchedLlamaCppLLM
from serve.llm_vllm import VllmLLM, VllmOptions
from serve.tts import TTS
from serve.tts_coqui import CoquiOptions, CoquiTTS
from serve.tts_flite import FliteTTS
from serve.tts_piper import PiperOptions, PiperTTS
from serve.vad import VAD
from serve.vad_silero import SileroVAD
from serve.vad_webrtc import WebRtcVAD

P = TypeVar("P", bound=Provider)

log = logging.getLogger(__name__)

#: The options' earlier flat names in ``ModelSpec``, and where each is now.
_FLAT_OPTIONS = {
    "llm_nice": ("llama_cpp", "nice"),
    "llm_yield_ms": ("llama_cpp", "yield_ms"),
    "llm_sequences": ("llama_cpp", "sequences"),
    "tts_nice": ("piper", "nice"),
}

#: Backends without packaged weights, and the field that must name theirs.
_NEEDS_PATH = (
    ("asr", "nemo", "asr_model_path"),
    ("llm", "vllm", "llm_model_path"),
    ("tts", "coqui", "tts_voice_path"),
)


class ModelSpec(BaseModel):
    """Which backend serves each model kind, and where its weights are (None: packaged).

    Owned here, composed by the node's settings as ``SWITCHBOARD_MODELS__<FIELD>``. The
    defaults are the CPU models that ship inside Python packages; the paths let a GPU
    deployment point the same loaders at bigger models.
    """

    model_config = ConfigDict(extra="forbid")

    #: Whisper tiny.en on a window fitted to the utterance (4-10 s) instead of its 30 s one
    #: (a third of the time, same accuracy; serve/README.md), and Whisper base for a second
    #: hearing of the turns whose transcript matched nothing (bot/pipeline/rehear.py: right
    #: directly or after a question from speech 77.8% -> 84.3% on the default profile's
    #: tuning split, ~0.2 GB more memory). "whisper-window": tiny.en alone; "whisper": the
    #: full window.
    asr: str = "whisper-window+base"
    asr_model_path: str | None = None
    #: The most tokens of the profile's vocabulary (bot/vocabulary.py) tiny.en reads as its
    #: prompt before each turn (at most Whisper's 223); 0: the recognizer hears without it.
    #: With it, tiny.en decodes on its whole 10 s window (docs/benchmarks.md, "Hearing by
    #: the operator's words": right answers from speech up, word error rate 13.7% -> 10.5%
    #: on the default profile's tuning split).
    asr_prompt_tokens: int = Field(PROMPT_TOKENS, ge=0, le=MAX_PROMPT_TOKENS)
    #: With a two-pass recognizer: the pause's second hearing begins with the first, on a
    #: worker free at once (else not at all), and is withdrawn when the first hearing's
    #: lookup finds an intent (bot/pipeline/speculation.py); False: it begins only then.
    #: Off: on this 2-core reference machine it took ~70-80 ms off a knowledge turn's end
    #: of turn but made the cache route's first hearing slower at 8 calls (wire P50 337 ->
    #: 374 ms: the spare decodes ran beside other calls' first hearings;
    #: docs/benchmarks.md, 2026-11-29). For a node with cores to spare.
    asr_second_early: bool = False
    llm: str = "llama-cpp"
    llm_model_path: str | None = None
    tts: str = "piper"
    #: The synthesis voice (a Piper .onnx for "piper"); None: the packaged voice.
    tts_voice_path: str | None = None
    vad: str = "silero"
    #: Sentence embeddings of the intent cache; None: none loaded (the node also leaves it
    #: out when the profile has no intents).
    embedder: str | None = "minilm"
    #: Threads of each speech model (ASR, embedder). One: with every call's speech work
    #: in parallel, two threads per model fought over 2 cores (10 calls: cache route P95
    #: 682 ms with 2, 568 ms with 1; one call: P50 341 ms with 2, 314 ms with 1).
    threads: int = Field(1, ge=1, le=256)
    #: Options of each backend that has any, under the backend's name.
    llama_cpp: LlamaCppOptions = LlamaCppOptions()
    piper: PiperOptions = PiperOptions()
    vllm: VllmOptions = VllmOptions()
    coqui: CoquiOptions = CoquiOptions()

    @model_validator(mode="before")
    @classmethod
    def _flat_options(cls, data: Any) -> Any:
        """The options' earlier flat names (``SWITCHBOARD_MODELS__LLM_NICE``...) still work,
        moved under their backend with a warning in the log."""
        if not isinstance(data, dict) or not any(key in data for key in _FLAT_OPTIONS):
            return data
        data = dict(data)
        for flat, (backend, option) in _FLAT_OPTIONS.items():
            if flat not in data:
                continue
            value = data.pop(flat)
            nested = dict(data.get(backend) or {})
            nested.setdefault(option, value)
            data[backend] = nested
            log.warning(
                "model setting %r is now %s.%s (SWITCHBOARD_MODELS__%s__%s)",
                flat,
                backend,
                option,
                backend.upper(),
                option.upper(),
            )
        return data

    @field_validator("asr", "llm", "tts", "vad", "embedder")
    @classmethod
    def _known_backend(cls, name: str | None, info: ValidationInfo) -> str | None:
        if name is None:
            return None
        backends = _BACKENDS[info.field_name or ""]
        if name not in backends.names():
            known = ", ".join(backends.names())
            raise ValueError(f"unknown {backends.kind} backend {name!r}; known: {known}")
        return name

    @model_validator(mode="after")
    def _weights_given(self) -> ModelSpec:
        # The GPU backends ship no weights: their path is required (checked at start).
        for kind, backend, field in _NEEDS_PATH:
            if getattr(self, kind) == backend and getattr(self, field) is None:
                raise ValueError(f"{kind} backend {backend!r} needs {field} (no packaged weights)")
        return self


@dataclass
class ModelSet:
    """The loaded models of one bot process."""

    asr: ASR
    llm: LLM
    tts: TTS
    vad: VAD
    embedder: Embedder | None


class Backends(Generic[P]):
    """The backends of one model kind, by name."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._factories: dict[str, Callable[[ModelSpec], P]] = {}

    def register(self, name: str, factory: Callable[[ModelSpec], P]) -> None:
        """Make ``name`` select ``factory`` (a later registration of a name replaces it)."""
        self._factories[name] = factory

    def unregister(self, name: str) -> None:
        """Forget ``name`` (KeyError if it was never registered)."""
        del self._factories[name]

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._factories)

    def create(self, name: str, spec: ModelSpec) -> P:
        """A new, not yet loaded provider; ValueError for an unknown name."""
        factory = self._factories.get(name)
        if factory is None:
            known = ", ".join(self.names())
            raise ValueError(f"unknown {self.kind} backend {name!r}; known: {known}")
        return factory(spec)


asr_backends: Backends[ASR] = Backends("asr")
llm_backends: Backends[LLM] = Backends("llm")
tts_backends: Backends[TTS] = Backends("tts")
vad_backends: Backends[VAD] = Backends("vad")
embedder_backends: Backends[Embedder] = Backends("embedder")
_BACKENDS: dict[str, Backends[Any]] = {
    "asr": asr_backends,
    "llm": llm_backends,
    "tts": tts_backends,
    "vad": vad_backends,
    "embedder": embedder_backends,
}


# As many CTranslate2 workers as the shared pool has threads: each call's transcription
# runs beside another's instead of queueing inside the library (two at once: 315 ms for
# both with one worker, 167 ms with two, measured here).
def _whisper(
    packaged: str, *, windowed: bool, beam_size: int = 1, alternatives: int = 0
) -> Callable[[ModelSpec], WhisperASR]:
    def create(s: ModelSpec) -> WhisperASR:
        return WhisperASR(
            model_path=s.asr_model_path,
            packaged=packaged,
            cpu_threads=s.threads,
            workers=SHARED_WORKERS,
            window_s=10.0 if windowed else None,
            min_window_s=4.0 if windowed else None,
            beam_size=beam_size,
            alternatives=alternatives,
            # Whisper base heard worse with the vocabulary's prompt (docs/benchmarks.md).
            prompt_tokens=s.asr_prompt_tokens if packaged == TINY_EN else 0,
        )

    return create


asr_backends.register("whisper", _whisper(TINY_EN, windowed=False))
# Whisper encoding a window fitted to the utterance (4 to 10 s) instead of 30 s: a 2 s
# question costs ~1/2 of a 10 s window and ~1/8 of 30 s, same word error rate on telephone
# speech (bench.models measures the variants).
asr_backends.register("whisper-window", _whisper(TINY_EN, windowed=True))
# Whisper base (chunk packages, serve/chunked.py): fewer errors than tiny.en on telephone
# speech at about twice the time (docs/benchmarks.md).
asr_backends.register("whisper-base", _whisper(BASE, windowed=False))
asr_backends.register("whisper-base-window", _whisper(BASE, windowed=True))
# Whisper base with its other readings of a turn (a beam search over the same window):
# the second hearing tries them in turn (bot/pipeline/rehear.py).
ALTERNATIVES = 3
asr_backends.register(
    "whisper-base-window-alt", _whisper(BASE, windowed=True, alternatives=ALTERNATIVES)
)
# Beam search on the 30 s path: on the fitted window, 5 beams on one thread dropped a
# sentence's last words ("... the delivery address for"), where greedy did not.
asr_backends.register("whisper-beam", _whisper(TINY_EN, windowed=False, beam_size=5))
# tiny.en for every turn, and a second pass the bot asks for on doubt (serve/asr_twopass.py):
# with base, or with tiny.en searching 5 beams. The model path, if given, is the first's.
asr_backends.register(
    "whisper-window+base",
    lambda s: TwoPassASR(
        _whisper(TINY_EN, windowed=True)(s),
        _whisper(BASE, windowed=True)(s.model_copy(update={"asr_model_path": None})),
        early=s.asr_second_early,
    ),
)
asr_backends.register(
    "whisper-window+beam",
    lambda s: TwoPassASR(
        _whisper(TINY_EN, windowed=True)(s),
        _whisper(TINY_EN, windowed=False, beam_size=5)(s),
        early=s.asr_second_early,
    ),
)


def _llama_cpp(s: ModelSpec, packaged: str = SMOLLM2) -> LlamaCppLLM:
    # One thread: llama.cpp's threads spin on a barrier each token, and when another model
    # holds a core (ASR, TTS, other calls) two threads ran 30x slower than one (25 s vs 0.8 s
    # for 42 tokens, measured here on 2 cores under load).
    # No retry after its first-token timeout: this model's only reason to be late is the
    # queue of other calls' answers on its one thread, and a second try behind that queue
    # kept a caller waiting 20 s for the apology (seen at 10 calls).
    llm = LlamaCppLLM(
        model_path=s.llm_model_path,
        packaged=packaged,
        n_threads=1,
        thread_nice=s.llama_cpp.nice,
        retries=0,
    )
    if s.llama_cpp.yield_ms > 0:
        # On the cores that transcribe callers: each token waits (up to llm_yield_ms)
        # until the shared pool has no speech work. With niceness alone, a transcription
        # beside it took 166 ms; with the wait, 133 ms (measured here on 2 cores).
        llm.yield_to = shared_executor().wait_idle
        llm.yield_max_s = s.llama_cpp.yield_ms / 1000.0
    return llm


# "llama-cpp": SmolLM2-135M, the small-memory option. "llama-cpp-qwen": Qwen2.5-Coder-0.5B
# (chunk packages), which words a retrieved entry right far more often, at 3x the memory.
llm_backends.register("llama-cpp", _llama_cpp)
llm_backends.register("llama-cpp-qwen", lambda s: _llama_cpp(s, QWEN))


def _llama_cpp_batched(s: ModelSpec, packaged: str = SMOLLM2) -> BatchedLlamaCppLLM:
    # Several calls' answers in one decode (serve/llm_llamacpp_batched.py): the LLM
    # deployment of the Ray tier, or a node with many calls on one process.
    llm = BatchedLlamaCppLLM(
        model_path=s.llm_model_path,
        packaged=packaged,
        sequences=s.llama_cpp.sequences,
        n_threads=1,
        thread_nice=s.llama_cpp.nice,
    )
    if s.llama_cpp.yield_ms > 0:
        llm.yield_to = shared_executor().wait_idle
        llm.yield_max_s = s.llama_cpp.yield_ms / 1000.0
    return llm


llm_backends.register("llama-cpp-batched", _llama_cpp_batched)
llm_backends.register("llama-cpp-batched-qwen", lambda s: _llama_cpp_batched(s, QWEN))


def _piper(s: ModelSpec) -> PiperTTS:
    tts = PiperTTS(voice_path=s.tts_voice_path)
    # Its own thread, a little nicer than speech recognition: at 10 calls, sentences of
    # LLM answers queued in front of the turns callers had just finished.
    tts.own_thread, tts.thread_nice = True, s.piper.nice
    return tts


tts_backends.register("piper", _piper)
tts_backends.register("flite", lambda s: FliteTTS(voice=s.tts_voice_path or "kal"))
vad_backends.register("silero", lambda s: SileroVAD())
vad_backends.register("webrtc", lambda s: WebRtcVAD())
embedder_backends.register("minilm", lambda s: MiniLMEmbedder(threads=s.threads))
embedder_backends.register("e5", lambda s: E5Embedder(threads=s.threads))
embedder_backends.register(
    "minilm+e5",
    lambda s: PairEmbedder(MiniLMEmbedder(threads=s.threads), E5Embedder(threads=s.threads)),
)


def _required(path: str | None, field: str, backend: str) -> str:
    if path is None:
        raise ValueError(f"the {backend} backend needs ModelSpec.{field} (no packaged weights)")
    return path


asr_backends.register(
    "nemo", lambda s: NemoASR(model_path=_required(s.asr_model_path, "asr_model_path", "nemo"))
)
llm_backends.register(
    "vllm",
    lambda s: VllmLLM(
        model_path=_required(s.llm_model_path, "llm_model_path", "vllm"),
        gpu_memory_utilization=s.vllm.gpu_memory_utilization,
        max_model_len=s.vllm.max_model_len,
    ),
)
tts_backends.register(
    "coqui",
    lambda s: CoquiTTS(
        model_path=_required(s.tts_voice_path, "tts_voice_path", "coqui"),
        config_path=s.coqui.config_path,
        device=s.coqui.device,
    ),
)


def create_models(spec: ModelSpec) -> ModelSet:
    """Build (without loading) the providers ``spec`` names; ValueError for an unknown name."""
    return ModelSet(
        asr=asr_backends.create(spec.asr, spec),
        llm=llm_backends.create(spec.llm, spec),
        tts=tts_backends.create(spec.tts, spec),
        vad=vad_backends.create(spec.vad, spec),
        embedder=None if spec.embedder is None else embedder_backends.create(spec.embedder, spec),
    )


async def load_models(
    spec: ModelSpec, *, progress: Callable[[str], None] | None = None
) -> ModelSet:
    """Create, load and warm every model of ``spec``, side by side: each loads on a thread
    of its own, and most of a load is importing a library (sentence-transformers alone took
    ~5 s of a node's start) or reading weights. ``progress`` hears of each as it is ready;
    the first failure is raised once every load has ended."""
    models = create_models(spec)
    kinds: list[tuple[str, Provider | None]] = [
        ("vad", models.vad),
        ("asr", models.asr),
        ("embedder", models.embedder),
        ("llm", models.llm),
        ("tts", models.tts),
    ]

    async def ready(kind: str, provider: Provider) -> None:
        started = time.monotonic()
        await provider.load()
        await provider.warm()
        if progress is not None:
            elapsed = time.monotonic() - started
            progress(f"loading {kind} ({provider.description})... {elapsed:.1f}s")

    loads = [ready(kind, provider) for kind, provider in kinds if provider is not None]
    outcomes = await asyncio.gather(*loads, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return models
