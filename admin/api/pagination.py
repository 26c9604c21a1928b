"""Paginated lists: ``?limit=&offset=`` in, ``{items, total, limit, offset}`` out."""

from __future__ import annotations

from typing import Annotated, Generic, TypeVar

from fastapi import Depends, Query
from pydantic import BaseModel

T = TypeVar("T")

MAX_LIMIT = 200


class Page(BaseModel, Generic[T]):
    """One page of a list, and how many there are in all."""

    items: list[T]
    total: int
    limit: int
    offset: int


class PageParams(BaseModel):
    limit: int
    offset: int


def page_params(
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="items per page")] = 50,
    offset: Annotated[int, Query(ge=0, description="items to skip")] = 0,
) -> PageParams:
    return PageParams(limit=limit, offset=offset)


PageDep = Annotated[PageParams, Depends(page_params)]
