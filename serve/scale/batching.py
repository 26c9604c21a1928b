"""Several calls' requests in one model pass, each caller getting its own result back.

A deployment method decorated with ``@serve.batch`` receives the requests that arrived
together as one list. ``embed_batch`` runs their texts through the model in one call (one
pass of n sentences costs less than n passes of one) and splits the vectors back, in order.
If that pass fails, each request is retried on its own, so one bad request fails alone:
its slot holds the exception (Serve hands a returned exception to its caller as a value,
``raise_if_error`` re-raises it there) and the others get their vectors.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]
Embed = Callable[[list[str]], Awaitable[Vectors]]
T = TypeVar("T")


async def embed_batch(requests: Sequence[list[str]], embed: Embed) -> list[Vectors | Exception]:
    """The vectors of each request of ``requests``, in order, from as few ``embed`` calls
    as the requests allow (one when none fails)."""
    flat = [text for texts in requests for text in texts]
    try:
        vectors = await embed(flat)
        if len(vectors) != len(flat):
            raise ValueError(f"{len(vectors)} vectors for {len(flat)} texts")
    except Exception as exc:
        if len(requests) == 1:
            return [exc]
        log.warning("batched embedding of %d requests failed (%s); one by one", len(requests), exc)
        return [await _alone(texts, embed) for texts in requests]
    out: list[Vectors | Exception] = []
    start = 0
    for texts in requests:
        out.append(vectors[start : start + len(texts)])
        start += len(texts)
    return out


async def _alone(texts: list[str], embed: Embed) -> Vectors | Exception:
    try:
        return await embed(texts)
    except Exception as exc:
        return exc


def raise_if_error(result: T | Exception) -> T:
    """``result``, or raise it when the batch put an exception in this request's slot."""
    if isinstance(result, Exception):
        raise result
    return result
