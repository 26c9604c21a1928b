"""Sentence embeddings: the Embedder interface."""

from __future__ import annotations

import abc

import numpy as np
import numpy.typing as npt

from serve.base import Provider
from serve.timing import StageTimings


class Embedder(Provider):
    """Texts to L2-normalised float32 vectors of shape (n, dim)."""

    name = "embedder"
    dim: int = 0
    """Vector size; set by ``_load``."""

    def __init__(self, *, timeout_s: float = 2.0, retries: int = 1, name: str | None = None):
        super().__init__(timeout_s=timeout_s, retries=retries, name=name)

    async def embed(
        self, texts: list[str], *, timings: StageTimings | None = None
    ) -> npt.NDArray[np.float32]:
        """Embed ``texts``; rows are unit length (an all-zero vector stays zero)."""
        self._check_loaded()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        batch = list(texts)
        vectors = await self._call("embed", lambda: self._embed_impl(batch), timings)
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(batch), -1)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        normalised: npt.NDArray[np.float32] = vectors / np.maximum(norms, 1e-12)
        return normalised

    async def warmup(self) -> None:
        """Embed one short sentence."""
        await self.embed(["hello"])
        self._reset_metrics()

    @abc.abstractmethod
    def _embed_impl(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Blocking embedding of a non-empty batch; runs on a worker thread."""
