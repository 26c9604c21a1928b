"""The ``ray`` backend: providers that call the tier's deployments through Serve handles.

Each is a subclass of its kind's interface (``ASR``, ``LLM``, ``TTS``, ``Embedder``), so the
pipeline cannot tell it from an in-process model: the same timeouts, retries, metrics and
stage timings (``Provider``), the same streams. A request the tier refuses (its queue is
full: ``BackPressureError``) or loses (a replica died) is a retryable ``ProviderError``: the
call hears a filler while it is retried once, then the apology; never silence.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from ray import serve
from ray.exceptions import RayActorError, RayTaskError
from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError

from serve.asr import ASR, Transcription, Vocabulary
from serve.audio import check_pcm
from serve.base import Provider
from serve.embed import Embedder
from serve.errors import ProviderError, ProviderUnavailable
from serve.llm import LLM, ChatMessage
from serve.priority_pool import Priority, Urgency
from serve.registry import (
    asr_backends,
    embedder_backends,
    llm_backends,
    tts_backends,
)
from serve.scale.deployments import DEPLOYMENT_NAMES
from serve.timing import StageTimings
from serve.tts import TTS


def tier_error(name: str, exc: BaseException) -> ProviderError:
    """A Ray or Serve failure as the ``ProviderError`` the pipeline handles."""
    # First: the error a replica raised arrives as a RayTaskError that may also be an
    # instance of its cause's class, without the cause's attributes.
    if isinstance(exc, RayTaskError):
        cause = exc.cause
        if isinstance(cause, ProviderError):
            # The replica's model failed: same message and retry advice as in-process.
            return ProviderError(str(cause), retryable=cause.retryable)
        return ProviderError(f"{name} failed on the tier: {cause!r}")
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, BackPressureError):
        return ProviderError(f"{name}: the tier's queue is full", retryable=True)
    if isinstance(exc, RayActorError):
        return ProviderError(f"{name}: the replica was lost: {exc!r}", retryable=True)
    if isinstance(exc, DeploymentUnavailableError):
        return ProviderUnavailable(f"{name}: the deployment is not running: {exc!r}")
    return ProviderError(f"{name} failed on the tier: {exc!r}")


class _RemoteModel(Provider):
    """What the ``ray`` backends share: the handle to their deployment."""

    kind = ""

    def _init_remote(self, app_name: str) -> None:
        self.app_name = app_name
        self.deployment = DEPLOYMENT_NAMES[self.kind]
        self.handle: Any = None

    @property
    def description(self) -> str:
        return f"{self.app_name}/{self.deployment} on ray"

    def _load(self) -> None:
        try:
            self.handle = serve.get_deployment_handle(self.deployment, self.app_name)
        except Exception as exc:  # no such application or deployment
            raise ProviderUnavailable(f"{self.description}: {exc}") from exc

    def _wrap(self, exc: Exception) -> ProviderError:
        return tier_error(self.name, exc)

    def _remote_stream(self, method: str, *args: Any) -> AsyncIterator[Any]:
        """The items of a streaming deployment method; closing it cancels the request."""
        return _cancelling(getattr(self.handle.options(stream=True), method).remote(*args))


async def _cancelling(response: Any) -> AsyncGenerator[Any, None]:
    try:
        async for item in response:
            yield item
    finally:
        response.cancel()


class RayASR(_RemoteModel, ASR):
    kind = "asr"

    def __init__(self, *, app_name: str, timeout_s: float = 5.0, retries: int = 1) -> None:
        ASR.__init__(self, timeout_s=timeout_s, retries=retries, name="ray-asr")
        self._init_remote(app_name)

    async def transcribe(
        self,
        pcm: bytes,
        sample_rate: int,
        *,
        vocabulary: Vocabulary | None = None,
        alternatives: int = 0,
        timings: StageTimings | None = None,
        priority: Priority | Urgency | None = None,
    ) -> Transcription:
        # ``priority`` orders the node's own pool; the tier's replicas batch what reaches
        # them together, with no queue of the node's to put one call before another.
        return await self._decode(
            "transcribe", "asr", timings, pcm, sample_rate, vocabulary, alternatives
        )

    async def _decode(
        self, method: str, stage: str, timings: StageTimings | None, pcm: bytes, *args: Any
    ) -> Transcription:
        """``pcm`` (and the rest of ``args``: its rate, the vocabulary...) decoded by the
        deployment's ``method``, timed as ``stage``."""
        check_pcm(pcm, args[0])

        async def work() -> Transcription:
            result: Transcription = await getattr(self.handle, method).remote(pcm, *args)
            return result

        return await self._call_async(stage, work, timings)

    async def transcribe_batch(
        self,
        items: Sequence[tuple[bytes, int]],
        *,
        vocabulary: Vocabulary | None = None,
        timings: StageTimings | None = None,
        priority: Priority | Urgency | None = None,
    ) -> list[Transcription]:
        # One request each: the deployment batches what reaches a replica together.
        return list(
            await asyncio.gather(
                *(self.transcribe(p, r, vocabulary=vocabulary, timings=timings) for p, r in items)
            )
        )

    def _transcribe_impl(self, pcm: bytes, sample_rate: int) -> Transcription:
        raise ProviderUnavailable("runs on the tier: transcribe() calls the deployment")


class RayTwoPassASR(RayASR):
    """The tier's recognizer when its deployment has two passes (``whisper-window+base``,
    the default): ``second_pass`` asks the deployment's second one, so that a node on the
    tier hears a turn again as an embedded one does (``bot.pipeline.rehear``)."""

    async def second_pass(
        self,
        pcm: bytes,
        sample_rate: int,
        *,
        vocabulary: Vocabulary | None = None,
        timings: StageTimings | None = None,
        priority: Priority | Urgency | None = None,
    ) -> Transcription:
        return await self._decode(
            "second_pass", "asr_second", timings, pcm, sample_rate, vocabulary
        )


class RayLLM(_RemoteModel, LLM):
    kind = "llm"

    def __init__(self, *, app_name: str, timeout_s: float = 10.0, retries: int = 1) -> None:
        LLM.__init__(self, timeout_s=timeout_s, retries=retries, name="ray-llm")
        self._init_remote(app_name)

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
                lambda: self._remote_stream("stream", prompt, max_tokens, temperature),
                timings,
            )
        )

    def _stream_impl(
        self, messages: Sequence[ChatMessage], max_tokens: int, temperature: float
    ) -> Iterator[str]:
        raise ProviderUnavailable("runs on the tier: stream() calls the deployment")


class RayTTS(_RemoteModel, TTS):
    kind = "tts"

    def __init__(self, *, app_name: str, timeout_s: float = 5.0, retries: int = 1) -> None:
        TTS.__init__(self, timeout_s=timeout_s, retries=retries, name="ray-tts")
        self._init_remote(app_name)

    def synthesize(
        self, text: str, *, sample_rate: int = 8000, timings: StageTimings | None = None
    ) -> AsyncGenerator[bytes, None]:
        if sample_rate <= 0:
            raise ValueError(f"sample_rate must be positive, got {sample_rate}")
        return self._stream_async(
            "tts_first_chunk",
            "tts_total",
            lambda: self._remote_stream("synthesize", text, sample_rate),
            timings,
        )

    def _synthesize_impl(self, text: str, sample_rate: int) -> Iterator[bytes]:
        raise ProviderUnavailable("runs on the tier: synthesize() calls the deployment")


class RayEmbedder(_RemoteModel, Embedder):
    kind = "embedder"

    def __init__(self, *, app_name: str, timeout_s: float = 2.0, retries: int = 1) -> None:
        Embedder.__init__(self, timeout_s=timeout_s, retries=retries, name="ray-embedder")
        self._init_remote(app_name)

    def _load(self) -> None:
        super()._load()
        self.dim = int(self.handle.dim.remote().result())

    async def embed(
        self,
        texts: list[str],
        *,
        timings: StageTimings | None = None,
        priority: Priority | Urgency | None = None,
    ) -> npt.NDArray[np.float32]:
        self._check_loaded()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        batch = list(texts)

        async def work() -> npt.NDArray[np.float32]:
            vectors: npt.NDArray[np.float32] = await self.handle.embed.remote(batch)
            return vectors

        return await self._call_async("embed", work, timings)

    def _embed_impl(self, texts: list[str]) -> npt.NDArray[np.float32]:
        raise ProviderUnavailable("runs on the tier: embed() calls the deployment")


#: The name the tier's remote backends are registered under, for each kind the tier serves.
RAY = "ray"


def register_ray_backends(app_name: str, *, second_pass: bool = False) -> None:
    """Register the remote backends of the tier's application ``app_name`` as ``ray``, like
    every other backend (the VAD has none: it runs in the node on every 20 ms frame).
    ``second_pass``: the ASR deployment has a second recognizer (``RayTwoPassASR``)."""
    asr = RayTwoPassASR if second_pass else RayASR
    asr_backends.register(RAY, lambda s: asr(app_name=app_name))
    llm_backends.register(RAY, lambda s: RayLLM(app_name=app_name))
    tts_backends.register(RAY, lambda s: RayTTS(app_name=app_name))
    embedder_backends.register(RAY, lambda s: RayEmbedder(app_name=app_name))
