"""Sentence embeddings: the Embedder interface."""

from __future__ import annotations

import abc
from collections import OrderedDict

import numpy as np
import numpy.typing as npt

from serve.base import Provider
from serve.priority_pool import Priority, Urgency
from serve.timing import StageTimings

#: Single texts remembered with their vectors, most recently used last.
MEMO_SIZE = 512


class Embedder(Provider):
    """Texts to L2-normalised float32 vectors of shape (n, dim).

    A single text embedded lately is answered from memory: one turn's words are looked up
    by the intent cache while the caller pauses, then again when the turn ends, then in the
    knowledge base (the second hearing's check and the responder), each the same query.
    Batches (a profile's examples at load) are always embedded.
    """

    name = "embedder"
    dim: int = 0
    """Vector size; set by ``_load``."""

    def __init__(self, *, timeout_s: float = 2.0, retries: int = 1, name: str | None = None):
        super().__init__(timeout_s=timeout_s, retries=retries, name=name)
        self._memo: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()
        #: Single texts answered from memory (metrics, tests).
        self.memo_hits = 0

    async def embed(
        self,
        texts: list[str],
        *,
        timings: StageTimings | None = None,
        priority: Priority | Urgency | None = None,
    ) -> npt.NDArray[np.float32]:
        """Embed ``texts``; rows are unit length (an all-zero vector stays zero).

        ``priority`` as in ``ASR.transcribe``: ``Urgency.AHEAD`` for a lookup in the
        caller's pause (dropped with ``WorkDropped`` over its budget), ``NOW`` once the
        turn has ended; None: the calling context's. A text answered from memory never
        waits, whatever its priority."""
        self._check_loaded()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        single = texts[0] if len(texts) == 1 else None
        if single is not None and (seen := self._memo.get(single)) is not None:
            self._memo.move_to_end(single)
            self.memo_hits += 1
            return seen.copy()
        batch = list(texts)
        vectors = await self._call("embed", lambda: self._embed_impl(batch), timings, priority)
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(batch), -1)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        normalised: npt.NDArray[np.float32] = vectors / np.maximum(norms, 1e-12)
        if single is not None:
            self._memo[single] = normalised.copy()
            while len(self._memo) > MEMO_SIZE:
                self._memo.popitem(last=False)
        return normalised

    async def warmup(self) -> None:
        """Embed one short sentence."""
        await self.embed(["hello"])
        self._memo.clear()  # a caller's "hello" is embedded as any turn is
        self._reset_metrics()

    @abc.abstractmethod
    def _embed_impl(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Blocking embedding of a non-empty batch; runs on a worker thread."""
