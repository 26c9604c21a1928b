"""Switchboard's model tier: ASR, LLM, TTS, VAD and embeddings behind async provider interfaces.

Model libraries are imported only when a provider loads, so importing ``serve`` is cheap.
"""

from serve.asr import ASR, Transcription
from serve.asr_nemo import NemoASR
from serve.asr_twopass import TwoPassASR
from serve.asr_whisper import WhisperASR
from serve.base import Provider
from serve.embed import Embedder
from serve.embed_minilm import MiniLMEmbedder
from serve.errors import ProviderError, ProviderTimeout, ProviderUnavailable
from serve.llm import LLM, ChatMessage
from serve.llm_llamacpp import LlamaCppLLM
from serve.llm_vllm import VllmLLM
from serve.registry import (
    Backends,
    ModelSet,
    ModelSpec,
    asr_backends,
    create_models,
    embedder_backends,
    llm_backends,
    load_models,
    tts_backends,
    vad_backends,
)
from serve.timing import StageTimings
from serve.tts import TTS
from serve.tts_coqui import CoquiTTS
from serve.tts_flite import FliteTTS
from serve.tts_piper import PiperTTS
from serve.vad import VAD, VadStream
from serve.vad_silero import SileroVAD
from serve.vad_webrtc import WebRtcVAD

__all__ = [
    "ASR",
    "LLM",
    "TTS",
    "VAD",
    "Backends",
    "ChatMessage",
    "CoquiTTS",
    "Embedder",
    "FliteTTS",
    "LlamaCppLLM",
    "MiniLMEmbedder",
    "ModelSet",
    "ModelSpec",
    "NemoASR",
    "PiperTTS",
    "Provider",
    "ProviderError",
    "ProviderTimeout",
    "ProviderUnavailable",
    "SileroVAD",
    "StageTimings",
    "Transcription",
    "TwoPassASR",
    "VadStream",
    "VllmLLM",
    "WebRtcVAD",
    "WhisperASR",
    "asr_backends",
    "create_models",
    "embedder_backends",
    "llm_backends",
    "load_models",
    "tts_backends",
    "vad_backends",
]
