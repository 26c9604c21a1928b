"""Several calls' requests in one model pass, each caller getting its own result back.

A deployment method decorated with ``@serve.batch`` receives the requests that arrived
together as one list. ``in_one_pass`` runs them through the model in one call (one pass of
n inputs costs less than n passes of one) and hands each its own result, in order.
If that pass fails, each request is retried on its own, so one bad request fails alone:
its slot holds the exception (Serve hands a returned exception to its caller as a value,
``raise_if_error`` re-raises it there) and the others get their results. ``embed_batch``
does this for the embedder (each request several texts), the ASR deployment for
utterances (``ASR.transcribe_batch``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]
Embed = Callable[[list[str]], Awaitable[Vectors]]
T = TypeVar("T")
R = TypeVar("R")
K = TypeVar("K", bound=Hashable)


async def in_one_pass(
    requests: Sequence[T], run: Callable[[list[T]], Awaitable[Sequence[R]]]
) -> list[R | Exception]:
    """``run`` on all ``requests`` at once, each request's result in its slot, in order;
    if that fails, each request alone, a failing one's slot holding its exception."""
    batch = list(requests)
    try:
        results = await run(batch)
        if len(results) != len(batch):
            raise ValueError(f"{len(results)} results for {len(batch)} requests")
        return list(results)
    except Exception as exc:
        if len(batch) == 1:
            return [exc]
        log.warning("a batch of %d requests failed (%s); one by one", len(batch), exc)
        return [await _alone(request, run) for request in batch]


async def in_one_pass_each(
    requests: Sequence[T],
    key: Callable[[T], K],
    run: Callable[[K, list[T]], Awaitable[Sequence[R]]],
) -> list[R | Exception]:
    """``in_one_pass`` for the requests of each ``key`` apart (``run(key, requests)``),
    results in the requests' order: utterances heard by different vocabularies cannot
    share a decode's prompt."""
    out: list[R | Exception | None] = [None] * len(requests)
    groups: dict[K, list[int]] = {}
    for i, request in enumerate(requests):
        groups.setdefault(key(request), []).append(i)
    for value, members in groups.items():

        async def one(batch: list[T], value: K = value) -> Sequence[R]:
            return await run(value, batch)

        results = await in_one_pass([requests[i] for i in members], one)
        for i, result in zip(members, results, strict=True):
            out[i] = result
    return [r for r in out if r is not None]


async def _alone(request: T, run: Callable[[list[T]], Awaitable[Sequence[R]]]) -> R | Exception:
    try:
        (result,) = await run([request])
        return result
    except Exception as exc:
        return exc


async def embed_batch(requests: Sequence[list[str]], embed: Embed) -> list[Vectors | Exception]:
    """The vectors of each request of ``requests``, in order, from as few ``embed`` calls
    as the requests allow (one when none fails)."""

    async def run(batch: list[list[str]]) -> list[Vectors]:
        flat = [text for texts in batch for text in texts]
        vectors = await embed(flat)
        if len(vectors) != len(flat):
            raise ValueError(f"{len(vectors)} vectors for {len(flat)} texts")
        out, start = [], 0
        for texts in batch:
            out.append(vectors[start : start + len(texts)])
            start += len(texts)
        return out

    return await in_one_pass(requests, run)


def raise_if_error(result: T | Exception) -> T:
    """``result``, or raise it when the batch put an exception in this request's slot."""
    if isinstance(result, Exception):
        raise result
    return result
