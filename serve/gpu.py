"""GPU backends behind the same interfaces: vLLM (LLM), NeMo (ASR), Coqui (TTS).

Not verified on CPU machines: their libraries (the ``gpu`` extra) need CUDA and cannot be
installed where this was written. Each imports its library in ``_load`` (``import_module``:
the libraries have no type stubs here) and raises ``ProviderUnavailable`` when it is missing,
so choosing one by name fails clearly at start.
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from serve.asr import ASR, Transcription
from serve.audio import float_to_pcm16, pcm16_to_float, resample
from serve.errors import ProviderUnavailable
from serve.llm import LLM, ChatMessage
from serve.tts import TTS


def _missing(library: str, extra: str) -> ProviderUnavailable:
    return ProviderUnavailable(
        f"{library} is not installed: install the {extra!r} extra on a GPU node"
    )


class VllmLLM(LLM):
    """vLLM's synchronous engine, stepped on one worker thread. Not verified on CPU machines.

    One request at a time; a GPU deployment that batches calls should put ``ray.serve.llm``
    or vLLM's async engine behind this interface instead.
    """

    name = "vllm"
    thread_safe = False

    def __init__(self, *, model_path: str, timeout_s: float = 10.0, retries: int = 1) -> None:
        super().__init__(timeout_s=timeout_s, retries=retries)
        self.model_path = model_path
        self._engine: Any = None
        self._sampling_params: Any = None

    def _load(self) -> None:
        try:
            vllm = importlib.import_module("vllm")
        except ImportError as exc:
            raise _missing("vllm", "gpu") from exc
        self._engine = vllm.LLMEngine.from_engine_args(vllm.EngineArgs(model=self.model_path))
        self._sampling_params = vllm.SamplingParams

    def _stream_impl(
        self, messages: Sequence[ChatMessage], max_tokens: int, temperature: float
    ) -> Iterator[str]:
        prompt = self._engine.get_tokenizer().apply_chat_template(
            [{"role": m.role, "content": m.content} for m in messages],
            tokenize=False,
            add_generation_prompt=True,
        )
        request_id = uuid.uuid4().hex
        params = self._sampling_params(max_tokens=max_tokens, temperature=temperature)
        self._engine.add_request(request_id, prompt, params)
        sent = 0
        try:
            while self._engine.has_unfinished_requests():
                for output in self._engine.step():
                    text = output.outputs[0].text
                    if len(text) > sent:
                        yield text[sent:]
                        sent = len(text)
        finally:
            self._engine.abort_request([request_id])


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
