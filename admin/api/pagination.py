"""Paginated lists (``?limit=&offset=`` in, ``{items, total, limit, offset}`` out), and the
checked types of what clients send in queries: text for the database, times."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Generic, TypeVar

from fastapi import Depends, Query
from pydantic import AfterValidator, BaseModel, Field, WithJsonSchema

T = TypeVar("T")

MAX_LIMIT = 200
#: Far beyond any list here, and within every database's integer range.
MAX_OFFSET = 1_000_000_000


def _no_nul(text: str) -> str:
    if "\x00" in text:
        raise ValueError("must not contain NUL characters")
    return text


#: Free text that reaches the database: PostgreSQL text cannot hold a NUL character.
DbText = Annotated[
    str, AfterValidator(_no_nul), Field(json_schema_extra={"pattern": r"^[^\u0000]*$"})
]


#: The times a client may ask about: far beyond any call, and far enough from the datetime
#: limits that a window of days around them is still a time (year 1 and 9999 were 500s).
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)


def _in_range(at: datetime) -> datetime:
    refused = ValueError(f"must be from {EARLIEST:%Y-%m-%d} to before {LATEST:%Y-%m-%d} (UTC)")
    try:
        utc = at.astimezone(UTC) if at.tzinfo is not None else at.replace(tzinfo=UTC)
    except OverflowError:
        raise refused from None
    if not EARLIEST <= utc < LATEST:
        raise refused
    return utc


#: The schema's promise for a time: RFC 3339, of a year from 1901 to 8998 as written, which
#: is within EARLIEST..LATEST whatever its offset (the API takes the rest of the range too).
TIME_SCHEMA = {
    "type": "string",
    "format": "date-time",
    "pattern": r"^(190[1-9]|19[1-9][0-9]|[2-7][0-9]{3}|8[0-8][0-9]{2}|89[0-8][0-9]|899[0-8])-",
    "description": f"ISO 8601, from {EARLIEST:%Y-%m-%d} to before {LATEST:%Y-%m-%d} (UTC); "
    "without an offset: UTC",
}

#: A time given by a client, as UTC (none given: taken as UTC), within EARLIEST..LATEST.
ApiTime = Annotated[datetime, AfterValidator(_in_range), WithJsonSchema(TIME_SCHEMA)]


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
