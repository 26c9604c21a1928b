"""The embedder deployment's batching: requests of several calls in one model pass,
results back in order, one bad request failing alone."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from serve.scale.batching import embed_batch, in_one_pass, raise_if_error
from serve.scale.settings import DeploymentSettings


class CountingEmbedder:
    """A boundary stand-in: each text's vector is [its length, its index in the pass]."""

    def __init__(self, bad: str | None = None) -> None:
        self.passes: list[list[str]] = []
        self.bad = bad

    async def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.passes.append(list(texts))
        if self.bad is not None and self.bad in texts:
            raise ValueError(f"cannot embed {self.bad!r}")
        return np.array([[len(t), i] for i, t in enumerate(texts)], dtype=np.float32)


async def test_requests_share_one_pass_and_get_their_own_vectors_in_order() -> None:
    model = CountingEmbedder()
    requests = [["a"], ["bb", "ccc"], ["dddd"]]
    results = await embed_batch(requests, model.embed)
    assert model.passes == [["a", "bb", "ccc", "dddd"]]
    vectors = [raise_if_error(r) for r in results]
    assert [v[:, 0].tolist() for v in vectors] == [[1.0], [2.0, 3.0], [4.0]]
    assert [v[:, 1].tolist() for v in vectors] == [[0.0], [1.0, 2.0], [3.0]]


async def test_one_bad_request_fails_alone() -> None:
    model = CountingEmbedder(bad="boom")
    results = await embed_batch([["a"], ["boom", "x"], ["ccc"]], model.embed)
    assert model.passes[0] == ["a", "boom", "x", "ccc"]  # tried together first
    assert raise_if_error(results[0])[:, 0].tolist() == [1.0]
    assert raise_if_error(results[2])[:, 0].tolist() == [3.0]
    with pytest.raises(ValueError, match="boom"):
        raise_if_error(results[1])


async def test_a_short_answer_from_the_model_is_an_error_not_a_shifted_result() -> None:
    async def short(texts: list[str]) -> npt.NDArray[np.float32]:
        return np.zeros((max(0, len(texts) - 1), 2), dtype=np.float32)

    results = await embed_batch([["a", "b"]], short)
    with pytest.raises(ValueError, match="1 vectors for 2 texts"):
        raise_if_error(results[0])


async def test_any_requests_share_a_pass_and_a_failing_one_fails_alone() -> None:
    passes: list[list[str]] = []

    async def shout(batch: list[str]) -> list[str]:
        passes.append(batch)
        if "bad" in batch:
            raise RuntimeError("cannot read 'bad'")
        return [b.upper() for b in batch]

    assert await in_one_pass(["a", "b"], shout) == ["A", "B"]
    assert passes == [["a", "b"]]
    results = await in_one_pass(["a", "bad", "c"], shout)
    assert passes[1:] == [["a", "bad", "c"], ["a"], ["bad"], ["c"]]
    assert results[0] == "A" and results[2] == "C"
    with pytest.raises(RuntimeError, match="bad"):
        raise_if_error(results[1])

    async def short(batch: list[str]) -> list[str]:
        return batch[:-1]

    with pytest.raises(ValueError, match="0 results for 1 requests"):
        raise_if_error((await in_one_pass(["x"], short))[0])


def test_batch_settings_are_bounded() -> None:
    assert DeploymentSettings().max_batch_size == 16
    with pytest.raises(ValueError):
        DeploymentSettings(max_batch_size=0)
    with pytest.raises(ValueError):
        DeploymentSettings(batch_wait_timeout_s=-1)
