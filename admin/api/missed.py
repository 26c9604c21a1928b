"""Missed questions: what callers asked that the bot did not answer from its configuration.

A caller's turn is missed when it was routed to the honest fallback ("I am not sure...")
or only to a confirmation question (the nearest intent or entry was not near enough to
answer). Turns are grouped by their words as the intent matcher compares them
(``bot.intents.match.normalize``: case, punctuation and hesitations aside), most frequent
first; words that are already an intent's example or negative, or a knowledge question, in
the newest configuration are left out (an editor added them: they are no longer missed).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel
from sqlalchemy import select

from admin.api.pagination import Page, PageDep
from admin.db import aware, now
from admin.deps import SessionDep, Viewer
from bot.calllog.models import TurnRow
from bot.config import store as config_store
from bot.intents.match import normalize
from bot.profile import BotProfile

router = APIRouter(prefix="/api/v1", tags=["calls"])

#: The routes of a turn the configuration did not answer.
MISSED_ROUTES = ("fallback", "confirm")
#: The newest missed turns looked at, at most: a bound on one request's work.
MAX_SCAN = 5000
MAX_DAYS = 365


class MissedQuestion(BaseModel):
    """Callers' words the bot did not answer, grouped by what the matcher compares."""

    #: The words as last said (what an editor adds as an example).
    text: str
    #: The group's words as the matcher compares them.
    normalized: str
    count: int
    last_seen: datetime
    #: How each was routed: ``fallback`` (not sure) or ``confirm`` (asked about ``intent``).
    routes: dict[str, int]
    #: The intent or knowledge topic the bot asked about last (route ``confirm``), if any.
    nearest: str | None


def _known(profile: BotProfile | None) -> set[str]:
    if profile is None:
        return set()
    known = {normalize(t) for i in profile.intents for t in (*i.examples, *i.negatives)}
    known |= {normalize(q) for k in profile.knowledge for q in k.questions}
    return known


@router.get(
    "/missed-questions",
    response_model=Page[MissedQuestion],
    summary="What callers asked that the bot did not answer, most frequent first",
)
async def missed_questions(
    session: SessionDep,
    _who: Viewer,
    page: PageDep,
    days: Annotated[int, Query(ge=1, le=MAX_DAYS, description="how far back")] = 30,
) -> Page[MissedQuestion]:
    since = now() - timedelta(days=days)
    rows = (
        await session.execute(
            select(TurnRow.transcript, TurnRow.route, TurnRow.intent, TurnRow.finished_at)
            .where(
                TurnRow.route.in_(MISSED_ROUTES),
                TurnRow.finished_at >= since,
                TurnRow.transcript.is_not(None),
                TurnRow.purged_at.is_(None),
            )
            .order_by(TurnRow.finished_at.desc())
            .limit(MAX_SCAN)
        )
    ).all()
    current = await config_store.latest(session)
    known = _known(current.profile if current is not None else None)
    groups: dict[str, MissedQuestion] = {}
    for transcript, route, intent, finished in rows:  # newest first
        key = normalize(transcript or "")
        if not key or key in known:
            continue
        group = groups.get(key)
        if group is None:
            at = aware(finished)
            assert at is not None
            groups[key] = MissedQuestion(
                text=(transcript or "").strip(),
                normalized=key,
                count=1,
                last_seen=at,
                routes={route: 1},
                nearest=intent if route == "confirm" else None,
            )
        else:
            group.count += 1
            group.routes[route] = group.routes.get(route, 0) + 1
            if group.nearest is None and route == "confirm":
                group.nearest = intent
    ranked = sorted(groups.values(), key=lambda g: (-g.count, -g.last_seen.timestamp()))
    return Page(
        items=ranked[page.offset : page.offset + page.limit],
        total=len(ranked),
        limit=page.limit,
        offset=page.offset,
    )
