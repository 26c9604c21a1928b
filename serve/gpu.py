"""GPU backends behind the same interfaces: vLLM (LLM), NeMo (ASR), Coqui (TTS).

Not verified on CPU machines: their libraries (the ``gpu`` extra) need CUDA and cannot be
installed where this was written. ``VllmLLM``'s streaming and abort logic is unit-tested
against a stand-in for vLLM's async engine (tests/serve/test_gpu_vllm.py). Each imports
its library in ``_load`` (``import_module``: the libraries have no type stubs here) and
raises ``ProviderUnavailable`` when it is missing, so choosing one by name fails clearly at
start.
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import AsyncGenerator, Iterator, Sequence
from typing import Any

import numpy as np

from serve.asr import ASR, Transcription
from serve.audio import float_to_pcm16, pcm16_to_float, resample
from serve.errors import ProviderUnavailable
from serve.llm import LLM, ChatMessage
from serve.timing import StageTimings
from serve.tts import TTS


def _missing(library: str, extra: str) -> ProviderUnavailable:
    return ProviderUnavailable(
        f"{library} is not installed: install the {extra!r} extra on a GPU node"
    )


class VllmLLM(LLM):
    """vLLM's async engine: every request streams as vLLM batches it with the others
    (continuous batching, prefix caching for the shared system prompt). Not verified on a
    GPU here: its unit test drives it through a stand-in for the ``vllm`` module.

    The engine runs on the event loop that calls ``stream`` (vLLM's own background loop);
    closing a stream aborts its request in the engine.
    """

    name = "vllm"
    #: Many requests at once: vLLM batches them itself.
    kv_slots = None

    def __init__(
        self,
        *,
        model_path: str,
        timeout_s: float = 10.0,
        retries: int = 1,
        gpu_memory_utilization: float = 0.85,
        max_model_len: int = 4096,
    ) -> None:
        super().__init__(timeout_s=timeout_s, retries=retries)
        self.model_path = model_path
        self.gpu_memory_utilization = gpu_memory_utilization
        self.max_model_len = max_model_len
        self._engine: Any = None
        self._sampling_params: Any = None
        self._tokenizer: Any = None

    def _load(self) -> None:
        try:
            vllm = importlib.import_module("vllm")
        except ImportError as exc:
            raise _missing("vllm", "gpu") from exc
        args = vllm.AsyncEngineArgs(
            model=self.model_path,
            enable_prefix_caching=True,
            gpu_memory_utilization=self.gpu_memory_utilization,
            max_model_len=self.max_model_len,
        )
        self._engine = vllm.AsyncLLMEngine.from_engine_args(args)
        self._sampling_params = vllm.SamplingParams
        transformers = importlib.import_module("transformers")  # a dependency of vllm
        self._tokenizer = transformers.AutoTokenizer.from_pretrained(self.model_path)

    def prompt(self, messages: Sequence[ChatMessage]) -> str:
        """The model's chat template applied to ``messages``."""
        text: str = self._tokenizer.apply_chat_template(
            [{"role": m.role, "content": m.content} for m in messages],
            tokenize=False,
            add_generation_prompt=True,
        )
        return text

    def stream(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int = 96,
        temperature: float = 0.3,
        timings: StageTimings | None = None,
    ) -> AsyncGenerator[str, None]:
        prompt = self._checked(messages, max_tokens)
        return self._counted(
            self._stream_async(
                "llm_first_token",
                "llm_total",
                lambda: self._generate(prompt, max_tokens, temperature),
                timings,
            )
        )

    async def _generate(
        self, messages: Sequence[ChatMessage], max_tokens: int, temperature: float
    ) -> AsyncGenerator[str, None]:
        request_id = uuid.uuid4().hex
        params = self._sampling_params(max_tokens=max_tokens, temperature=temperature)
        outputs = self._engine.generate(self.prompt(messages), params, request_id)
        sent = 0
        finished = False
        try:
            async for output in outputs:
                text = output.outputs[0].text
                if len(text) > sent:
                    yield text[sent:]
                    sent = len(text)
                finished = bool(output.finished)
        finally:
            if not finished:
                await self._engine.abort(request_id)

    def _stream_impl(
        self, messages: Sequence[ChatMessage], max_tokens: int, temperature: float
    ) -> Iterator[str]:
        raise ProviderUnavailable("vllm streams on the event loop: stream() drives it")


class NemoASR(ASR):
    """A NeMo ASR model (``.nemo`` file or NGC name) at 16 kHz. Not verified on CPU machines."""

    name = "nemo"

    def __init__(self, *, model_path: str, timeout_s: float = 5.0, retries: int = 1) -> None:
        super().__init__(timeout_s=timeout_s, retries=retries)
        self.model_path = model_path
        self._model: Any = None

    def _load(self) -> None:
        try:
            models = importlib.import_module("nemo.collections.asr.models")
        except ImportError as exc:
            raise _missing("nemo_toolkit[asr]", "gpu") from exc
        if self.model_path.endswith(".nemo"):
            self._model = models.ASRModel.restore_from(self.model_path)
        else:
            self._model = models.ASRModel.from_pretrained(self.model_path)
        self._model.eval()

    def _transcribe_impl(self, pcm: bytes, sample_rate: int) -> Transcription:
        audio = resample(pcm16_to_float(pcm), sample_rate, 16000)
        result = self._model.transcribe([audio], batch_size=1, verbose=False)[0]
        text = result if isinstance(result, str) else str(result.text)
        # NeMo reports no calibrated confidence or no-speech probability by default.
        return Transcription(
            text=text.strip(),
            confidence=1.0 if text.strip() else 0.0,
            audio_ms=1000.0 * audio.shape[0] / 16000,
            no_speech_prob=0.0 if text.strip() else 1.0,
        )


class CoquiTTS(TTS):
    """A Coqui TTS model (``coqui-tts``), one chunk per text. Not verified on CPU machines."""

    name = "coqui"

    def __init__(
        self,
        *,
        model_path: str,
        config_path: str | None = None,
        device: str = "cuda",
        timeout_s: float = 5.0,
        retries: int = 1,
    ) -> None:
        super().__init__(timeout_s=timeout_s, retries=retries)
        self.model_path = model_path
        self.config_path = config_path
        self.device = device
        self._tts: Any = None

    def _load(self) -> None:
        try:
            coqui_api = importlib.import_module("TTS.api")
        except ImportError as exc:
            raise _missing("coqui-tts", "gpu") from exc
        if self.config_path is not None:
            api = coqui_api.TTS(model_path=self.model_path, config_path=self.config_path)
        else:
            api = coqui_api.TTS(self.model_path)
        self._tts = api.to(self.device)

    def _synthesize_impl(self, text: str, sample_rate: int) -> Iterator[bytes]:
        if not text.strip():
            return
        samples = np.asarray(self._tts.tts(text), dtype=np.float32)
        rate = int(self._tts.synthesizer.output_sample_rate)
        yield float_to_pcm16(resample(samples, rate, sample_rate))
