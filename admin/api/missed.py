"""Missed questions: what callers asked that the bot did not answer from its configuration.

A caller's turn is missed when it was routed to the honest fallback ("I am not sure..."),
only to a confirmation question (the nearest intent or entry was not near enough to
answer; ``declined`` when the caller's next turn said "no" to it, whose "no" is then no
question of its own), or to a person: matched by its meaning (route ``semantic``) to an
intent whose action is a transfer in the newest configuration. Words that are already an
intent's example or negative, or a knowledge question, in the newest configuration are left
out (an editor added them: they are no longer missed).

Turns are grouped by their words as the intent matcher compares them
(``bot.intents.match.normalize``: case, punctuation and hesitations aside); then, when the
API runs in a node with a sentence embedder, by meaning: the word groups, in rank order
(below), each take in every later one whose embedding's cosine with theirs is at least
``SAME_MEANING`` (greedy: a group joins the first, highest-ranked, leader near enough).
Without an embedder (``switchboard admin``), or when it fails, the word groups stand.

Groups are ranked by the calls they affected (``calls``: distinct calls with a turn in the
group; a caller who asks the same thing three times in one call is one), then by turns
(``count``), then the most recently seen first: what an editor fixes first is what the
most callers ran into. Groups merged by meaning take the union of their calls (a call that
asked in both wordings counts once).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Literal

import numpy as np
from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, PrivateAttr
from sqlalchemy import ColumnElement, select, tuple_

from admin.api.pagination import DbText, Page, PageDep
from admin.db import aware, now
from admin.deps import SessionDep, Viewer
from admin.node_port import NodePort
from bot.calllog.models import TurnRow
from bot.config import store as config_store
from bot.intents.confirm import read_answer
from bot.intents.match import normalize
from bot.profile import BotProfile

log = logging.getLogger(__name__)

router = APIRouter(prefix="/api/v1", tags=["calls"])

#: The routes of a turn the configuration did not answer.
MISSED_ROUTES = ("fallback", "confirm")
#: The newest missed turns looked at, at most: a bound on one request's work.
MAX_SCAN = 5000
MAX_DAYS = 365
#: Two word groups mean the same when their sentence embeddings' cosine is at least this.
#: Conservative: one request in other words, not related ones (MiniLM: "do you sell gift
#: cards" and "can I buy a gift card" 0.82; "do you sell bikes" 0.45; "is there parking near
#: the shop?" and "where can I park" 0.58 stay two groups).
SAME_MEANING = 0.8
#: The highest-ranked word groups grouped by meaning, at most (the rest stay word groups):
#: a bound on what one request embeds.
MAX_MEANING = 500
#: How many other wordings a group lists.
MAX_VARIANTS = 5


class MissedQuestion(BaseModel):
    """Callers' words the bot did not answer, grouped by what the matcher compares.

    Ranked by ``calls``, then ``count``, then ``last_seen`` (the newest first)."""

    #: The words as last said (what an editor adds as an example).
    text: str
    #: The group's words as the matcher compares them.
    normalized: str
    #: Distinct calls with a turn in the group: what the list is ranked by first.
    calls: int
    #: Turns in the group (a call may ask more than once): the second key of the ranking.
    count: int
    #: The newest turn's time: the last key of the ranking (the most recent first).
    last_seen: datetime
    #: How each was routed: ``fallback`` (not sure), ``confirm`` (asked about ``nearest``),
    #: ``declined`` (asked, and the caller said no) or ``transfer`` (put through to a person).
    routes: dict[str, int]
    #: The intent or knowledge topic the bot asked about last (route ``confirm``), if any.
    nearest: str | None
    #: Other wordings in the group (grouped by meaning), highest-ranked first.
    variants: list[str] = []
    #: The calls behind ``calls`` (not sent): groups merged by meaning take their union.
    _call_ids: set[uuid.UUID] = PrivateAttr(default_factory=set)

    def _add_call(self, call_id: uuid.UUID) -> None:
        self._call_ids.add(call_id)
        self.calls = len(self._call_ids)

    def _take_calls(self, other: MissedQuestion) -> None:
        self._call_ids |= other._call_ids
        self.calls = len(self._call_ids)


class MissedPage(Page[MissedQuestion]):
    #: ``meaning``: grouped with the node's sentence embedder; ``words``: by words only.
    grouped_by: Literal["meaning", "words"]


@dataclass
class _Turn:
    call_id: uuid.UUID
    seq: int
    transcript: str
    route: str
    intent: str | None
    finished_at: datetime


def _known(profile: BotProfile | None) -> set[str]:
    if profile is None:
        return set()
    known = {normalize(t) for i in profile.intents for t in (*i.examples, *i.negatives)}
    known |= {normalize(q) for k in profile.knowledge for q in k.questions}
    return known


def _transfer_intents(profile: BotProfile | None) -> set[str]:
    if profile is None:
        return set()
    return {i.name for i in profile.intents if i.action == "transfer"}


async def _missed_turns(session: SessionDep, since: datetime, transfers: set[str]) -> list[_Turn]:
    """The missed turns since ``since``, newest first, ``declined`` marked, and the "no"
    that declined a question left out."""
    missed: ColumnElement[bool] = TurnRow.route.in_(MISSED_ROUTES)
    if transfers:
        missed = missed | ((TurnRow.route == "semantic") & TurnRow.intent.in_(sorted(transfers)))
    rows = (
        await session.execute(
            select(
                TurnRow.call_id,
                TurnRow.seq,
                TurnRow.transcript,
                TurnRow.route,
                TurnRow.intent,
                TurnRow.finished_at,
            )
            .where(
                missed,
                TurnRow.finished_at >= since,
                TurnRow.transcript.is_not(None),
                TurnRow.purged_at.is_(None),
            )
            .order_by(TurnRow.finished_at.desc())
            .limit(MAX_SCAN)
        )
    ).all()
    turns = []
    for call_id, seq, transcript, route, intent, finished in rows:
        at = aware(finished)
        assert at is not None
        kind = "transfer" if route == "semantic" else route
        turns.append(_Turn(call_id, seq, transcript or "", kind, intent, at))
    # The caller's reply to each confirmation question: a "no" declines it.
    asked = [(t.call_id, t.seq + 1) for t in turns if t.route == "confirm"]
    replies: dict[tuple[uuid.UUID, int], str] = {}
    for start in range(0, len(asked), 500):
        chunk = asked[start : start + 500]
        found = await session.execute(
            select(TurnRow.call_id, TurnRow.seq, TurnRow.transcript).where(
                tuple_(TurnRow.call_id, TurnRow.seq).in_(chunk)
            )
        )
        replies.update({(c, n): text or "" for c, n, text in found})
    confirms = {(t.call_id, t.seq) for t in turns if t.route == "confirm"}
    kept = []
    for t in turns:
        if (t.call_id, t.seq - 1) in confirms and read_answer(t.transcript) is not None:
            continue  # the caller's yes or no to the question before: no question itself
        if t.route == "confirm" and read_answer(replies.get((t.call_id, t.seq + 1), "")) == "no":
            t.route = "declined"
        kept.append(t)
    return kept


def _by_words(turns: list[_Turn], known: set[str]) -> list[MissedQuestion]:
    groups: dict[str, MissedQuestion] = {}
    for t in turns:  # newest first
        key = normalize(t.transcript)
        if not key or key in known:
            continue
        asked = t.route in ("confirm", "declined")
        group = groups.get(key)
        if group is None:
            group = groups[key] = MissedQuestion(
                text=t.transcript.strip(),
                normalized=key,
                calls=0,
                count=1,
                last_seen=t.finished_at,
                routes={t.route: 1},
                nearest=t.intent if asked else None,
            )
        else:
            group.count += 1
            group.routes[t.route] = group.routes.get(t.route, 0) + 1
            if group.nearest is None and asked:
                group.nearest = t.intent
        group._add_call(t.call_id)
    return _ranked(list(groups.values()))


def _ranked(groups: list[MissedQuestion]) -> list[MissedQuestion]:
    """The most calls affected first, then the most turns, then the most recent."""
    return sorted(groups, key=lambda g: (-g.calls, -g.count, -g.last_seen.timestamp()))


def by_meaning(groups: list[MissedQuestion], vectors: list[list[float]]) -> list[MissedQuestion]:
    """``groups`` (ranked) merged greedily by meaning: each group, in rank order (the most
    calls first), takes in every later one whose vector's cosine with its own is
    ``SAME_MEANING`` or more, and the union of their calls. ``vectors`` are unit length,
    one per group."""
    unit = np.asarray(vectors, dtype=np.float32)
    near = unit @ unit.T >= SAME_MEANING
    taken = np.zeros(len(groups), dtype=bool)
    merged: list[MissedQuestion] = []
    for i, leader in enumerate(groups):
        if taken[i]:
            continue
        taken[i] = True
        group = leader.model_copy(deep=True)
        for j in np.flatnonzero(near[i] & ~taken):
            taken[j] = True
            other = groups[j]
            group.count += other.count
            group._take_calls(other)
            group.last_seen = max(group.last_seen, other.last_seen)
            for route, n in other.routes.items():
                group.routes[route] = group.routes.get(route, 0) + n
            group.nearest = group.nearest or other.nearest
            if len(group.variants) < MAX_VARIANTS:
                group.variants.append(other.text)
        merged.append(group)
    return _ranked(merged)


async def _grouped(
    node: NodePort | None, groups: list[MissedQuestion]
) -> tuple[list[MissedQuestion], Literal["meaning", "words"]]:
    if node is None or not groups:
        return groups, "words"
    head, rest = groups[:MAX_MEANING], groups[MAX_MEANING:]
    try:
        vectors = await node.embed([g.text for g in head])
    except Exception as exc:  # the node's embedder is away or slow: the words stand
        log.warning("missed questions grouped by words: the embedder failed: %s", exc)
        return groups, "words"
    if vectors is None:
        return groups, "words"
    return _ranked(by_meaning(head, vectors) + rest), "meaning"


@router.get(
    "/missed-questions",
    response_model=MissedPage,
    summary="What callers asked that the bot did not answer, the most calls affected first",
)
async def missed_questions(
    request: Request,
    session: SessionDep,
    _who: Viewer,
    page: PageDep,
    days: Annotated[int, Query(ge=1, le=MAX_DAYS, description="how far back")] = 30,
    words: Annotated[
        DbText | None,
        Query(
            max_length=200,
            description='only these words, as the matcher compares them (a "not sure" '
            "topic of the outcomes summary)",
        ),
    ] = None,
) -> MissedPage:
    current = await config_store.latest(session)
    profile = current.profile if current is not None else None
    turns = await _missed_turns(session, now() - timedelta(days=days), _transfer_intents(profile))
    if words is not None:
        key = normalize(words)
        turns = [t for t in turns if normalize(t.transcript) == key]
    groups, grouped_by = await _grouped(request.app.state.node, _by_words(turns, _known(profile)))
    return MissedPage(
        items=groups[page.offset : page.offset + page.limit],
        total=len(groups),
        limit=page.limit,
        offset=page.offset,
        grouped_by=grouped_by,
    )
