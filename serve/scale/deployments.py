"""The tier's Ray Serve application: one deployment per model kind, around the same
provider classes the in-process path loads (``serve.registry``).

Each replica creates its provider from the node's ``ModelSpec``, loads and warms it before it
takes requests, and reports the nodes' load for the autoscaling policy. The ``Tier`` ingress
holds a handle to each model deployment (it deploys them together and answers
``describe``); nodes call the model deployments directly, one hop per request.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

import numpy as np
import numpy.typing as npt
from ray import serve
from ray.serve.config import AutoscalingConfig, AutoscalingPolicy

from serve.asr import ASR, Transcription, Vocabulary
from serve.asr_twopass import TwoPassASR
from serve.base import WARMUP_TIMEOUT_S
from serve.embed import Embedder
from serve.errors import ProviderUnavailable
from serve.llm import LLM, ChatMessage
from serve.registry import (
    ModelSpec,
    asr_backends,
    embedder_backends,
    llm_backends,
    tts_backends,
)
from serve.scale.batching import embed_batch, in_one_pass_each, raise_if_error
from serve.scale.load import load_board
from serve.scale.settings import KINDS, DeploymentSettings, TierSettings
from serve.tts import TTS

log = logging.getLogger(__name__)

#: The deployment name of each model kind.
DEPLOYMENT_NAMES = {"asr": "ASR", "llm": "LLM", "tts": "TTS", "embedder": "Embedder"}
INGRESS_NAME = "Tier"
POLICY = "serve.scale.policy:CallQueuePolicy"


class _Replica:
    """What every model deployment's replica does besides its model's own method."""

    provider: Any

    async def _start(self, provider: Any, tier: dict[str, Any]) -> None:
        self.provider = provider
        self._tier = TierSettings.model_validate(tier)
        await provider.load()
        await provider.warm()
        # A caller's deadline is held by the node's client (``serve.scale.client``), which
        # cancels the request when it passes; here the limit only stops a model call that
        # hangs. Held to a turn's timeout too, a replica on a loaded machine failed work no
        # caller waits for (a node's start-up under ``unhurried``) that the node allowed.
        provider.timeout_s = max(provider.timeout_s, WARMUP_TIMEOUT_S)
        self._board = load_board(self._tier)

    async def check_health(self) -> None:
        """Serve's health check: a replica whose model is not loaded is replaced."""
        if not self.provider.loaded:
            raise RuntimeError(f"{self.provider.name} is not loaded")

    async def record_autoscaling_stats(self) -> dict[str, float]:
        """The nodes' calls in flight and queue depth, for ``CallQueuePolicy``."""
        totals: dict[str, float] = await self._board.totals.remote(self._tier.report_stale_s)
        return totals

    async def metrics(self) -> dict[str, float]:
        """The provider's counters and latency (``Provider.metrics``)."""
        result: dict[str, float] = self.provider.metrics()
        return result


class ASRDeployment(_Replica):
    async def __init__(self, spec: dict[str, Any], tier: dict[str, Any]) -> None:  # type: ignore[misc]  # Serve awaits an async constructor
        model = ModelSpec.model_validate(spec)
        asr: ASR = asr_backends.create(model.asr, model)
        await self._start(asr, tier)
        batching = self._tier.asr
        self._transcribe_together.set_max_batch_size(batching.max_batch_size)  # type: ignore[attr-defined]
        self._transcribe_together.set_batch_wait_timeout_s(batching.batch_wait_timeout_s)  # type: ignore[attr-defined]

    async def transcribe(
        self,
        pcm: bytes,
        sample_rate: int,
        vocabulary: Vocabulary | None = None,
        alternatives: int = 0,
    ) -> Transcription:
        """One utterance, heard by ``vocabulary``; batched with others that arrive
        together unless other readings are asked for (a beam search of its own)."""
        if alternatives:
            alone: Transcription = await self.provider.transcribe(
                pcm, sample_rate, vocabulary=vocabulary, alternatives=alternatives
            )
            return alone
        request = (pcm, sample_rate, vocabulary)
        result: Transcription = raise_if_error(await self._transcribe_together(request))
        return result

    async def second_pass(
        self, pcm: bytes, sample_rate: int, vocabulary: Vocabulary | None = None
    ) -> Transcription:
        """The same audio decoded by a two-pass recognizer's second one (the node asks on
        a turn that led nowhere: ``bot.pipeline.rehear``); one at a time, not batched."""
        if not isinstance(self.provider, TwoPassASR):
            raise ProviderUnavailable(f"{self.provider.name} has no second pass")
        return await self.provider.second_pass(pcm, sample_rate, vocabulary=vocabulary)

    @serve.batch(max_batch_size=4, batch_wait_timeout_s=0.002)
    async def _transcribe_together(
        self, requests: list[tuple[bytes, int, Vocabulary | None]]
    ) -> list[Transcription | Exception]:
        """Utterances of several calls that arrive together in one encoder pass and one
        batched decode, sized by ``TierSettings.asr.max_batch_size``/``batch_wait_timeout_s``;
        one pass per vocabulary (nodes of one configuration share one)."""

        async def run(
            vocabulary: Vocabulary | None, batch: list[tuple[bytes, int, Vocabulary | None]]
        ) -> list[Transcription]:
            items = [(pcm, rate) for pcm, rate, _ in batch]
            heard: list[Transcription] = await self.provider.transcribe_batch(
                items, vocabulary=vocabulary
            )
            return heard

        return await in_one_pass_each(requests, lambda request: request[2], run)


class LLMDeployment(_Replica):
    async def __init__(self, spec: dict[str, Any], tier: dict[str, Any]) -> None:  # type: ignore[misc]  # Serve awaits an async constructor
        model = ModelSpec.model_validate(spec)
        llm: LLM = llm_backends.create(model.llm, model)
        await self._start(llm, tier)

    async def stream(
        self, messages: list[ChatMessage], max_tokens: int, temperature: float
    ) -> AsyncGenerator[str, None]:
        pieces = self.provider.stream(messages, max_tokens=max_tokens, temperature=temperature)
        async with aclosing(pieces):
            async for piece in pieces:
                yield piece


class TTSDeployment(_Replica):
    async def __init__(self, spec: dict[str, Any], tier: dict[str, Any]) -> None:  # type: ignore[misc]  # Serve awaits an async constructor
        model = ModelSpec.model_validate(spec)
        tts: TTS = tts_backends.create(model.tts, model)
        await self._start(tts, tier)

    async def synthesize(self, text: str, sample_rate: int) -> AsyncGenerator[bytes, None]:
        chunks = self.provider.synthesize(text, sample_rate=sample_rate)
        async with aclosing(chunks):
            async for chunk in chunks:
                yield chunk


class EmbedderDeployment(_Replica):
    async def __init__(self, spec: dict[str, Any], tier: dict[str, Any]) -> None:  # type: ignore[misc]  # Serve awaits an async constructor
        model = ModelSpec.model_validate(spec)
        if model.embedder is None:
            raise ValueError("no embedder in the model spec")
        embedder: Embedder = embedder_backends.create(model.embedder, model)
        await self._start(embedder, tier)
        batching = self._tier.embedder
        self._embed_together.set_max_batch_size(batching.max_batch_size)  # type: ignore[attr-defined]
        self._embed_together.set_batch_wait_timeout_s(batching.batch_wait_timeout_s)  # type: ignore[attr-defined]

    async def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        vectors: npt.NDArray[np.float32] = raise_if_error(await self._embed_together(texts))
        return vectors

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.002)
    async def _embed_together(
        self, requests: list[list[str]]
    ) -> list[npt.NDArray[np.float32] | Exception]:
        """Requests that arrive together (several calls' lookups) in one model pass, sized
        by ``TierSettings.embedder.max_batch_size``/``batch_wait_timeout_s``."""
        return await embed_batch(requests, self.provider.embed)

    async def dim(self) -> int:
        return int(self.provider.dim)


class TierIngress:
    """The application's ingress: the model deployments it was bound to."""

    def __init__(self, **handles: Any) -> None:
        self._handles = handles

    async def describe(self) -> dict[str, str]:
        """Each model kind and the name of its deployment."""
        return {kind: handle.deployment_name for kind, handle in self._handles.items()}


_CLASSES: dict[str, type[_Replica]] = {
    "asr": ASRDeployment,
    "llm": LLMDeployment,
    "tts": TTSDeployment,
    "embedder": EmbedderDeployment,
}


def deployment_options(kind: str, tier: TierSettings) -> dict[str, Any]:
    """Serve options of ``kind``'s deployment: limits, health check, the policy."""
    d: DeploymentSettings = tier.deployment(kind)
    policy = AutoscalingPolicy(  # type: ignore[no-untyped-call]
        policy_function=POLICY,
        policy_kwargs={
            "min_replicas": d.min_replicas,
            "max_replicas": d.max_replicas,
            "calls_per_replica": d.calls_per_replica,
            "max_ongoing_requests": d.max_ongoing_requests,
        },
    )
    autoscaling = AutoscalingConfig(
        min_replicas=d.min_replicas,
        max_replicas=d.max_replicas,
        upscale_delay_s=tier.upscale_delay_s,
        downscale_delay_s=tier.downscale_delay_s,
        look_back_period_s=tier.look_back_s,
        aggregation_function="max",
        policy=policy,
    )
    actor: dict[str, Any] = {"num_cpus": d.num_cpus}
    if d.num_gpus:
        actor["num_gpus"] = d.num_gpus
    return {
        "name": DEPLOYMENT_NAMES[kind],
        "max_ongoing_requests": d.max_ongoing_requests,
        "max_queued_requests": d.max_queued_requests,
        "health_check_period_s": tier.health_check_period_s,
        "health_check_timeout_s": tier.health_check_timeout_s,
        "autoscaling_config": autoscaling,
        "ray_actor_options": actor,
        # A replica loads its model before it is ready: give it time on a busy machine.
        "graceful_shutdown_timeout_s": 5.0,
    }


def kinds_of(spec: ModelSpec) -> list[str]:
    """The model kinds ``spec`` deploys (no embedder deployment when it names none)."""
    return [k for k in KINDS if k != "embedder" or spec.embedder is not None]


def build_app(spec: ModelSpec, tier: TierSettings) -> Any:
    """The application: the model deployments of ``spec``, bound under the ingress."""
    spec_data, tier_data = spec.model_dump(), tier.model_dump()
    bound = {}
    for kind in kinds_of(spec):
        deployment = serve.deployment(**deployment_options(kind, tier))(_CLASSES[kind])
        bound[kind] = deployment.bind(spec_data, tier_data)
    ingress = serve.deployment(
        name=INGRESS_NAME, num_replicas=1, ray_actor_options={"num_cpus": 0}
    )(TierIngress)
    return ingress.bind(**bound)


def app_builder(args: dict[str, Any]) -> Any:
    """The application for a Serve config file (KubeRay's RayService, ``serve run``):
    ``import_path: serve.scale.deployments:app_builder``, ``args: {models: {...},
    tier: {...}}`` (the ``SWITCHBOARD_MODELS__*`` and ``SWITCHBOARD_TIER__*`` fields)."""
    spec = ModelSpec.model_validate(args.get("models") or {})
    tier = TierSettings.model_validate(args.get("tier") or {})
    return build_app(spec, tier)
