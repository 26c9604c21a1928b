"""A NeMo ASR model as an ASR backend (the ``gpu`` extra). Not verified on CPU machines.

It imports NeMo in ``_load`` and raises ``ProviderUnavailable`` when it is missing, so choosing
it by name fails clearly at start.
"""

from __future__ import annotations

import importlib
from typing import Any

from serve.asr import ASR, Transcription
from serve.audio import pcm16_to_float, resample
from serve.errors import missing_gpu_library


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
            raise missing_gpu_library("nemo_toolkit[asr]") from exc
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
