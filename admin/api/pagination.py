"""Paginated lists: ``?limit=&offset=`` in, ``{items, total, limit, offset}`` out."""

from __future__ import annotations

from typing import Annotated, Generic, TypeVar

from fastapi import Depends, Query
from pydantic import AfterValidator, BaseModel

T = TypeVar("T")

MAX_LIMIT = 200
#: Far beyond any list here, and within every database's integer range.
MAX_OFFSET = 1_000_000_000


def _no_nul(text: str) -> str:
    if "\x00" in text:
        raise ValueError("must not contain NUL characters")
    return text


#: Free text that reaches the database: PostgreSQL text cannot hold a NUL character.
DbText = Annotated[str, AfterValidator(_no_nul)]


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
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description="items to skip")] = 0,
) -> PageParams:
    return PageParams(limit=limit, offset=offset)


PageDep = Annotated[PageParams, Depends(page_params)]
