"""A Coqui TTS model as a TTS backend (the ``gpu`` extra). Not verified on CPU machines.

It imports ``TTS.api`` in ``_load`` and raises ``ProviderUnavailable`` when it is missing, so
choosing it by name fails clearly at start.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from serve.audio import float_to_pcm16, resample
from serve.errors import missing_gpu_library
from serve.tts import TTS


class CoquiOptions(BaseModel):
    """Coqui's options (``SWITCHBOARD_MODELS__COQUI__<FIELD>``)."""

    model_config = ConfigDict(extra="forbid")

    #: The model's config.json when ``tts_voice_path`` is a checkpoint file; None: the path is
    #: a Coqui model name or a folder with its config.
    config_path: str | None = None
    #: The torch device the model runs on.
    device: str = "cuda"


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
            raise missing_gpu_library("coqui-tts") from exc
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
